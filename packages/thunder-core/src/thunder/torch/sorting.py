"""Scans and order statistics: cumsum, cumprod, sort, argsort, topk, kthvalue, median."""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch.reductions import keep_dims
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, structseq, to_dtype

REDUCTION = frozenset({"reduction"})


def _scan(prim: Symbol, a: TensorProxy, dim: int, dtype: Any) -> TensorProxy:
    if dtype is not None:
        result_dtype = dtypes.to_dtype(dtype)
    elif a.dtype is dtypes.bool8 or dtypes.is_integer(a.dtype):
        result_dtype = dtypes.int64
    else:
        result_dtype = a.dtype
    d = canonical_dim(dim, a.ndim)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(result_dtype) else result_dtype
    return to_dtype(prim(to_dtype(a, computation_dtype), d), result_dtype)


@torchsymbol(torch.cumsum, torch.Tensor.cumsum, method="cumsum", tags=REDUCTION)
def cumsum(input: TensorProxy, dim: int, *, dtype: Any = None) -> TensorProxy:
    return _scan(prims.cumsum, input, dim, dtype)


@torchsymbol(torch.cumprod, torch.Tensor.cumprod, method="cumprod", tags=REDUCTION)
def cumprod(input: TensorProxy, dim: int, *, dtype: Any = None) -> TensorProxy:
    return _scan(prims.cumprod, input, dim, dtype)


def _sort(a: TensorProxy, dim: int, descending: bool, stable: bool) -> tuple[TensorProxy, TensorProxy]:
    if a.dtype.is_complex:
        raise RuntimeError("sort(): complex tensors cannot be sorted")
    d = canonical_dim(dim, a.ndim)
    return prims.sort(a, d, bool(descending), bool(stable))


@torchsymbol(torch.sort, torch.Tensor.sort, method="sort", tags=REDUCTION)
def sort(
    input: TensorProxy, dim: int = -1, descending: bool = False, stable: bool | None = False
) -> tuple[TensorProxy, TensorProxy]:
    """Values and indices, as ``torch.return_types.sort``."""
    if isinstance(dim, bool):  # sort(a, stable, dim=..., descending=...) is keyword-only; keep it simple
        raise NotImplementedError("sort with a positional stable flag is not supported")
    return structseq("sort", *_sort(input, dim, descending, bool(stable)))


@torchsymbol(torch.argsort, torch.Tensor.argsort, method="argsort", tags=REDUCTION)
def argsort(
    input: TensorProxy, dim: int = -1, descending: bool = False, *, stable: bool = False
) -> TensorProxy:
    return _sort(input, dim, descending, stable)[1]


@torchsymbol(torch.msort, torch.Tensor.msort, method="msort", tags=REDUCTION)
def msort(input: TensorProxy) -> TensorProxy:
    return _sort(input, 0, False, False)[0]


@torchsymbol(torch.topk, torch.Tensor.topk, method="topk", tags=REDUCTION)
def topk(
    input: TensorProxy, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[TensorProxy, TensorProxy]:  # noqa: A002
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d] if input.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    return structseq("topk", *prims.topk(input, k, d, bool(largest), bool(sorted)))


def _select(a: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    """Elements of ``a`` at ``index`` along ``dim``, where ``index`` has ``a``'s shape with ``dim`` of size 1."""
    return prims.reshape(prims.take_along_axis(a, index, dim), index.shape[:dim] + index.shape[dim + 1 :])


def _order_statistic(
    a: TensorProxy, dim: int, keepdim: bool, position: Any
) -> tuple[TensorProxy, TensorProxy]:
    """Value and index of the element at ``position`` (an int or an index tensor) of the sorted ``dim``."""
    values, indices = prims.sort(a, dim, False, True)
    shape = a.shape[:dim] + (1,) + a.shape[dim + 1 :]
    if isinstance(position, int):
        position = prims.full(shape, position, device=a.device, dtype=dtypes.int64)
    value, index = _select(values, dim, position), _select(indices, dim, position)
    if keepdim:
        return keep_dims(value, a, (dim,)), keep_dims(index, a, (dim,))
    return value, index


@torchsymbol(torch.kthvalue, torch.Tensor.kthvalue, method="kthvalue", tags=REDUCTION)
def kthvalue(
    input: TensorProxy, k: int, dim: int = -1, keepdim: bool = False
) -> tuple[TensorProxy, TensorProxy]:
    if input.ndim == 0:
        if k != 1:
            raise RuntimeError("kthvalue(): selected number k out of range for dimension 0")
        return structseq("kthvalue", input, prims.full((), 0, device=input.device, dtype=dtypes.int64))
    d = canonical_dim(dim, input.ndim)
    if not 1 <= k <= input.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return structseq("kthvalue", *_order_statistic(input, d, keepdim, k - 1))


def _median(a: TensorProxy, dim: Any, keepdim: bool, ignore_nan: bool) -> Any:
    if a.dtype.is_complex:
        raise RuntimeError("median() does not support complex inputs")
    whole = dim is None
    if whole:
        if a.numel() == 0:
            return prims.full((), math.nan, device=a.device, dtype=a.dtype)
        a, d = prims.reshape(a, (a.numel(),)), 0
    elif a.ndim == 0:
        return a, prims.full((), 0, device=a.device, dtype=dtypes.int64)
    else:
        d = canonical_dim(dim, a.ndim)
        if a.shape[d] == 0:
            raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    n = a.shape[d]
    floating = a.dtype.is_floating_point
    if not floating:
        value, index = _order_statistic(a, d, keepdim and not whole, (n - 1) // 2)
        return value if whole else (value, index)
    # NaNs sort last: the lower median of the values that are not NaN, or the first NaN
    nan = prims.isnan(a)
    nan_count = prims.sum(to_dtype(nan, dtypes.int64), (d,))
    shape = a.shape[:d] + (1,) + a.shape[d + 1 :]
    nan_count = prims.reshape(nan_count, shape)
    if ignore_nan:
        # (count - 1) // 2 of the non-NaN count, or 0 when every element is NaN
        position = prims.div(prims.sub(prims.sub(n, nan_count), 1), 2)
        position = prims.where(prims.lt(position, 0), 0, position)
    else:
        position = prims.where(prims.gt(nan_count, 0), n - 1, (n - 1) // 2)
        position = prims.where(prims.gt(nan_count, 0), prims.sub(n, nan_count), position)
    value, index = _order_statistic(a, d, keepdim and not whole, position)
    return value if whole else (value, index)


@torchsymbol(torch.median, torch.Tensor.median, method="median", tags=REDUCTION)
def median(input: TensorProxy, dim: int | None = None, keepdim: bool = False) -> Any:
    result = _median(input, dim, keepdim, ignore_nan=False)
    return result if dim is None else structseq("median", *result)


@torchsymbol(torch.nanmedian, torch.Tensor.nanmedian, method="nanmedian", tags=REDUCTION)
def nanmedian(input: TensorProxy, dim: int | None = None, keepdim: bool = False) -> Any:
    result = _median(input, dim, keepdim, ignore_nan=True)
    return result if dim is None else structseq("nanmedian", *result)
