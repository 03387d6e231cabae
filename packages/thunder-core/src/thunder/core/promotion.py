"""PyTorch's type promotion and broadcasting rules, for metas.

Type promotion follows ``torch.result_type``: tensors with dimensions outrank zero-dimensional
tensors, which outrank Python numbers; a lower tier only matters when its category (bool <
integer < float < complex) is higher. Pairwise promotion itself is ``torch.promote_types``.
"""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any

import torch

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy, pyval

__all__ = [
    "PromotionKind",
    "promote_dtypes",
    "result_dtype",
    "elementwise_dtypes",
    "broadcast_shapes",
    "default_float_dtype",
]


class PromotionKind(Enum):
    DEFAULT = "default"  # compute and return in the promoted dtype
    INT_TO_FLOAT = "int_to_float"  # integers and bools become the default float dtype (sqrt, div)
    ALWAYS_BOOL = "always_bool"  # comparisons
    COMPLEX_TO_FLOAT = "complex_to_float"  # abs of complex is real
    BOOL_TO_LONG = "bool_to_long"  # sum of bools counts them


def default_float_dtype() -> dtypes.dtype:
    return dtypes.to_dtype(torch.get_default_dtype())


def promote_dtypes(a: dtypes.dtype, b: dtypes.dtype) -> dtypes.dtype:
    return dtypes.to_dtype(torch.promote_types(a.torch_dtype, b.torch_dtype))


def _scalar_dtype(x: Any) -> dtypes.dtype:
    x = pyval(x)  # a number proxy promotes as its type, which the prologue checks
    x = _SYMBOLIC_TYPES.get(type(x), x)  # a symbolic size (core/symbolic_shapes.py) as its Python type
    if isinstance(x, bool):
        return dtypes.bool8
    if isinstance(x, int):
        return dtypes.int64
    if isinstance(x, float):
        return default_float_dtype()
    if isinstance(x, complex):
        return dtypes.complex128 if default_float_dtype() is dtypes.float64 else dtypes.complex64
    raise TypeError(f"{x!r} is neither a tensor nor a number")  # as Python's unsupported operand types


_SYMBOLIC_TYPES = {torch.SymInt: 0, torch.SymFloat: 0.0, torch.SymBool: False}


# torch's complex32 (chalf), which thunder does not support: a tier may promote to it (float16 with a
# complex number) and a higher tier may promote it further, but it is never a result.
_COMPLEX32 = dtypes.dtype("complex32", "c32", dtypes.COMPLEX, 32, torch.complex32)


def _to_complex(d: dtypes.dtype) -> dtypes.dtype:
    """The complex dtype a float tensor takes when a lower tier is complex."""
    return {dtypes.float64: dtypes.complex128, dtypes.float16: _COMPLEX32}.get(d, dtypes.complex64)


def _combine(higher: dtypes.dtype | None, lower: dtypes.dtype | None) -> dtypes.dtype | None:
    """Merge the result of a higher tier with that of a lower one, as torch does."""
    if higher is None or lower is None:
        return higher if lower is None else lower
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return _to_complex(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is dtypes.bool8 or lower.is_floating_point:
        return promote_dtypes(higher, lower)
    return higher


def _tier(values: list[dtypes.dtype]) -> dtypes.dtype | None:
    return functools.reduce(promote_dtypes, values) if values else None


def result_dtype(*args: Any) -> dtypes.dtype:
    """The dtype ``torch.result_type`` gives for tensors (proxies) and Python numbers."""
    dimensioned = [a.dtype for a in args if isinstance(a, TensorProxy) and a.ndim > 0]
    zero_dim = [a.dtype for a in args if isinstance(a, TensorProxy) and a.ndim == 0]
    scalars = [_scalar_dtype(a) for a in args if not isinstance(a, TensorProxy) and a is not None]
    result = _combine(_tier(dimensioned), _combine(_tier(zero_dim), _tier(scalars)))
    if result is None:
        raise ValueError("type promotion needs at least one tensor or number")
    if result is _COMPLEX32:
        raise NotImplementedError(
            "type promotion of float16 with a complex number gives complex32 (torch.chalf), which thunder does not support"
        )
    return result


def elementwise_dtypes(*args: Any, kind: PromotionKind) -> tuple[dtypes.dtype, dtypes.dtype]:
    """(computation dtype, result dtype) of an elementwise op over ``args``.

    The computation dtype is float32 for half-precision results, as PyTorch's kernels compute
    them, so decompositions into prims keep eager's accuracy.
    """
    promoted = result_dtype(*args)
    if kind is PromotionKind.INT_TO_FLOAT and not (promoted.is_floating_point or promoted.is_complex):
        promoted = default_float_dtype()
    if kind is PromotionKind.BOOL_TO_LONG and promoted is dtypes.bool8:
        promoted = dtypes.int64
    computation = dtypes.float32 if dtypes.is_low_precision(promoted) else promoted
    if kind is PromotionKind.ALWAYS_BOOL:
        return promoted, dtypes.bool8
    if kind is PromotionKind.COMPLEX_TO_FLOAT and promoted.is_complex:
        real = dtypes.float64 if promoted is dtypes.complex128 else dtypes.float32
        return computation, real
    return computation, promoted


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` for concrete shapes, without its symbolic-shape machinery (it runs
    for every elementwise op traced, and torch's costs about a millisecond a call)."""
    result: list[int] = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) > len(result):
            result[:0] = [1] * (len(shape) - len(result))
        offset = len(result) - len(shape)
        for index, size in enumerate(shape):
            current = result[offset + index]
            if size == current or size == 1:
                continue
            if current != 1:
                raise RuntimeError(
                    f"Shape mismatch: objects cannot be broadcast to a single shape. Mismatch is between "
                    f"{current} and {size} at dimension {index}"
                )
            result[offset + index] = size
    return tuple(result)
