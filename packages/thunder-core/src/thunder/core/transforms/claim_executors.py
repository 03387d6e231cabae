"""Hand each bound symbol to the first executor that claims it; decompose what nobody claims.

Operator executors lower a claimed symbol to their own operators on the spot. Symbols claimed by
a fusion executor are flattened to the leaves it fuses and marked; afterwards each run of
neighbouring marked symbols of one fusion executor becomes a single region bound symbol.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.executor import Executor, FusionExecutor, OperatorExecutor
from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx

__all__ = ["claim_executors", "UnclaimedSymbolError"]

_STRUCTURAL = (RETURN, DEL)


class UnclaimedSymbolError(NotImplementedError):
    pass


def claim_executors(trace: Trace, executors: Sequence[Executor]) -> Trace:
    new = from_trace(trace, "Transform for execution")
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]] = []
    with tracectx(new):
        for bound_symbol in trace.bound_symbols:
            claimed += _claim(bound_symbol, executors)
    new.bound_symbols.extend(_fuse_regions(claimed))
    return new


def _claim(
    bound_symbol: BoundSymbol, executors: Sequence[Executor]
) -> list[tuple[BoundSymbol, FusionExecutor | None]]:
    if bound_symbol.symbol in _STRUCTURAL:
        return [(bound_symbol, None)]
    for executor in executors:
        if not executor.can_execute(bound_symbol):
            continue
        if isinstance(executor, OperatorExecutor):
            return [(lowered, None) for lowered in executor.lower(bound_symbol)]
        if isinstance(executor, FusionExecutor):
            return [(leaf, executor) for leaf in _fusible_leaves(bound_symbol, executor)]
    if not bound_symbol.symbol.is_leaf:  # an empty decomposition returned its input: nothing to run
        return [pair for sub in bound_symbol.subsymbols for pair in _claim(sub, executors)]
    names = ", ".join(e.name for e in executors)
    raise UnclaimedSymbolError(
        f"no executor can run {bound_symbol.symbol.id} and it has no decomposition (executors tried: {names})"
    )


def _fusible_leaves(bound_symbol: BoundSymbol, executor: FusionExecutor) -> list[BoundSymbol]:
    if executor.can_fuse(bound_symbol) or not bound_symbol.subsymbols:
        return [bound_symbol]
    return [leaf for sub in bound_symbol.subsymbols for leaf in _fusible_leaves(sub, executor)]


def _fuse_regions(claimed: list[tuple[BoundSymbol, FusionExecutor | None]]) -> list[BoundSymbol]:
    result: list[BoundSymbol] = []
    region: list[BoundSymbol] = []
    region_executor: FusionExecutor | None = None
    counters: dict[str, int] = {}

    def close_region() -> None:
        nonlocal region
        if region and region_executor is not None:
            index = counters.get(region_executor.name, 0)
            counters[region_executor.name] = index + 1
            result.append(region_executor.fuse(region, index))
        region = []

    for bound_symbol, executor in claimed:
        if executor is not region_executor:
            close_region()
            region_executor = executor
        if executor is None:
            result.append(bound_symbol)
        else:
            region.append(bound_symbol)
    close_region()
    return result
