"""Statistics and searching: cov, corrcoef, quantile, histc, searchsorted, bucketize, mode, logcumsumexp.

Each follows the algorithm of PyTorch's CPU kernel where rounding can show (quantile's ranks in the
input's dtype, histc's bin positions), so results agree with eager to the last bit or to the usual
floating-point tolerance. What eager checks on the data (cov's negative weights, quantile's ``q``
in a tensor outside [0, 1]) thunder cannot see while tracing: such inputs give a value, not an error.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch import reductions
from thunder.torch.nn import mm
from thunder.torch.nn_common import narrow
from thunder.torch.pointwise import lerp, logaddexp
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, expand_to, structseq, to_dtype
from thunder.torch.views import diagonal

REDUCTION = frozenset({"reduction"})


# ---------------------------------------------------------------------------------------------
# Covariance


@torchsymbol(torch.cov, torch.Tensor.cov, method="cov", tags=REDUCTION)
def cov(
    input: TensorProxy,
    *,
    correction: int = 1,
    fweights: TensorProxy | None = None,
    aweights: TensorProxy | None = None,
) -> TensorProxy:
    """ATen's ``cov``: rows are variables, columns observations; weights multiply."""
    if input.ndim > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got an input with {input.ndim} dimensions"
        )
    x = prims.reshape(input, (1, input.numel())) if input.ndim < 2 else input
    observations = x.shape[1]
    weights = None
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is None:
            continue
        if w.ndim > 1:
            raise RuntimeError(
                f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} dimensions"
            )
        if w.numel() != observations:
            raise RuntimeError(
                f"cov(): expected {name} to have the same numel as there are observations in the input but got {w.numel()} != {observations}"
            )
        if name == "fweights" and (w.dtype.is_floating_point or w.dtype.is_complex):
            raise RuntimeError(
                f"cov(): expected fweights to have integral dtype but got fweights with {w.dtype.name} dtype"
            )
        if name == "aweights" and not w.dtype.is_floating_point:
            raise RuntimeError(
                f"cov(): expected aweights to have floating point dtype but got aweights with {w.dtype.name} dtype"
            )
        weights = w if weights is None else ew.mul(weights, w)
    if weights is None:
        weight_sum: Any = prims.full((), observations, device=input.device, dtype=dtypes.int64)
        average = ew.true_divide(reductions.sum(x, 1), weight_sum)
    else:
        weight_sum = reductions.sum(weights)
        average = ew.true_divide(reductions.sum(ew.mul(x, weights), 1), weight_sum)
    if weights is not None and aweights is not None and correction != 0:
        norm = ew.sub(
            weight_sum,
            ew.true_divide(ew.mul(reductions.sum(ew.mul(weights, aweights)), correction), weight_sum),
        )
    else:
        norm = ew.sub(weight_sum, correction)
    norm = ew.where(ew.le(norm, 0), 0, norm)  # eager warns and divides by zero
    centered = ew.sub(x, prims.reshape(average, (average.shape[0], 1)))
    weighted = centered if weights is None else ew.mul(centered, weights)
    product = mm(centered, prims.transpose(weighted, (1, 0)))
    result = ew.true_divide(product, norm)
    return prims.reshape(result, tuple(s for s in result.shape if s != 1))


@torchsymbol(torch.corrcoef, torch.Tensor.corrcoef, method="corrcoef", tags=REDUCTION)
def corrcoef(input: TensorProxy) -> TensorProxy:
    c = cov(input)
    if c.ndim == 0:
        return ew.true_divide(c, c)
    n = c.shape[0]
    deviation = ew.sqrt(diagonal(c))
    c = ew.true_divide(c, prims.reshape(deviation, (n, 1)))
    c = ew.true_divide(c, prims.reshape(deviation, (1, n)))
    return ew.clamp(c, -1, 1)


# ---------------------------------------------------------------------------------------------
# Searching sorted sequences: counts of smaller elements, by comparison with every element


