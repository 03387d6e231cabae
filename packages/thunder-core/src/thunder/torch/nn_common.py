"""Helpers shared by the ``torch.nn.functional`` families: slicing along a dim, float32 compute."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch.utils import to_dtype


def narrow(a: TensorProxy, dim: int, start: int, length: int, step: int = 1) -> TensorProxy:
    """``a`` sliced along the non-negative ``dim`` from ``start``: ``length`` elements ``step`` apart."""
    if start == 0 and length == a.shape[dim] and step == 1:
        return a
    begin = [0] * a.ndim
    end = list(a.shape)
    steps = [1] * a.ndim
    begin[dim], end[dim], steps[dim] = start, start + (length - 1) * step + 1 if length else start, step
    return prims.slice_prim(a, begin, end, steps)


def computation_dtype(dtype: dtypes.dtype) -> dtypes.dtype:
    return dtypes.float32 if dtypes.is_low_precision(dtype) else dtype


def in_float(a: TensorProxy, body: Callable[[TensorProxy], TensorProxy]) -> TensorProxy:
    """``body(a)`` computed in float32 when ``a`` is half precision, returned in ``a``'s dtype."""
    if not dtypes.is_low_precision(a.dtype):
        return body(a)
    return to_dtype(body(to_dtype(a, dtypes.float32)), a.dtype)


def is_progression(values: Sequence[int]) -> bool:
    return all(b - a == values[1] - values[0] for a, b in zip(values, values[1:]))


def select_positions(x: TensorProxy, dim: int, positions: Sequence[int]) -> TensorProxy:
    """The elements of ``x`` at ``positions`` (all in range) along ``dim``: a slice when they step
    forward evenly, else an index_select by a constant index."""
    if (
        len(positions) == 0
        or len(positions) == 1
        or (positions[1] > positions[0] and is_progression(positions))
    ):
        step = positions[1] - positions[0] if len(positions) > 1 else 1
        return narrow(x, dim, positions[0] if positions else 0, len(positions), step)
    index = prims.tensor_from_sequence(list(positions), device=x.device, dtype=dtypes.int64)
    return prims.take(x, index, dim)
