"""Helpers the data-parallel transforms share: where values are made and read, and inserting code.

A transform here decides *where* collectives go (after the bound symbol that produces a gradient,
before the one that first reads a parameter) and records them with ``Inserter``, which copies a
trace and records extra bound symbols at chosen positions, in the new trace's name space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace, get_tracectx, tracectx

__all__ = [
    "producers",
    "first_uses",
    "returned",
    "Inserter",
    "record",
    "gather_full",
]


def producers(trace: Trace) -> dict[str, int]:
    """The index of the bound symbol that makes each proxy (trace inputs are absent)."""
    made: dict[str, int] = {}
    for index, bound_symbol in enumerate(trace.bound_symbols):
        for proxy in bound_symbol.proxy_outputs():
            made.setdefault(proxy.name, index)
    return made


def first_uses(trace: Trace) -> dict[str, int]:
    """The index of the first bound symbol that reads each proxy."""
    used: dict[str, int] = {}
    for index, bound_symbol in enumerate(trace.bound_symbols):
        for proxy in bound_symbol.proxy_args():
            used.setdefault(proxy.name, index)
    return used


def returned(trace: Trace) -> tuple[int, BoundSymbol]:
    """The position and the bound symbol of the trace's return."""
    for index, bound_symbol in enumerate(trace.bound_symbols):
        if bound_symbol.symbol is RETURN:
            return index, bound_symbol
    raise ValueError(f"trace {trace.name} has no return")


def record(
    symbol: Symbol, *args: Any, output: TensorProxy | tuple[TensorProxy, ...] | None = None, **kwargs: Any
) -> Any:
    """Call ``symbol`` while tracing; with ``output``, the result is bound to that existing proxy."""
    if output is None:
        return symbol(*args, **kwargs)
    trace = get_tracectx()
    assert trace is not None
    trace.record(BoundSymbol(symbol, args, kwargs, output))
    return output


class Inserter:
    """A copy of ``trace`` where code recorded ``before(i)``/``after(i)`` lands around bound symbol i."""

    def __init__(self, trace: Trace, header: str):
        self.source = trace
        self.trace = from_trace(trace, header)
        self._before: dict[int, list[Callable[[], None]]] = {}
        self._after: dict[int, list[Callable[[], None]]] = {}

    def before(self, index: int, emit: Callable[[], None]) -> None:
        self._before.setdefault(index, []).append(emit)

    def after(self, index: int, emit: Callable[[], None]) -> None:
        """``index`` -1 means: before everything."""
        if index < 0:
            self.before(0, emit)
        else:
            self._after.setdefault(index, []).append(emit)

    def build(self, new_return: Callable[[Any], Any] | None = None) -> Trace:
        """The new trace; ``new_return`` maps the returned value to what the new trace returns."""
        with tracectx(self.trace):
            for index, bound_symbol in enumerate(self.source.bound_symbols):
                for emit in self._before.get(index, []):
                    emit()
                if bound_symbol.symbol is RETURN and new_return is not None:
                    bound_symbol = bound_symbol.replace(args=(new_return(bound_symbol.args[0]),))
                self.trace.record(bound_symbol)
                for emit in self._after.get(index, []):
                    emit()
        return self.trace


def gather_full(pending: Any, full: TensorProxy, gathered_rows: int) -> None:
    """``full`` := the all-gathered parameter, without the padding rows sharding added."""
    from thunder.distributed import prims as dist

    if gathered_rows == full.shape[0]:
        record(dist.wait, pending, output=full)
        return
    padded = dist.wait(pending)
    ends = [full.shape[0], *full.shape[1:]]
    record(prims.slice_prim, padded, [0] * full.ndim, ends, [1] * full.ndim, output=full)
