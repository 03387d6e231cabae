"""Gradient rules: how to differentiate a symbol, registered next to the symbol's definition.

A rule is a vector-Jacobian product written with thunder symbols, so that the backward trace it
records is an ordinary trace that executors run::

    @register_vjp(prims.exp)
    def _exp_vjp(g, a, *, out):
        return (prims.mul(g, out),)

It receives the cotangent ``g`` of the output (a structure like the output; ``None`` where an output
received no gradient), then the positional arguments of the call (keyword arguments given by name
are bound to their positions first, defaults filled in), then ``out=`` the forward output and the
call's keyword-only arguments. It returns one gradient per positional argument: a proxy, ``None``
(no gradient, which is zero), or for a sequence argument (``cat``'s tensors) a sequence of those.
A single gradient may be returned without the tuple.

The autograd transform uses a symbol's rule when it has one and otherwise differentiates its
decomposition; a leaf without a rule that lies on a gradient path is an error naming the symbol.
Rules on torch-language symbols are therefore optional: they exist where the decomposition's
gradient would be slow or save too much (softmax, cross_entropy, linear, ...). A rule registered
with ``applies=`` is used only for calls whose arguments satisfy it (``add`` of real floating-point
tensors); other calls are differentiated through the decomposition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from thunder.core.symbol import BoundSymbol, Symbol

__all__ = ["register_vjp", "vjp_rule", "vjp_rule_for", "symbols_with_vjp"]

_vjp_rules: dict[str, Callable] = {}
_applies: dict[str, Callable[..., bool]] = {}


def register_vjp(
    *symbols: Symbol, applies: Callable[..., bool] | None = None
) -> Callable[[Callable], Callable]:
    """Register the decorated function as the gradient rule of each of ``symbols`` (for the calls
    whose arguments satisfy ``applies``, when it is given)."""

    def decorate(rule: Callable) -> Callable:
        for symbol in symbols:
            _vjp_rules[symbol.id] = rule
            if applies is None:
                _applies.pop(symbol.id, None)
            else:
                _applies[symbol.id] = applies
        return rule

    return decorate


def vjp_rule(symbol: Symbol) -> Callable | None:
    return _vjp_rules.get(symbol.id)


def vjp_rule_for(bound_symbol: BoundSymbol) -> Callable | None:
    """The rule that differentiates this call, or ``None`` (then its decomposition is differentiated)."""
    rule = _vjp_rules.get(bound_symbol.symbol.id)
    applies = _applies.get(bound_symbol.symbol.id)
    if rule is None or applies is None or applies(*bound_symbol.args, **bound_symbol.kwargs):
        return rule
    return None


def symbols_with_vjp() -> frozenset[str]:
    return frozenset(_vjp_rules)
