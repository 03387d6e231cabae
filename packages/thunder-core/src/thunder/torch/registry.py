"""The map from PyTorch callables to thunder symbols, and the decorator that fills it.

``@torchsymbol(torch.add, torch.Tensor.add, method="add")`` turns a Python function written in
terms of other symbols into a composite symbol printed as ``ltorch.add``, makes it what the
frontend calls instead of each listed torch callable, and makes it the proxy method ``add``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
        symbol = make_composite(name or fn.__name__, fn, tags=tags)
        for torch_fn in torch_fns:
            _torch_to_symbol[_key(torch_fn)] = symbol
        for method_name in methods:
            register_tensor_method(method_name, symbol)
        return symbol

    return decorate


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
