"""The map from PyTorch callables to thunder symbols, and the decorator that fills it.

``@torchsymbol(torch.add, torch.Tensor.add, method="add")`` turns a Python function written in
terms of other symbols into a composite symbol printed as ``ltorch.add``, makes it what the
frontend calls instead of each listed torch callable, and makes it the proxy method ``add``.

A symbol takes the arguments of the torch function's signature, so that a trace records one
spelling that every torch callable it stands for accepts (executors call one of them). Where eager
also takes an int list as ints one by one (``x.view(2, 3)``, ``x.view(4)``, ``torch.zeros(2, 3)``),
``sizes=`` names that parameter and the frontend gathers the ints into a tuple before the symbol
sees them (``int_list_call``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from thunder.core.proxies import register_tensor_method
from thunder.core.symbol import Symbol, make_composite
from thunder.torch.utils import is_one_int

__all__ = ["torchsymbol", "alias", "symbol_for", "callable_for", "torch_callables"]

_torch_to_symbol: dict[Any, Symbol] = {}
# the callables the frontend calls in place of a torch callable, where that is not the symbol itself
_int_list_calls: dict[Any, Callable] = {}


def _key(fn: Any) -> Any:
    # Unbound C methods of torch.Tensor are method descriptors; bound ones differ per tensor.
    return getattr(fn, "__func__", fn)


def torchsymbol(
    *torch_fns: Any,
    method: str | tuple[str, ...] = (),
    name: str | None = None,
    tags: frozenset[str] = frozenset(),
    sizes: str | None = None,
) -> Callable[[Callable], Symbol]:
    """``sizes``: the int-list parameter that eager also takes as ints one by one where it is the first
    argument after ``self`` (methods) or the first argument (functions: ``torch.zeros(2, 3)``)."""
    methods = (method,) if isinstance(method, str) else method

    def decorate(fn: Callable) -> Symbol:
        symbol = make_composite(
            name or fn.__name__, _refusing_requires_grad(fn, name or fn.__name__), tags=tags
        )
        position, gathering = None, None
        if sizes is not None:
            position = list(inspect.signature(fn).parameters).index(sizes)
            gathering = int_list_call(symbol, position, sizes)
        for torch_fn in torch_fns:
            _torch_to_symbol[_key(torch_fn)] = symbol
            if gathering is not None and (position == 0 or _is_tensor_method(torch_fn)):
                _int_list_calls[_key(torch_fn)] = gathering
        for method_name in methods:
            register_tensor_method(method_name, symbol if gathering is None else gathering)
        return symbol

    return decorate


def _is_tensor_method(torch_fn: Any) -> bool:
    return getattr(torch_fn, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase)


def int_list_call(symbol: Symbol, position: int, sizes: str) -> Callable:
    """``symbol``, whose parameter ``sizes`` at ``position`` is an int list, called as eager's argument
    parser reads one given as ints one by one: ``x.view(2, 3)`` and ``x.view(4)`` are ``view(x, (2, 3))``
    and ``view(x, (4,))``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        given = args[position:]
        if sizes in kwargs and len(args) == position:
            # positionally in traces: the torch executor may call another of the symbol's callables
            # (``view`` runs as ``Tensor.reshape``, whose parameter is ``shape``)
            kwargs = dict(kwargs)
            return symbol(*args, kwargs.pop(sizes), **kwargs)
        if not given or sizes in kwargs or not is_one_int(given[0]):
            return symbol(*args, **kwargs)
        for index, value in enumerate(given):
            if not is_one_int(value):
                raise TypeError(
                    f"{symbol.name}(): argument '{sizes}' must be tuple of ints, but found element of type "
                    f"{type(value).__name__} at pos {index}"
                )
        return symbol(*args[:position], tuple(given), **kwargs)

    return call


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


def callable_for(torch_fn: Any) -> Callable | None:
    """What the frontend calls for ``torch_fn``: its symbol, or the symbol behind ``int_list_call``."""
    try:
        gathering = _int_list_calls.get(_key(torch_fn))
    except TypeError:
        return None
    return gathering if gathering is not None else symbol_for(torch_fn)


def torch_callables() -> dict[Any, Symbol]:
    return dict(_torch_to_symbol)
