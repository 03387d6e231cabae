"""Hugging Face's RMS norm found in a trace, op for op: what ``fold_rms_norms.py`` folds into one-row
linears and ``rms_norms.py`` makes one differentiable symbol.

The norm as Hugging Face writes it: ``x.float()`` (absent in float32), ``pow(2)`` (or ``h * h``),
``mean(-1, keepdim=True)``, ``+ eps`` (a Python number), ``rsqrt``, ``h * r``, then Llama's
``weight * r.to(x.dtype)`` or Gemma's ``(r * (1.0 + weight.float())).to(x.dtype)``, with a 1-D weight.
``match_rms_norm`` starts from the normalized row and walks back through its producers.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thunder.core import dtypes
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol

__all__ = [
    "RmsNorm",
    "producer_call",
    "call_arguments",
    "is_identity_conversion",
    "match_rms_norm",
    "removable_ops",
]

# dtype conversions: one tensor in, the same tensor in another dtype out
_CONVERSIONS = frozenset({"ltorch.to", "ltorch.float", "ltorch.type_as", "ltorch.half", "ltorch.bfloat16"})
_RESHAPES = frozenset({"prims.reshape", "ltorch.reshape", "ltorch.view"})


@dataclass(frozen=True)
class RmsNorm:
    """An RMS norm found in a trace: ``style``'s norm of ``x`` with ``weight`` and ``eps``."""

    x: TensorProxy
    weight: TensorProxy
    eps: float
    style: str
    ops: tuple[BoundSymbol, ...]  # the bound symbols from ``x`` to the normalized row


def removable_ops(
    norm: RmsNorm, row: str, readers: dict[str, list[BoundSymbol]], row_readers: set[int] | None = None
) -> set[int] | None:
    """The ids of the bound symbols that computing ``norm`` elsewhere leaves unread (the norm's ops and
    identity conversions of their values), or None when something else reads one of its values.
    ``row_readers``: the ids of the bound symbols that may read the normalized ``row`` (None: any)."""
    removable = {id(b) for b in norm.ops}
    values = {p.name for b in norm.ops for p in b.proxy_outputs()} - {norm.x.name, norm.weight.name}
    for value in values:
        for reader in readers.get(value, []):
            if id(reader) in removable:
                continue
            if value == row and (row_readers is None or id(reader) in row_readers):
                continue
            if is_identity_conversion(
                reader
            ):  # ``h.float()`` of a float32 ``h`` returns ``h``: it runs nothing
                removable.add(id(reader))
                continue
            return None
    return removable


def is_identity_conversion(bound_symbol: BoundSymbol) -> bool:
    inputs = {p.name for p in bound_symbol.proxy_args()}
    outputs = bound_symbol.proxy_outputs()
    return bound_symbol.symbol.id in _CONVERSIONS and len(outputs) == 1 and outputs[0].name in inputs


def match_rms_norm(row: TensorProxy, made: dict[str, BoundSymbol]) -> RmsNorm | None:
    """The RMS norm that computes ``row``, if ``row`` is one (the first style that matches). Only a
    row of static sizes with a last dim: a 0-dim product is no norm, and symbolic sizes are not
    compared here."""
    if row.ndim == 0 or any(type(size) is not int for size in row.shape):
        return None
    reshape = made.get(row.name)
    if (
        reshape is not None
        and reshape.symbol.id in _RESHAPES
        and reshape.args
        and isinstance(reshape.args[0], TensorProxy)
        and reshape.args[0].shape == row.shape
    ):
        norm = match_rms_norm(
            reshape.args[0], made
        )  # a reshape to the same shape (Gemma's head slices all rows)
        return norm and dataclasses.replace(norm, ops=(*norm.ops, reshape))
    for match in _STYLES.values():
        norm = match(row, made)
        if norm is not None:
            return norm if norm.x.dtype == row.dtype and norm.x.shape == row.shape else None
    return None


def _llama(row: TensorProxy, made: dict[str, BoundSymbol]) -> RmsNorm | None:
    """``weight * r.to(x.dtype)``: rounded to x's dtype, then multiplied in it."""
    scale = producer_call(made, row, "ltorch.mul")
    if scale is None:
        return None
    for weight, rounded in _both_orders(scale):
        if not (_is_norm_weight(weight, row) and weight.dtype == row.dtype == rounded.dtype):
            continue
        if rounded.shape != row.shape:
            continue
        scaled, conversion = _unconverted(rounded, made)
        found = _normalized(scaled, made)
        if found is None:
            continue
        x, eps, ops = found
        ops += [scale] if conversion is None else [conversion, scale]
        return RmsNorm(x, weight, eps, "llama", tuple(ops))
    return None


def _gemma(row: TensorProxy, made: dict[str, BoundSymbol]) -> RmsNorm | None:
    """``(r * (1.0 + weight.float())).to(x.dtype)``: multiplied in float32, rounded once."""
    product, conversion = _unconverted(row, made)
    scale = producer_call(made, product, "ltorch.mul")
    if scale is None or product.dtype != dtypes.float32:
        return None
    for scaled, offset_weight in _both_orders(scale):
        shifted = producer_call(made, offset_weight, "ltorch.add")
        if scaled.shape != row.shape or shifted is None or offset_weight.dtype != dtypes.float32:
            continue
        terms = [a for a in shifted.args if not isinstance(a, Proxy)]
        upcast = [a for a in shifted.args if isinstance(a, TensorProxy)]
        if terms != [1.0] or len(upcast) != 1 or call_arguments(shifted).get("alpha") is not None:
            continue
        weight, weight_conversion = _unconverted(upcast[0], made)
        found = _normalized(scaled, made)
        if found is None or not _is_norm_weight(weight, row):
            continue
        x, eps, ops = found
        ops += [op for op in (weight_conversion, shifted, scale, conversion) if op is not None]
        return RmsNorm(x, weight, eps, "gemma", tuple(ops))
    return None


