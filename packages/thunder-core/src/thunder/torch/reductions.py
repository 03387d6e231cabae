"""Reductions: canonical dims, accumulation dtype, the prim, then keepdim."""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dims, to_dtype

REDUCTION = frozenset({"reduction"})


def keep_dims(result: TensorProxy, a: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    shape = tuple(1 if d in dims else size for d, size in enumerate(a.shape))
    return prims.reshape(result, shape) if result.shape != shape else result


def _accumulating(prim: Symbol, a: TensorProxy, dim: Any, keepdim: bool, dtype: Any) -> TensorProxy:
    """sum and prod: integers accumulate in int64, half precision in float32, as torch does."""
    if dtype is not None:
        result_dtype = dtypes.to_dtype(dtype)
    elif dtypes.is_boolean(a.dtype) or dtypes.is_integer(a.dtype):
        result_dtype = dtypes.int64
    else:
        result_dtype = a.dtype
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(result_dtype) else result_dtype
    dims = canonical_dims(dim, a.ndim)
    result = to_dtype(prim(to_dtype(a, computation_dtype), dims), result_dtype)
    return keep_dims(result, a, dims) if keepdim else result


@torchsymbol(torch.sum, torch.Tensor.sum, method="sum", tags=REDUCTION)
def sum(a: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:  # noqa: A001
    return _accumulating(prims.sum, a, dim, keepdim, dtype)


@torchsymbol(torch.prod, torch.Tensor.prod, method="prod", tags=REDUCTION)
def prod(a: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    return _accumulating(prims.prod, a, dim, keepdim, dtype)


@torchsymbol(torch.mean, torch.Tensor.mean, method="mean", tags=REDUCTION)
def mean(a: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    result_dtype = dtypes.to_dtype(dtype) if dtype is not None else a.dtype
    if not (result_dtype.is_floating_point or result_dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {a.dtype.name}"
        )
    dims = canonical_dims(dim, a.ndim)
    count = math.prod(a.shape[d] for d in dims)
    total = _accumulating(prims.sum, a, dims, keepdim, result_dtype)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(result_dtype) else result_dtype
    return to_dtype(prims.div(to_dtype(total, computation_dtype), float(count)), result_dtype)


def _extremum(prim: Symbol, a: TensorProxy, dim: Any, keepdim: bool) -> TensorProxy:
    dims = canonical_dims(dim, a.ndim)
    for d in dims:
        if a.shape[d] == 0:
            raise IndexError(f"{prim.name}(): Expected reduction dim {d} to have non-zero size.")
    result = prim(a, dims)
    return keep_dims(result, a, dims) if keepdim else result


@torchsymbol(torch.amax, torch.Tensor.amax, method="amax", tags=REDUCTION)
def amax(a: TensorProxy, dim: Any = (), keepdim: bool = False) -> TensorProxy:
    return _extremum(prims.amax, a, dim, keepdim)


@torchsymbol(torch.amin, torch.Tensor.amin, method="amin", tags=REDUCTION)
def amin(a: TensorProxy, dim: Any = (), keepdim: bool = False) -> TensorProxy:
    return _extremum(prims.amin, a, dim, keepdim)


def _arg_extremum(prim: Symbol, a: TensorProxy, dim: int | None, keepdim: bool) -> TensorProxy:
    if dim is None:
        result = prim(prims.reshape(a, (a.numel(),)) if a.ndim != 1 else a, 0)
        return prims.reshape(result, (1,) * a.ndim) if keepdim else result
    (d,) = canonical_dims(dim, a.ndim) or (0,)
    result = prim(a, d) if a.ndim > 0 else prims.reshape(a, ())
    if a.ndim == 0:
        return prims.full((), 0, device=a.device, dtype=dtypes.int64)
    return keep_dims(result, a, (d,)) if keepdim else result


@torchsymbol(torch.argmax, torch.Tensor.argmax, method="argmax", tags=REDUCTION)
def argmax(a: TensorProxy, dim: int | None = None, keepdim: bool = False) -> TensorProxy:
    return _arg_extremum(prims.argmax, a, dim, keepdim)


@torchsymbol(torch.argmin, torch.Tensor.argmin, method="argmin", tags=REDUCTION)
def argmin(a: TensorProxy, dim: int | None = None, keepdim: bool = False) -> TensorProxy:
    return _arg_extremum(prims.argmin, a, dim, keepdim)


@torchsymbol(torch.var, torch.Tensor.var, method="var", tags=REDUCTION)
def var(a: TensorProxy, dim: Any = None, *, correction: float | None = None, keepdim: bool = False,
        unbiased: bool | None = None) -> TensorProxy:  # fmt: skip
    if isinstance(dim, bool):  # the var(input, unbiased) overload
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = canonical_dims(dim, a.ndim)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(a.dtype) else a.dtype
    result = to_dtype(prims.var(to_dtype(a, computation_dtype), dims, correction=correction), a.dtype)
    return keep_dims(result, a, dims) if keepdim else result