def _search(sorted_sequence: TensorProxy, values: Any, right: bool, out_int32: bool) -> TensorProxy:
    compare = ew.le if right else ew.lt
    dtype = dtypes.int32 if out_int32 else dtypes.int64
    if not isinstance(values, TensorProxy):
        if sorted_sequence.ndim != 1:
            raise RuntimeError(
                "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1"
            )
        values = prims.full((), values, device=sorted_sequence.device, dtype=sorted_sequence.dtype)
    if sorted_sequence.ndim == 1:  # every value against the whole sequence
        length = sorted_sequence.shape[0]
        below = compare(
            expand_to(sorted_sequence, (*values.shape, length)), prims.reshape(values, (*values.shape, 1))
        )
        return to_dtype(reductions.sum(below, -1) if values.ndim or length else reductions.sum(below), dtype)
    if sorted_sequence.shape[:-1] != values.shape[:-1] or values.ndim != sorted_sequence.ndim:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            "tensor and input value tensor must match"
        )
    batch, length, count = values.shape[:-1], sorted_sequence.shape[-1], values.shape[-1]
    sequence = prims.broadcast_in_dim(
        sorted_sequence, (*batch, count, length), (*range(len(batch)), len(batch) + 1)
    )
    column = prims.broadcast_in_dim(values, (*batch, count, length), tuple(range(len(batch) + 1)))
    return to_dtype(reductions.sum(compare(sequence, column), -1), dtype)


@torchsymbol(torch.searchsorted, tags=REDUCTION)
def searchsorted(sorted_sequence: TensorProxy, values: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: TensorProxy | None = None) -> TensorProxy:  # fmt: skip
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
        right = side == "right"
    if sorter is not None:
        if sorter.shape != sorted_sequence.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size")
        sorted_sequence = prims.take_along_axis(sorted_sequence, sorter, sorted_sequence.ndim - 1)
    return _search(sorted_sequence, values, right, out_int32)


@torchsymbol(torch.bucketize, tags=REDUCTION)
def bucketize(
    input: Any, boundaries: TensorProxy, *, out_int32: bool = False, right: bool = False
) -> TensorProxy:
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _search(boundaries, input, right, out_int32)


# ---------------------------------------------------------------------------------------------
# Histograms


