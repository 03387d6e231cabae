"""Dead-code elimination: drop bound symbols whose outputs nothing uses."""

from __future__ import annotations

from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace

__all__ = ["dce"]

# Symbols kept even when their outputs are unused.
_ALWAYS_KEPT = {RETURN.id, DEL.id}


def dce(trace: Trace) -> Trace:
    needed: set[str] = set()
    kept: list[BoundSymbol] = []
    for bound_symbol in reversed(trace.bound_symbols):
        outputs = {p.name for p in bound_symbol.proxy_outputs()}
        if outputs and outputs <= {p.name for p in bound_symbol.proxy_args()}:
            continue  # returns (some of) its inputs: computes nothing new (dropout in eval mode)
        if bound_symbol.symbol.id in _ALWAYS_KEPT or outputs & needed or _has_side_effects(bound_symbol):
            kept.append(bound_symbol)
            needed.update(p.name for p in bound_symbol.proxy_args())
    new = from_trace(trace, "Dead code elimination")
    new.bound_symbols.extend(reversed(kept))
    return new


def _has_side_effects(bound_symbol: BoundSymbol) -> bool:
    # a random op whose numbers go unused still advances its generator, as in eager
    return not bound_symbol.symbol.tags.isdisjoint(("side_effect", "random"))
