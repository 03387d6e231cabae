"""Masked reductions and normalizations, ``torch.masked``, on strided tensors.

As PyTorch defines them (``torch/masked/_ops.py``): masked-out elements are replaced by the
reduction's identity (0 for sums, 1 for products, -inf or the integer minimum for maxima, ...)
and the plain operator runs on the result. Sparse layouts are not supported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch import elementwise as ew
from thunder.torch import reductions, sorting
from thunder.torch.activations import softmin as softmin_
from thunder.torch.nn import log_softmax as log_softmax_
from thunder.torch.nn import softmax as softmax_
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, expand_to, to_dtype

REDUCTION = frozenset({"reduction"})
_SMALL_INTEGERS = frozenset({dtypes.uint8, dtypes.bool8, dtypes.int8, dtypes.int16, dtypes.int32})


def _dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """torch.masked's canonical dims: sorted, () and None meaning all."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    canonical = [canonical_dim(d, ndim) for d in dims]
    if len(set(canonical)) != len(canonical):
        raise RuntimeError(f"dim={dims} appears multiple times in the list of dims")
    return tuple(sorted(canonical))


def _identity(kind: str, a: TensorProxy) -> Any:
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if kind == "median":
        return float("nan")
    if a.dtype.is_floating_point:
        return float("-inf") if kind == "max" else float("inf")
    if a.dtype is dtypes.bool8:
        raise NotImplementedError(f"identity of {kind} on bool input")
    info = torch.iinfo(a.dtype.torch_dtype)
    return info.min if kind == "max" else info.max


def _combined(kind: str, a: TensorProxy, mask: TensorProxy | None) -> TensorProxy:
    """``a`` with masked-out elements replaced by the identity of ``kind``."""
    if mask is None:
        return a
    if mask.ndim > a.ndim:
        raise IndexError(
            "_input_mask expected broadcastable mask (got mask dimensionality higher than of the input)"
        )
    mask = to_dtype(expand_to(mask, a.shape), dtypes.bool8)
    fill = prims.full((), _identity(kind, a), device=a.device, dtype=a.dtype)
    return ew.where(mask, a, fill)


def _masked(name: str, body: Callable[..., TensorProxy]) -> Symbol:
    def op(a: TensorProxy, *args: Any, mask: TensorProxy | None = None, **kwargs: Any) -> TensorProxy:
        return body(a, *args, mask=mask, **kwargs)

    op.__name__ = op.__qualname__ = f"masked_{name}"
    return torchsymbol(getattr(torch.masked, name), tags=REDUCTION)(op)


def _accumulated_dtype(a: TensorProxy, dtype: Any) -> Any:
    if dtype is not None:
        return dtype
    return dtypes.int64 if a.dtype in _SMALL_INTEGERS else a.dtype