@torchsymbol(torch.histc, torch.Tensor.histc, method="histc", tags=REDUCTION)
def histc(input: TensorProxy, bins: int = 100, min: float = 0, max: float = 0) -> TensorProxy:  # noqa: A002
    """Counts in ``bins`` equal bins over [min, max] (the data's range when they are equal), as eager bins:
    ``int((x - left) * bins / (right - left))`` in the input's dtype, the right edge in the last bin."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"torch.histc: input tensor and hist tensor should have the same dtype, but got input {input.dtype.name}"
        )
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    left: Any = float(min)
    right: Any = float(max)
    if left == right and input.numel() > 0:
        left, right = reductions.amin(input), reductions.amax(input)
        same = ew.eq(left, right)
        left, right = ew.where(same, ew.sub(left, 1), left), ew.where(same, ew.add(right, 1), right)
    elif left == right:
        left, right = left - 1, right + 1
    if isinstance(left, float):  # eager's edges are in the input's dtype
        left = prims.full((), left, device=input.device, dtype=input.dtype)
        right = prims.full((), right, device=input.device, dtype=input.dtype)
    x = prims.reshape(input, (input.numel(),))
    position = to_dtype(ew.true_divide(ew.mul(ew.sub(x, left), bins), ew.sub(right, left)), dtypes.int64)
    position = ew.where(ew.eq(position, bins), bins - 1, position)
    inside = ew.bitwise_and(ew.ge(x, left), ew.le(x, right))
    position = ew.where(inside, position, bins)  # outside (and NaN): counted in an extra bin, dropped
    counts = prims.full((bins + 1,), 0, device=input.device, dtype=input.dtype)
    ones = prims.full((input.numel(),), 1, device=input.device, dtype=input.dtype)
    counts = prims.scatter_add(counts, 0, position, ones)
    return prims.slice_prim(counts, (0,), (bins,), (1,))


# ---------------------------------------------------------------------------------------------
# Order statistics: quantiles and the mode


def _quantile(
    a: TensorProxy, q: Any, dim: int | None, keepdim: bool, interpolation: str, ignore_nan: bool
) -> TensorProxy:
    name = "nanquantile" if ignore_nan else "quantile"
    if a.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if not a.dtype.is_floating_point or dtypes.is_low_precision(a.dtype):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise RuntimeError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got {interpolation}"
        )
    if isinstance(q, TensorProxy):
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype is not a.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        q = prims.full((), float(q), device=a.device, dtype=a.dtype)  # eager's q is in the input's dtype
    # the reduced dim last: (*batch, n), sorted
    if dim is None:
        x, batch_shape = prims.reshape(a, (a.numel(),)), ()
        kept_shape = (1,) * a.ndim
    else:
        d = canonical_dim(dim, a.ndim)
        x = prims.reshape(a, (1,)) if a.ndim == 0 else a
        if x.ndim > 1 and d != x.ndim - 1:
            x = prims.transpose(x, (*range(d), *range(d + 1, x.ndim), d))
        batch_shape = x.shape[:-1]
        kept_shape = a.shape[:d] + (1,) + a.shape[d + 1 :] if a.ndim else ()
    n = x.shape[-1]
    values, _ = prims.sort(x, x.ndim - 1, False, True)
    count = q.numel() if q.ndim else 1
    q_row = prims.reshape(q, (count,))
    nan_count = reductions.sum(to_dtype(ew.isnan(values), dtypes.int64), -1, keepdim=True)
    if ignore_nan:
        ranks = ew.mul(q_row, ew.sub(ew.sub(n, nan_count), 1))
        ranks = ew.where(ew.lt(ranks, 0), 0, ranks)
    else:
        ranks = ew.where(ew.gt(nan_count, 0), float(n - 1), ew.mul(q_row, n - 1))
    ranks = expand_to(to_dtype(ranks, a.dtype), (*batch_shape, count))
    if interpolation == "lower":
        ranks = ew.floor(ranks)
    elif interpolation == "higher":
        ranks = ew.ceil(ranks)
    elif interpolation == "nearest":
        ranks = ew.round(ranks)
    below = to_dtype(ranks, dtypes.int64)
    result = prims.take_along_axis(values, below, x.ndim - 1)
    if interpolation in ("linear", "midpoint"):
        weights = ew.sub(ranks, to_dtype(below, a.dtype)) if interpolation == "linear" else 0.5
        above = prims.take_along_axis(values, to_dtype(ew.ceil(ranks), dtypes.int64), x.ndim - 1)
        if not isinstance(weights, TensorProxy):
            weights = prims.full(result.shape, weights, device=a.device, dtype=a.dtype)
        result = lerp(result, above, weights)
    # (*batch, count) -> (count, *kept or batch)
    out_shape = kept_shape if keepdim else batch_shape
    if q.ndim == 0:
        return prims.reshape(result, out_shape)
    result = prims.transpose(result, (result.ndim - 1, *range(result.ndim - 1)))
    return prims.reshape(result, (count, *out_shape))


@torchsymbol(torch.quantile, torch.Tensor.quantile, method="quantile", tags=REDUCTION)
def quantile(input: TensorProxy, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> TensorProxy:  # fmt: skip
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


@torchsymbol(torch.nanquantile, torch.Tensor.nanquantile, method="nanquantile", tags=REDUCTION)
def nanquantile(input: TensorProxy, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> TensorProxy:  # fmt: skip
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


@torchsymbol(torch.mode, torch.Tensor.mode, method="mode", tags=REDUCTION)
def mode(input: TensorProxy, dim: int = -1, keepdim: bool = False) -> tuple[TensorProxy, TensorProxy]:
    """The most frequent value (the smallest of equally frequent ones, as eager) and an index holding it."""
    if input.ndim == 0:
        return structseq("mode", input, prims.full((), 0, device=input.device, dtype=dtypes.int64))
    d = canonical_dim(dim, input.ndim)
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    values, indices = prims.sort(input, d, False, True)
    # how often each sorted value occurs: compare it with every element of its slice
    wide = (*values.shape[: d + 1], n, *values.shape[d + 1 :])
    mine = prims.broadcast_in_dim(values, wide, (*range(d + 1), *range(d + 2, len(wide))))
    others = prims.broadcast_in_dim(values, wide, (*range(d), *range(d + 1, len(wide))))
    counts = reductions.sum(to_dtype(ew.eq(mine, others), dtypes.int64), d + 1)
    best = prims.reshape(
        prims.argmax(counts, d), (*input.shape[:d], 1, *input.shape[d + 1 :])
    )  # first: the smallest
    value, index = prims.take_along_axis(values, best, d), prims.take_along_axis(indices, best, d)
    if not keepdim:
        shape = input.shape[:d] + input.shape[d + 1 :]
        value, index = prims.reshape(value, shape), prims.reshape(index, shape)
    return structseq("mode", value, index)


# ---------------------------------------------------------------------------------------------
# Scans


@torchsymbol(torch.logcumsumexp, torch.Tensor.logcumsumexp, method="logcumsumexp", tags=REDUCTION)
def logcumsumexp(input: TensorProxy, dim: int) -> TensorProxy:
    """A scan of ``logaddexp`` in float64 for float32 and narrower inputs: ``ceil(log2(n))`` steps each
    add to every element the running value ``2**k`` places before it (Hillis and Steele). Unlike
    ``log(cumsum(exp(a - max)))`` no element underflows, however far below its slice's maximum."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"\"logcumsumexp_out_cpu\" not implemented for '{input.dtype.name}'")
    if input.dtype.is_complex:
        raise NotImplementedError("thunder does not support logcumsumexp of complex tensors yet")
    d = canonical_dim(dim, input.ndim)
    if input.numel() == 0 or input.ndim == 0:
        return input
    result = to_dtype(input, dtypes.float64)
    n, step = input.shape[d], 1
    while step < n:
        earlier = prims.pad(
            narrow(result, d, 0, n - step),
            -math.inf,
            [(step, 0, 0) if i == d else (0, 0, 0) for i in range(input.ndim)],
        )
        result = logaddexp(result, earlier)
        step *= 2
    return to_dtype(result, input.dtype)


