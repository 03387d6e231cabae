"""Norms of vectors (and the matrix norms that need no decomposition): vector_norm, norm, dist, renorm."""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.torch.reductions import keep_dims
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, canonical_dims, to_dtype

REDUCTION = frozenset({"reduction"})


def _norm_dtypes(a: TensorProxy, dtype: Any) -> tuple[dtypes.dtype, dtypes.dtype]:
    """(computation dtype, result dtype): norms are real and floating."""
    if a.dtype.is_complex or (dtype is not None and dtypes.to_dtype(dtype).is_complex):
        raise NotImplementedError("thunder does not support norms of complex tensors yet")
    if dtype is not None:
        result = dtypes.to_dtype(dtype)
        if not result.is_floating_point:
            raise RuntimeError(
                f"linalg.vector_norm: dtype should be floating point or complex, but got {result.name}"
            )
    elif a.dtype.is_floating_point:
        result = a.dtype
    else:
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {a.dtype.name}"
        )
    return (dtypes.float32 if dtypes.is_low_precision(result) else result), result


def _vector_norm(a: TensorProxy, ord: float, dims: tuple[int, ...], keepdim: bool, dtype: Any) -> TensorProxy:  # noqa: A002
    computation_dtype, result_dtype = _norm_dtypes(a, dtype)
    x = prims.abs(to_dtype(a, computation_dtype))
    empty = math.prod(a.shape[d] for d in dims) == 0 if a.ndim else False
    if ord == math.inf or ord == -math.inf:
        if empty:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor")
        result = (prims.amax if ord > 0 else prims.amin)(x, dims)
    elif ord == 0:
        result = prims.sum(to_dtype(prims.ne(x, 0.0), computation_dtype), dims)
    elif ord == 1:
        result = prims.sum(x, dims)
    elif ord == 2:
        result = prims.sqrt(prims.sum(prims.mul(x, x), dims))
    else:
        if ord < 0 and empty:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor")
        result = prims.pow(prims.sum(prims.pow(x, float(ord)), dims), 1.0 / ord)
    result = to_dtype(result, result_dtype)
    return keep_dims(result, a, dims) if keepdim else result


