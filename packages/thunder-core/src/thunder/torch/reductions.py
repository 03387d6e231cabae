"""Reductions: canonical dims, accumulation dtype, the prim, then keepdim."""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.core.symbolic_shapes import as_float
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dims, check_tensor_argument, structseq, to_dtype

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
def sum(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:  # noqa: A001
    return _accumulating(prims.sum, input, dim, keepdim, dtype)


@torchsymbol(torch.prod, torch.Tensor.prod, method="prod", tags=REDUCTION)
def prod(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    return _accumulating(prims.prod, input, dim, keepdim, dtype)


@torchsymbol(torch.mean, torch.Tensor.mean, method="mean", tags=REDUCTION)
def mean(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    result_dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    if not (result_dtype.is_floating_point or result_dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {input.dtype.name}"
        )
    dims = canonical_dims(dim, input.ndim)
    count = math.prod(input.shape[d] for d in dims)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(result_dtype) else result_dtype
    total = prims.sum(to_dtype(input, computation_dtype), dims)
    result = to_dtype(prims.div(total, as_float(count)), result_dtype)
    return keep_dims(result, input, dims) if keepdim else result


def _extremum(prim: Symbol, a: TensorProxy, dim: Any, keepdim: bool) -> TensorProxy:
    dims = canonical_dims(dim, a.ndim)
    if a.numel() == 0 and (dim is None or dim == () or dim == []):
        raise RuntimeError(
            f"{prim.name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    for d in dims:
        if a.shape[d] == 0:
            raise IndexError(f"{prim.name}(): Expected reduction dim {d} to have non-zero size.")
    result = prim(a, dims)
    return keep_dims(result, a, dims) if keepdim else result


@torchsymbol(torch.amax, torch.Tensor.amax, method="amax", tags=REDUCTION)
def amax(input: TensorProxy, dim: Any = (), keepdim: bool = False) -> TensorProxy:
    return _extremum(prims.amax, input, dim, keepdim)


@torchsymbol(torch.amin, torch.Tensor.amin, method="amin", tags=REDUCTION)
def amin(input: TensorProxy, dim: Any = (), keepdim: bool = False) -> TensorProxy:
    return _extremum(prims.amin, input, dim, keepdim)


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
def argmax(input: TensorProxy, dim: int | None = None, keepdim: bool = False) -> TensorProxy:
    return _arg_extremum(prims.argmax, input, dim, keepdim)


@torchsymbol(torch.argmin, torch.Tensor.argmin, method="argmin", tags=REDUCTION)
def argmin(input: TensorProxy, dim: int | None = None, keepdim: bool = False) -> TensorProxy:
    return _arg_extremum(prims.argmin, input, dim, keepdim)


def _correction(dim: Any, unbiased: Any, correction: Any) -> tuple[Any, float]:
    """The dims and correction of var/std's overloads: ``(a, unbiased)``, ``(a, dim, unbiased)``, ``correction=``."""
    if isinstance(dim, bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise RuntimeError("Cannot specify both unbiased and correction")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction


def _variance(a: TensorProxy, dim: Any, unbiased: Any, keepdim: bool, correction: Any) -> TensorProxy:
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dim, correction = _correction(dim, unbiased, correction)
    dims = canonical_dims(dim, a.ndim)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(a.dtype) else a.dtype
    result = prims.var(to_dtype(a, computation_dtype), dims, correction=correction)
    return keep_dims(result, a, dims) if keepdim else result


def _real_dtype(a: TensorProxy) -> dtypes.dtype:
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(a.dtype, a.dtype)


@torchsymbol(torch.var, torch.Tensor.var, method="var", tags=REDUCTION)
def var(input: TensorProxy, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> TensorProxy:  # fmt: skip
    return to_dtype(_variance(input, dim, unbiased, keepdim, correction), _real_dtype(input))


@torchsymbol(torch.std, torch.Tensor.std, method="std", tags=REDUCTION)
def std(input: TensorProxy, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> TensorProxy:  # fmt: skip
    return to_dtype(prims.sqrt(_variance(input, dim, unbiased, keepdim, correction)), _real_dtype(input))


@torchsymbol(torch.var_mean, tags=REDUCTION)
def var_mean(input: TensorProxy, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    variance = var(input, dim, unbiased, keepdim, correction=correction)
    return variance, mean(input, _correction(dim, unbiased, correction)[0], keepdim)


@torchsymbol(torch.std_mean, tags=REDUCTION)
def std_mean(input: TensorProxy, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    deviation = std(input, dim, unbiased, keepdim, correction=correction)
    return deviation, mean(input, _correction(dim, unbiased, correction)[0], keepdim)


def _values_and_indices(
    a: TensorProxy, dim: int, keepdim: bool, largest: bool
) -> tuple[TensorProxy, TensorProxy]:
    if a.ndim == 0:
        return a, prims.full((), 0, device=a.device, dtype=dtypes.int64)
    (d,) = canonical_dims(dim, a.ndim)
    if a.shape[d] == 0:
        raise IndexError(
            f"{'max' if largest else 'min'}(): Expected reduction dim {d} to have non-zero size."
        )
    values = (prims.amax if largest else prims.amin)(a, (d,))
    # PyTorch has no argmax for bools; their order is that of uint8
    searched = to_dtype(a, dtypes.uint8) if a.dtype is dtypes.bool8 else a
    indices = (prims.argmax if largest else prims.argmin)(searched, d)
    if keepdim:
        return keep_dims(values, a, (d,)), keep_dims(indices, a, (d,))
    return values, indices


def _max_or_min(largest: bool, a: TensorProxy, dim: Any, keepdim: bool) -> Any:
    check_tensor_argument("max" if largest else "min", a)
    if isinstance(dim, TensorProxy):  # max(a, other): the elementwise maximum
        if keepdim:
            raise TypeError("max(a, other) takes no keepdim")
        from thunder.torch.elementwise import maximum, minimum

        return (maximum if largest else minimum)(a, dim)
    if dim is None:
        if a.numel() == 0:
            raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0.")
        return _extremum(prims.amax if largest else prims.amin, a, None, False)
    return structseq("max" if largest else "min", *_values_and_indices(a, dim, keepdim, largest))


@torchsymbol(torch.max, torch.Tensor.max, method="max", tags=REDUCTION)
def max(input: TensorProxy, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """``max(a)``, ``max(a, dim, keepdim)`` (``torch.return_types.max``: values, indices) or ``max(a, other)``."""
    return _max_or_min(True, input, dim, keepdim)


@torchsymbol(torch.min, torch.Tensor.min, method="min", tags=REDUCTION)
def min(input: TensorProxy, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    return _max_or_min(False, input, dim, keepdim)


@torchsymbol(torch.aminmax, torch.Tensor.aminmax, method="aminmax", tags=REDUCTION)
def aminmax(
    input: TensorProxy, *, dim: int | None = None, keepdim: bool = False
) -> tuple[TensorProxy, TensorProxy]:
    if dim is None and input.ndim > 0 and input.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if dim is None and keepdim:
        low, high = amin(input, None, False), amax(input, None, False)
        shape = (1,) * input.ndim
        return structseq("aminmax", prims.reshape(low, shape), prims.reshape(high, shape))
    dims = dim if dim is not None else ()
    return structseq("aminmax", amin(input, dims, keepdim), amax(input, dims, keepdim))


def _truth(a: TensorProxy) -> TensorProxy:
    return a if a.dtype is dtypes.bool8 else prims.ne(a, 0)


def _all_or_any(a: TensorProxy, dim: Any, keepdim: bool, every: bool) -> TensorProxy:
    dims = canonical_dims(dim, a.ndim)
    truth = to_dtype(_truth(a), dtypes.int64)
    # all: no zero; any: some nonzero
    count = prims.sum(to_dtype(prims.eq(truth, 0), dtypes.int64) if every else truth, dims)
    result = prims.eq(count, 0) if every else prims.ne(count, 0)
    result = keep_dims(result, a, dims) if keepdim else result
    return to_dtype(result, dtypes.uint8) if a.dtype is dtypes.uint8 else result


@torchsymbol(torch.all, torch.Tensor.all, method="all", tags=REDUCTION)
def all(input: TensorProxy, dim: Any = None, keepdim: bool = False) -> TensorProxy:  # noqa: A001
    return _all_or_any(input, dim, keepdim, every=True)


@torchsymbol(torch.any, torch.Tensor.any, method="any", tags=REDUCTION)
def any(input: TensorProxy, dim: Any = None, keepdim: bool = False) -> TensorProxy:  # noqa: A001
    return _all_or_any(input, dim, keepdim, every=False)


@torchsymbol(torch.count_nonzero, torch.Tensor.count_nonzero, method="count_nonzero", tags=REDUCTION)
def count_nonzero(input: TensorProxy, dim: Any = None) -> TensorProxy:
    return prims.sum(to_dtype(_truth(input), dtypes.int64), canonical_dims(dim, input.ndim))


@torchsymbol(
    torch.logsumexp, torch.Tensor.logsumexp, torch.special.logsumexp, method="logsumexp", tags=REDUCTION
)
def logsumexp(input: TensorProxy, dim: Any = (), keepdim: bool = False) -> TensorProxy:
    result_dtype = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex else dtypes.float32
    if input.dtype.is_complex:
        raise NotImplementedError("thunder does not support logsumexp of complex tensors yet")
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(result_dtype) else result_dtype
    x = to_dtype(input, computation_dtype)
    dims = canonical_dims(dim, input.ndim)
    if math.prod(input.shape[d] for d in dims) == 0:
        result = prims.log(prims.sum(prims.exp(x), dims))
    else:
        # shift by the maximum for stability; an infinite maximum is not subtracted (inf - inf)
        largest = prims.amax(x, dims)
        shift = prims.where(prims.eq(prims.abs(largest), math.inf), 0.0, largest)
        kept = [d for d in range(input.ndim) if d not in dims]
        shifted = prims.sub(x, prims.broadcast_in_dim(shift, x.shape, kept))
        result = prims.add(prims.log(prims.sum(prims.exp(shifted), dims)), shift)
    result = to_dtype(result, result_dtype)
    return keep_dims(result, input, dims) if keepdim else result


@torchsymbol(torch.nansum, torch.Tensor.nansum, method="nansum", tags=REDUCTION)
def nansum(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    if input.dtype.is_floating_point:
        input = prims.where(prims.isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


@torchsymbol(torch.nanmean, torch.Tensor.nanmean, method="nanmean", tags=REDUCTION)
def nanmean(input: TensorProxy, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorProxy:
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"nanmean(): expected input to have floating point or complex dtype but got {input.dtype.name}"
        )
    present = prims.bitwise_not(prims.isnan(input))
    total = nansum(input, dim, keepdim, dtype=dtype)
    count = sum(present, dim, keepdim)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(total.dtype) else total.dtype
    quotient = prims.div(to_dtype(total, computation_dtype), to_dtype(count, computation_dtype))
    return to_dtype(quotient, total.dtype)