# Gemma's first: in float32 its ``r * (1.0 + weight)`` also reads as Llama's product with a computed weight
_STYLES: dict[str, Callable[[TensorProxy, dict[str, BoundSymbol]], RmsNorm | None]] = {
    "gemma": _gemma,
    "llama": _llama,
}


def _normalized(value: TensorProxy, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, float, list] | None:
    """``(x, eps, ops)`` when ``value`` is ``h * rsqrt(mean(h**2, -1, keepdim=True) + eps)`` with
    ``h = x.float()`` (or ``x`` itself in float32), computed in float32."""
    scale = producer_call(made, value, "ltorch.mul")
    if scale is None or value.dtype != dtypes.float32:
        return None
    for h, reciprocal in _both_orders(scale):
        if h.shape != value.shape or reciprocal.shape != (*h.shape[:-1], 1):
            continue
        rsqrt = producer_call(made, reciprocal, "ltorch.rsqrt")
        shifted = rsqrt and producer_call(made, rsqrt.args[0], "ltorch.add")
        if shifted is None or call_arguments(shifted).get("alpha") is not None:
            continue
        numbers = [a for a in shifted.args if not isinstance(a, Proxy)]
        variances = [a for a in shifted.args if isinstance(a, TensorProxy)]
        if len(numbers) != 1 or type(numbers[0]) not in (int, float) or len(variances) != 1:
            continue
        mean = producer_call(made, variances[0], "ltorch.mean")
        square = None if mean is None else _square_of(call_arguments(mean)["input"], made)
        if mean is None or square is None or square[0] is not h or not _is_last_dim_mean(mean, h.ndim):
            continue
        x, conversion = _unconverted(h, made)
        ops = [square[1], mean, shifted, rsqrt, scale]
        return x, float(numbers[0]), ops if conversion is None else [conversion, *ops]
    return None


def _square_of(value: Any, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, BoundSymbol] | None:
    """``(h, op)`` when ``value`` is ``h ** 2``, ``h * h`` or ``square(h)``."""
    op = made.get(value.name) if isinstance(value, TensorProxy) else None
    if op is None:
        return None
    args = op.args
    if op.symbol.id == "ltorch.pow" and len(args) == 2 and type(args[1]) in (int, float) and args[1] == 2:
        base = args[0]
    elif op.symbol.id == "ltorch.mul" and len(args) == 2 and args[0] is args[1]:
        base = args[0]
    elif op.symbol.id == "ltorch.square" and len(args) == 1:
        base = args[0]
    else:
        return None
    return (base, op) if isinstance(base, TensorProxy) else None


def _is_last_dim_mean(mean: BoundSymbol, ndim: int) -> bool:
    arguments = call_arguments(mean)
    dim = arguments.get("dim")
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    return (
        len(dims) == 1
        and dims[0] in (-1, ndim - 1)
        and arguments.get("keepdim") is True
        and arguments.get("dtype") is None
    )


def _is_norm_weight(weight: Any, row: TensorProxy) -> bool:
    return (
        isinstance(weight, TensorProxy)
        and weight.shape == (row.shape[-1],)
        and weight.device == row.device
        and dtypes.is_float(weight.dtype)
    )


def producer_call(made: dict[str, BoundSymbol], value: Any, symbol_id: str) -> BoundSymbol | None:
    """The bound symbol making ``value`` if it is a call of ``symbol_id``."""
    op = made.get(value.name) if isinstance(value, TensorProxy) else None
    return op if op is not None and op.symbol.id == symbol_id else None


def _both_orders(op: BoundSymbol) -> list[tuple[TensorProxy, TensorProxy]]:
    """A binary op's two tensor operands, in both orders (multiplication commutes exactly)."""
    a, b = (tuple(op.args) + (None, None))[:2]
    if not (isinstance(a, TensorProxy) and isinstance(b, TensorProxy)) or op.kwargs:
        return []
    return [(a, b), (b, a)]


def _unconverted(value: TensorProxy, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, BoundSymbol | None]:
    """``value``'s source and the conversion making it, when a dtype conversion makes it."""
    op = made.get(value.name)
    if op is None or op.symbol.id not in _CONVERSIONS or not op.args:
        return value, None
    source = op.args[0]
    if not (
        isinstance(source, TensorProxy) and source.shape == value.shape and source.device == value.device
    ):
        return value, None
    return source, op


def call_arguments(bound_symbol: BoundSymbol) -> dict[str, Any]:
    """A bound symbol's arguments by parameter name, defaults filled in."""
    bound = _signature(bound_symbol.symbol).bind(*bound_symbol.args, **bound_symbol.kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


@functools.cache
def _signature(symbol: Symbol) -> inspect.Signature:
    function = symbol.decomposition or symbol.meta
    assert function is not None, f"{symbol.id} has neither a meta nor a decomposition"  # as Symbol.__call__
    return inspect.signature(function)