@register_vjp(logcumsumexp)
def _logcumsumexp_vjp(g: Any, a: TensorProxy, dim: int, *, out: TensorProxy) -> tuple:
    """``grad[j] = sum(g[i] * exp(a[j] - out[i]) for i >= j)``, summed in log space: the positive and the
    negative parts of ``g`` each as ``exp(a[j] + reversed_logcumsumexp(log(|g|) - out)[j])``, so no
    term overflows or underflows (every ``a[j] - out[i]`` is at most 0). In float64 for float32 and
    narrower inputs, with ``out`` recomputed there: a float32 ``out`` near 1e4 is off by 5e-4, and its
    ``exp`` by as much relatively (eager's float32 gradient has that error)."""
    if g is None or a.numel() == 0 or a.ndim == 0:
        return (g, None)
    d = canonical_dim(dim, a.ndim)
    x = to_dtype(a, dtypes.float64)
    y = out if a.dtype is dtypes.float64 else logcumsumexp(x, d)
    g = to_dtype(g, dtypes.float64)

    def part(weights: TensorProxy) -> TensorProxy:  # sum(w[i] * exp(x[j] - y[i]) for i >= j) for w >= 0
        log_weights = ew.where(ew.gt(weights, 0.0), ew.log(weights), -math.inf)
        summed = prims.flip(logcumsumexp(prims.flip(ew.sub(log_weights, y), (d,)), d), (d,))
        return ew.exp(ew.add(x, summed))

    return (to_dtype(ew.sub(part(g), part(ew.neg(g))), a.dtype), None)