@torchsymbol(torch.linalg.vector_norm, tags=REDUCTION)
def vector_norm(input: TensorProxy, ord: float = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> TensorProxy:  # fmt: skip
    dims = canonical_dims(dim, input.ndim)
    return _vector_norm(input, float(ord), dims, keepdim, dtype)


@register_vjp(vector_norm)
def _vector_norm_vjp(
    g: Any, a: Any, ord: Any, dim: Any, keepdim: bool, *, out: Any, dtype: Any = None
) -> tuple:  # noqa: A002
    """Subgradients where eager takes them: 0 at a zero norm, an even split among tied maxima."""
    if g is None:
        return (None,) * 4
    dims = canonical_dims(dim, a.ndim)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(a.dtype) else a.dtype
    x = to_dtype(a, computation_dtype)
    norm, g = (
        to_dtype(keep_dims(out, a, dims), computation_dtype),
        to_dtype(keep_dims(g, a, dims), computation_dtype),
    )
    kept = tuple(range(a.ndim))
    norm, g = prims.broadcast_in_dim(norm, a.shape, kept), prims.broadcast_in_dim(g, a.shape, kept)
    ord = float(ord)
    sign = prims.sign(x)
    if ord == 0:
        return (None,) * 4
    if ord == 1:
        grad = prims.mul(g, sign)
    elif math.isinf(ord):
        hits = prims.eq(prims.abs(x), norm)
        count = prims.broadcast_in_dim(
            keep_dims(prims.sum(to_dtype(hits, computation_dtype), dims), a, dims), a.shape, kept
        )
        grad = prims.where(hits, prims.div(prims.mul(g, sign), count), 0.0)
    else:
        power = prims.pow(prims.abs(x), ord - 1.0) if ord != 2 else prims.abs(x)
        scale = prims.pow(norm, ord - 1.0) if ord != 2 else norm
        grad = prims.where(prims.eq(norm, 0.0), 0.0, prims.div(prims.mul(prims.mul(g, sign), power), scale))
    return (to_dtype(grad, a.dtype), None, None, None)


def _matrix_norm(a: TensorProxy, ord: Any, dims: tuple[int, ...], keepdim: bool, dtype: Any) -> TensorProxy:  # noqa: A002
    if ord in ("fro",):
        return vector_norm(a, 2.0, dims, keepdim, dtype=dtype)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(
            f"the matrix norm of order {ord!r} needs singular values, which thunder does not have yet"
        )
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    d0, d1 = dims
    # 1: max over columns of the column sums; inf: max over rows of the row sums
    summed, reduced = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = _vector_norm(a, 1.0, (summed,), True, dtype)
    if ord > 0 and a.shape[reduced] == 0:  # the largest of no sums is 0, as in eager
        shape = tuple(size for i, size in enumerate(sums.shape) if i not in dims)
        result = prims.full(shape, 0, device=a.device, dtype=sums.dtype)
    else:
        result = (prims.amax if ord > 0 else prims.amin)(sums, (reduced, summed))
    result = keep_dims(result, a, dims) if keepdim else result
    return result


@torchsymbol(torch.linalg.matrix_norm, tags=REDUCTION)
def matrix_norm(input: TensorProxy, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> TensorProxy:  # fmt: skip
    dims = tuple(canonical_dim(d, input.ndim) for d in dim)
    if len(dims) != 2 or dims[0] == dims[1]:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple of different dimensions")
    return _matrix_norm(input, ord, dims, keepdim, dtype)


@torchsymbol(torch.linalg.norm, tags=REDUCTION)
def linalg_norm(input: TensorProxy, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> TensorProxy:  # fmt: skip
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        dims = canonical_dims(dim, input.ndim) if dim is not None else tuple(range(input.ndim))
        return vector_norm(input, 2.0, dims, keepdim, dtype=dtype)
    if dim is None and input.ndim not in (1, 2):
        raise RuntimeError(
            f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {input.ndim}D."
        )
    dims = tuple(canonical_dim(d, input.ndim) for d in dim) if dim is not None else tuple(range(input.ndim))
    if len(dims) == 2:
        return _matrix_norm(input, ord, dims, keepdim, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord {ord!r} is a matrix norm")
    return vector_norm(input, float(ord), dims, keepdim, dtype=dtype)


@torchsymbol(torch.norm, torch.Tensor.norm, method="norm", tags=REDUCTION)
def norm(
    a: TensorProxy, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None
) -> TensorProxy:
    """``torch.norm``: 'fro' and numbers are vector norms over ``dim`` (all dims by default); 'nuc' is refused."""
    if isinstance(dim, int):
        dim = (dim,)
    if p == "nuc":
        raise NotImplementedError("the nuclear norm needs singular values, which thunder does not have yet")
    if p == "fro":
        if dim is not None and len(dim) > 2:
            raise RuntimeError("Expected at most 2 dimensions for 'fro' norm")
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"torch.norm: unknown norm {p!r}")
    dims = canonical_dims(dim, a.ndim)
    return vector_norm(a, float(p), dims, keepdim, dtype=dtype)


@torchsymbol(torch.dist, torch.Tensor.dist, method="dist", tags=REDUCTION)
def dist(input: TensorProxy, other: TensorProxy, p: float = 2) -> TensorProxy:
    from thunder.torch.elementwise import sub

    return vector_norm(sub(input, other), p)


@torchsymbol(torch.renorm, torch.Tensor.renorm, method="renorm", tags=REDUCTION)
def renorm(input: TensorProxy, p: float, dim: int, maxnorm: float) -> TensorProxy:
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` is scaled down to it."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    d = canonical_dim(dim, input.ndim)
    other = tuple(i for i in range(input.ndim) if i != d)
    norms = _vector_norm(input, float(p), other, True, None)
    computation_dtype = dtypes.float32 if dtypes.is_low_precision(input.dtype) else input.dtype
    norms = to_dtype(norms, computation_dtype)
    # as eager: maxnorm / (norm + 1e-7) where the norm is too large
    factor = prims.where(prims.gt(norms, maxnorm), prims.div(maxnorm, prims.add(norms, 1e-7)), 1.0)
    factor = prims.broadcast_in_dim(factor, input.shape, tuple(range(input.ndim)))
    return to_dtype(prims.mul(to_dtype(input, computation_dtype), factor), input.dtype)
