"""Small helpers that several transforms share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace


def rename_outputs(bound_symbols: list[BoundSymbol], produced: Any, wanted: Any) -> list[BoundSymbol]:
    """Make ``bound_symbols``, which compute ``produced``, bind the proxies of ``wanted`` instead.

    A lowering traces new bound symbols whose outputs are fresh proxies; the rest of the trace
    refers to the original outputs, so the fresh names are substituted by the original ones.
    """
    renames: dict[str, Proxy] = {}
    for new, old in zip(tree_leaves(produced), tree_leaves(wanted)):
        if isinstance(new, Proxy) and isinstance(old, Proxy):
            renames[new.name] = old
    return [substitute(b, renames) for b in bound_symbols]


def substitute(bound_symbol: BoundSymbol, renames: dict[str, Proxy]) -> BoundSymbol:
    if not renames:
        return bound_symbol

    def swap(x: Any) -> Any:
        return renames.get(x.name, x) if isinstance(x, Proxy) else x

    return bound_symbol.replace(
        args=tree_map(swap, bound_symbol.args),
        kwargs=tree_map(swap, bound_symbol.kwargs),
        output=tree_map(swap, bound_symbol.output),
        subsymbols=tuple(substitute(s, renames) for s in bound_symbol.subsymbols),
    )


def producers(bound_symbols: Sequence[BoundSymbol]) -> dict[str, BoundSymbol]:
    """The bound symbol making each proxy; identities (``float()`` of a float32 tensor, whose output is
    its input) make nothing."""
    made: dict[str, BoundSymbol] = {}
    for bound_symbol in bound_symbols:
        inputs = {p.name for p in bound_symbol.proxy_args()}
        for proxy in bound_symbol.proxy_outputs():
            if proxy.name not in inputs:
                made[proxy.name] = bound_symbol
    return made


def readers(bound_symbols: Sequence[BoundSymbol]) -> dict[str, list[BoundSymbol]]:
    """The bound symbols reading each proxy, in program order (once per argument naming it)."""
    read: dict[str, list[BoundSymbol]] = {}
    for bound_symbol in bound_symbols:
        for proxy in bound_symbol.proxy_args():
            read.setdefault(proxy.name, []).append(bound_symbol)
    return read


def with_replacements(
    trace: Trace, new: Trace, replaced: dict[int, list[BoundSymbol]], dropped: set[int]
) -> Trace:
    """``new`` holding ``trace``'s bound symbols, each replaced by ``replaced[id(it)]`` where given and
    left out where its id is in ``dropped``: how a fold writes its result."""
    for bound_symbol in trace.bound_symbols:
        if id(bound_symbol) in replaced:
            new.bound_symbols.extend(replaced[id(bound_symbol)])
        elif id(bound_symbol) not in dropped:
            new.bound_symbols.append(bound_symbol)
    return new


def on_scalars(bound_symbol: BoundSymbol) -> bool:
    """Whether ``bound_symbol`` makes 0-dim tensors from 0-dim tensors (or from numbers) alone: an
    optimizer's step counter and the bias corrections and step sizes made from it."""
    outputs = [p for p in bound_symbol.proxy_outputs() if isinstance(p, TensorProxy)]
    args = [p for p in bound_symbol.proxy_args() if isinstance(p, TensorProxy)]
    return bool(outputs) and all(p.shape == () for p in (*outputs, *args))


def made_by_forward(trace: Trace) -> Callable[[BoundSymbol], bool] | None:
    """For a program that ran ``loss.backward()`` once (``inline_backward.py``): whether a symbol is
    work of the forward, one whose every output the forward made (``backward_boundaries``; a symbol
    that makes nothing is not). None for other programs (no backward, or several)."""
    if len(trace.backward_boundaries) != 1:
        return None
    made_before = trace.backward_boundaries[0]

    def of_forward(bound_symbol: BoundSymbol) -> bool:
        outputs = bound_symbol.proxy_outputs()
        return bool(outputs) and all(p.name in made_before for p in outputs)

    return of_forward
