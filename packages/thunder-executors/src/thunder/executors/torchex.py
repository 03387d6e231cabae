"""The torch executor: runs every torch-language symbol and every prim with PyTorch's own ops.

Torch-language symbols mirror PyTorch's signatures, so each is claimed as a call of the torch
callable it was registered for (``ltorch.linear`` runs as ``torch.nn.functional.linear``). Prims are
claimed too, so that anything another executor leaves decomposed still runs; the few whose
signature differs from PyTorch's go through small adapters defined below.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

import thunder.torch as ltorch
from thunder.core import prims
from thunder.core.executor import OperatorExecutor, register_executor, to_torch_arguments
from thunder.core.symbol import Symbol

__all__ = ["executor", "TorchExecutor"]

_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", torch.nn.functional),
    ("torch.special", torch.special),
    ("torch.Tensor", torch.Tensor),
    ("operator", operator),
)


class TorchExecutor(OperatorExecutor):
    def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return to_torch_arguments(args, kwargs)


executor = TorchExecutor("torch", version=torch.__version__)


def _printable_path(fn: Any) -> tuple[str, str] | None:
    """(module path, name) under which ``fn`` is reachable from ``import torch`` or ``import operator``."""
    name = getattr(fn, "__name__", None)
    for module, namespace in _NAMESPACES:
        if name and getattr(namespace, name, None) is fn:
            return module, name
    return None


def _operator(fn: Callable, like: Symbol) -> Symbol:
    path = _printable_path(fn)
    if path is None:
        return executor.register_operator(fn.__name__, fn=fn, like=like)
    module, name = path
    existing = executor.operators.get(f"{module}.{name}")
    if existing is not None:
        return existing
    operator_symbol = executor.register_operator(name, fn=fn, like=like, module=module)
    executor.operators[f"{module}.{name}"] = operator_symbol
    return operator_symbol


def _claim_torch_language() -> None:
    """Each torch-language symbol runs as the first torch callable it stands for."""
    for torch_fn, symbol in ltorch.torch_callables().items():
        if symbol.id in executor.implementations:
            continue
        if _printable_path(torch_fn) is not None:
            executor.register_implementation(symbol, _operator(torch_fn, symbol))
    executor.register_implementation(ltorch.getitem, _operator(operator.getitem, ltorch.getitem))


# Prims whose arguments match a PyTorch function's.
_SAME_SIGNATURE: dict[Symbol, Callable] = {
    prims.convert_element_type: torch.Tensor.to,
    prims.full: torch.full,
    prims.reshape: torch.reshape,
    prims.transpose: torch.permute,
    prims.cat: torch.cat,
    prims.var: torch.var,
    prims.argmax: torch.argmax,
    prims.argmin: torch.argmin,
    prims.matmul: torch.matmul,
    prims.linear: torch.nn.functional.linear,
    prims.take_along_axis: torch.take_along_dim,
    prims.where: torch.where,
}


def _elementwise_prims() -> dict[Symbol, Callable]:
    table = {}
    for name in dir(prims):
        symbol = getattr(prims, name)
        if isinstance(symbol, Symbol) and "elementwise" in symbol.tags and symbol not in _SAME_SIGNATURE:
            table[symbol] = getattr(torch, symbol.name, None)
    return {s: fn for s, fn in table.items() if fn is not None}


# Adapters for the prims whose semantics or signature differ from PyTorch's.
def broadcast_in_dim(
    a: torch.Tensor, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> torch.Tensor:
    view_shape = [1] * len(shape)
    for size, dim in zip(a.shape, broadcast_dimensions):
        view_shape[dim] = size
    return a.reshape(view_shape).expand(shape)


def slice_prim(
    a: torch.Tensor, start: Sequence[int], end: Sequence[int], strides: Sequence[int]
) -> torch.Tensor:
    return a[tuple(slice(s, e, st) for s, e, st in zip(start, end, strides))]


def uniform(
    shape: Sequence[int], minval: float, maxval: float, *, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    return torch.empty(shape, device=device, dtype=dtype).uniform_(minval, maxval)


def prod(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """The prim keeps the input's dtype (torch.prod makes bools and small integers int64)."""
    for dim in sorted(dims, reverse=True):
        a = torch.prod(a, dim, dtype=a.dtype)
    return a


def sum(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:  # noqa: A001 -- the prim's name
    """The prim keeps the input's dtype and reduces nothing for no dims (torch.sum reduces all)."""
    return torch.sum(a, tuple(dims), dtype=a.dtype) if dims else a.clone()


def amax(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    return torch.amax(a, tuple(dims)) if dims else a.clone()


def amin(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    return torch.amin(a, tuple(dims)) if dims else a.clone()


def div(a: Any, b: Any) -> Any:
    """Prim division: true division for floats, truncation for integers."""
    floating = any(
        isinstance(x, float) or (isinstance(x, torch.Tensor) and x.is_floating_point()) for x in (a, b)
    )
    return torch.true_divide(a, b) if floating else torch.div(a, b, rounding_mode="trunc")


def _binary_adapter(fn: Callable) -> Callable:
    """PyTorch's binary functions take a number only as their second argument."""

    def adapted(a: Any, b: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            a = torch.scalar_tensor(a, dtype=b.dtype, device=b.device)
        return fn(a, b)

    return adapted


_ADAPTED: dict[Symbol, Callable] = {
    prims.broadcast_in_dim: broadcast_in_dim,
    prims.slice_prim: slice_prim,
    prims.uniform: uniform,
    prims.prod: prod,
    prims.sum: sum,
    prims.amax: amax,
    prims.amin: amin,
    prims.div: div,
}


def _claim_prims() -> None:
    for symbol, fn in {**_elementwise_prims(), **_SAME_SIGNATURE}.items():
        if symbol.id in executor.implementations:
            continue
        is_binary = symbol.name in {
            "add",
            "sub",
            "mul",
            "pow",
            "remainder",
            "fmod",
            "maximum",
            "minimum",
            "atan2",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
        }
        if is_binary:
            fn = _binary_adapter(fn)
            fn.__name__ = f"prim_{symbol.name}"
            globals()[fn.__name__] = fn
            fn.__qualname__ = fn.__name__
        executor.register_implementation(symbol, _operator(fn, symbol))
    for symbol, fn in _ADAPTED.items():
        executor.register_implementation(symbol, executor.register_operator(fn.__name__, fn=fn, like=symbol))


_claim_torch_language()
_claim_prims()
register_executor(executor)