def _sum(
    a: TensorProxy, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> TensorProxy:
    dtype = _accumulated_dtype(a, dtype)
    return reductions.sum(_combined("sum", a, mask), _dims(dim, a.ndim), bool(keepdim), dtype=dtype)


def _prod(
    a: TensorProxy, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> TensorProxy:
    result = to_dtype(_combined("prod", a, mask), dtypes.to_dtype(_accumulated_dtype(a, dtype)))
    for d in reversed(_dims(dim, a.ndim)):
        result = reductions.prod(result, d, bool(keepdim))
    return result


def _scan(kind: str, scan: Callable) -> Callable:
    def body(a: TensorProxy, dim: int, *, dtype: Any = None, mask: Any = None) -> TensorProxy:
        dtype = dtypes.to_dtype(dtype if dtype is not None else a.dtype)
        return to_dtype(scan(_combined(kind, a, mask), _dims(dim, a.ndim)[0], dtype=dtype), dtype)

    return body


def _extremum(kind: str, reduce: Callable, *, index: bool = False) -> Callable:
    def body(a: TensorProxy, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
             mask: Any = None) -> TensorProxy:  # fmt: skip
        dtype = dtypes.to_dtype(dtype if dtype is not None else a.dtype)
        combined = _combined(kind, a, mask)
        dims = dim if index else _dims(dim, combined.ndim)
        return to_dtype(reduce(combined, dims, bool(keepdim)), dtype)

    return body


def _mean(
    a: TensorProxy, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> TensorProxy:
    dtype = dtypes.to_dtype(dtype if dtype is not None else a.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(
            f"mean(): Could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {dtype}"
        )
    dims = _dims(dim, a.ndim)
    present = (
        prims.full(a.shape, 1, device=a.device, dtype=dtypes.int64)
        if mask is None
        else to_dtype(expand_to(mask, a.shape), dtypes.bool8)
    )
    count = reductions.sum(present, dims, bool(keepdim))
    total = _sum(a, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return ew.true_divide(total, count)


def _median(
    a: TensorProxy, dim: int = -1, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> TensorProxy:
    if not a.dtype.is_floating_point:
        raise NotImplementedError("masked median of integer tensors checks the data for fully masked rows")
    d = _dims(dim, a.ndim)[0]
    return sorting.nanmedian(_combined("median", a, mask), d, keepdim)[0]


def _logsumexp(a: TensorProxy, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
               mask: Any = None) -> TensorProxy:  # fmt: skip
    dtype = dtypes.to_dtype(dtype if dtype is not None else a.dtype)
    return to_dtype(reductions.logsumexp(_combined("max", a, mask), _dims(dim, a.ndim), keepdim), dtype)


def _normalization(kind: str, normalize: Callable) -> Callable:
    def body(a: TensorProxy, dim: int, *, dtype: Any = None, mask: Any = None) -> TensorProxy:
        dtype = dtype if dtype is not None else a.dtype
        return normalize(_combined(kind, a, mask), _dims(dim, a.ndim)[0], dtype=dtype)

    return body


masked_sum = _masked("sum", _sum)
masked_prod = _masked("prod", _prod)
masked_cumsum = _masked("cumsum", _scan("sum", sorting.cumsum))
masked_cumprod = _masked("cumprod", _scan("prod", sorting.cumprod))
masked_amax = _masked("amax", _extremum("max", reductions.amax))
masked_amin = _masked("amin", _extremum("min", reductions.amin))
masked_argmax = _masked("argmax", _extremum("max", reductions.argmax, index=True))
masked_argmin = _masked("argmin", _extremum("min", reductions.argmin, index=True))
masked_mean = _masked("mean", _mean)
masked_median = _masked("median", _median)
masked_logsumexp = _masked("logsumexp", _logsumexp)
masked_softmax = _masked("softmax", _normalization("max", softmax_))
masked_log_softmax = _masked("log_softmax", _normalization("max", log_softmax_))
masked_softmin = _masked("softmin", _normalization("min", softmin_))


def _std_var(take_sqrt: bool) -> Callable:
    def body(a: TensorProxy, dim: Any = None, unbiased: bool | None = None, *, correction: Any = None,
             keepdim: bool = False, dtype: Any = None, mask: Any = None) -> TensorProxy:  # fmt: skip
        if unbiased is not None and correction is not None:
            raise AssertionError("Only one of unbiased and correction may be given")
        if a.dtype.is_complex:
            raise NotImplementedError("thunder does not support masked var and std of complex tensors yet")
        corrected = (
            float(correction) if correction is not None else 1.0 if unbiased is None or unbiased else 0.0
        )
        dtype = dtypes.to_dtype(dtype) if dtype is not None else a.dtype
        if not dtype.is_floating_point:
            dtype = dtypes.float32
        dims = _dims(dim, a.ndim)
        present = (
            prims.full(a.shape, 1, device=a.device, dtype=dtypes.int64)
            if mask is None
            else to_dtype(expand_to(mask, a.shape), dtypes.bool8)
        )
        count = reductions.sum(present, dims, True)
        sample_mean = ew.true_divide(_sum(a, dim, keepdim=True, dtype=dtype, mask=mask), count)
        x = ew.sub(a, sample_mean)
        total = _sum(ew.mul(x, x), dim, keepdim=keepdim, dtype=dtype, mask=mask)
        if not keepdim:
            count = prims.reshape(count, total.shape)
        if corrected != 0:
            count = ew.maximum(
                ew.sub(to_dtype(count, dtype), corrected), prims.full((), 0, device=a.device, dtype=dtype)
            )
        output = to_dtype(ew.true_divide(total, count), dtype)
        return ew.sqrt(output) if take_sqrt else output

    return body


def _norm(a: TensorProxy, ord: Any = 2.0, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,  # noqa: A002
          mask: Any = None) -> TensorProxy:  # fmt: skip
    from thunder.torch.norms import vector_norm

    dtype = dtype if dtype is not None else a.dtype
    combined = _combined("min" if ord == float("-inf") else "sum", a, mask)
    return vector_norm(combined, ord, _dims(dim, a.ndim), bool(keepdim), dtype=dtype)


def _normalize(a: TensorProxy, ord: float, dim: int, *, eps: float = 1e-12, dtype: Any = None,
               mask: Any = None) -> TensorProxy:  # fmt: skip
    dtype = dtype if dtype is not None else a.dtype
    norm_ = _norm(a, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denominator = ew.maximum(norm_, prims.full((), eps, device=norm_.device, dtype=norm_.dtype))
    return ew.true_divide(_combined("sum", a, mask), denominator)


@torchsymbol(torch.masked.logaddexp, tags=frozenset({"elementwise"}))
def masked_logaddexp(input: TensorProxy, other: TensorProxy, *, dtype: Any = None, input_mask: Any = None,
                     other_mask: Any = None) -> TensorProxy:  # fmt: skip
    from thunder.torch.pointwise import logaddexp

    dtype = dtypes.to_dtype(dtype if dtype is not None else input.dtype)
    return to_dtype(
        logaddexp(_combined("max", input, input_mask), _combined("max", other, other_mask)), dtype
    )


masked_var = _masked("var", _std_var(take_sqrt=False))
masked_std = _masked("std", _std_var(take_sqrt=True))
masked_norm = _masked("norm", _norm)
masked_normalize = _masked("normalize", _normalize)
