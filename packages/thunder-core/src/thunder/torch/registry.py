"""The map from PyTorch callables to thunder symbols, and the decorator that fills it.

``@torchsymbol(torch.add, torch.Tensor.add, method="add")`` turns a Python function written in
terms of other symbols into a composite symbol printed as ``ltorch.add``, makes it what the
frontend calls instead of each listed torch callable, and makes it the proxy method ``add``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from thunder.core.proxies import register_tensor_method
from thunder.core.symbol import Symbol, make_composite

__all__ = ["torchsymbol", "alias", "symbol_for", "torch_callables"]

_torch_to_symbol: dict[Any, Symbol] = {}


def _key(fn: Any) -> Any:
    # Unbound C methods of torch.Tensor are method descriptors; bound ones differ per tensor.
    return getattr(fn, "__func__", fn)


def torchsymbol(
    *torch_fns: Any,
    method: str | tuple[str, ...] = (),
    name: str | None = None,
    tags: frozenset[str] = frozenset(),
) -> Callable[[Callable], Symbol]:
    methods = (method,) if isinstance(method, str) else method

    def decorate(fn: Callable) -> Symbol:
        symbol = make_composite(
            name or fn.__name__, _refusing_requires_grad(fn, name or fn.__name__), tags=tags
        )
        for torch_fn in torch_fns:
            _torch_to_symbol[_key(torch_fn)] = symbol
        for method_name in methods:
            register_tensor_method(method_name, symbol)
        return symbol

    return decorate


def _refusing_requires_grad(fn: Callable, name: str) -> Callable:
    """``fn``, raising when called with ``requires_grad=True`` in grad mode: a factory's new leaf that
    requires grad, whose uses eager records for autograd; thunder's computation does not (it runs them
    under no_grad, or differentiates only with respect to its inputs). Under no_grad eager records
    nothing either, and the executor makes the leaf as eager does."""
    parameters = inspect.signature(fn).parameters.values()
    if not any(p.name == "requires_grad" or p.kind is p.VAR_KEYWORD for p in parameters):
        return fn

    @functools.wraps(fn)
    def decomposition(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("requires_grad") and torch.is_grad_enabled():
            raise NotImplementedError(
                f"{name}(..., requires_grad=True) in the compiled function makes a new leaf tensor that "
                "requires grad, which thunder does not support: create it outside the function and pass it "
                "in, or call requires_grad_() on the returned tensor"
            )
        return fn(*args, **kwargs)

    return decomposition


def alias(torch_fn: Any, symbol: Symbol, *, method: str | tuple[str, ...] = ()) -> None:
    """Make ``symbol`` also stand for ``torch_fn`` (``torch.arccos`` for ``ltorch.acos``)."""
    _torch_to_symbol.setdefault(_key(torch_fn), symbol)
    for method_name in (method,) if isinstance(method, str) else method:
        register_tensor_method(method_name, symbol)


def symbol_for(torch_fn: Any) -> Symbol | None:
    """The thunder symbol that replaces ``torch_fn``, or None if there is none."""
    try:
        return _torch_to_symbol.get(_key(torch_fn))
    except TypeError:  # unhashable callables are never torch functions
        return None


def torch_callables() -> dict[Any, Symbol]:
    return dict(_torch_to_symbol)
