"""Scan and sort prims (cumsum, cumprod, flip, sort, topk) and running extrema (cummax, cummin)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder.core import dtypes
from thunder.core.gradients import register_vjp
from thunder.core.prims.core import (
    REDUCTION,
    SHAPE,
    _check,
    _dim_meta_check,
    bitwise_and,
    convert_element_type,
    div,
    eq,
    full,
    mul,
    where,
)
from thunder.core.prims.indexing import _zeros_like_grad, scatter_add
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_prim


def _scan_meta(a: TensorProxy, dim: int) -> TensorProxy:
    _dim_meta_check("cumsum", a, dim)
    return a.replace()


cumsum = make_prim("cumsum", _scan_meta, tags=REDUCTION)
cumprod = make_prim("cumprod", _scan_meta, tags=REDUCTION)


def _flip_meta(a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    for d in dims:
        _dim_meta_check("flip", a, d)
    return a.replace()


flip = make_prim("flip", _flip_meta, tags=SHAPE)
register_vjp(flip)(lambda g, a, dims, *, out: (None if g is None else flip(g, dims), None))


@register_vjp(cumsum)
def _cumsum_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    if g is None or a.ndim == 0:
        return (g, None)
    return (flip(cumsum(flip(g, (dim,)), dim), (dim,)), None)


@register_vjp(cumprod)
def _cumprod_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    """Exact with zeros: only the first zero along ``dim`` gets a gradient, computed without dividing."""
    if g is None or a.ndim == 0:
        return (g, None)

    def reverse_cumsum(x: Any) -> Any:
        return flip(cumsum(flip(x, (dim,)), dim), (dim,))

    is_zero = eq(a, 0.0)
    first_zero = bitwise_and(is_zero, eq(cumsum(convert_element_type(is_zero, dtypes.int64), dim), 1))
    nonzero_grad = div(reverse_cumsum(mul(g, out)), where(is_zero, 1.0, a))
    without_first_zero = cumprod(where(first_zero, 1.0, a), dim)
    first_zero_grad = reverse_cumsum(mul(g, without_first_zero))
    return (where(is_zero, where(first_zero, first_zero_grad, 0.0), nonzero_grad), None)


def _sort_meta(a: TensorProxy, dim: int, descending: bool, stable: bool) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("sort", a, dim)
    return a.replace(), a.replace(dtype=dtypes.int64, requires_grad=False)


sort = make_prim("sort", _sort_meta)


def _topk_meta(
    a: TensorProxy, k: int, dim: int, largest: bool, is_sorted: bool
) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("topk", a, dim)
    size = a.shape[dim] if a.ndim else 1
    _check(0 <= k <= size, lambda: f"prims.topk: k={k} is out of range for a dim of size {size}")
    shape = a.shape[:dim] + (k,) + a.shape[dim + 1 :] if a.ndim else ()
    return a.replace(shape=shape), a.replace(shape=shape, dtype=dtypes.int64, requires_grad=False)


topk = make_prim("topk", _topk_meta)


def _zeros_like(a: TensorProxy) -> TensorProxy:
    return full(a.shape, False if a.dtype is dtypes.bool8 else 0, device=a.device, dtype=a.dtype)


@register_vjp(sort)
def _sort_vjp(g: Any, a: Any, dim: int, descending: bool, stable: bool, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None, None, None)
    if a.ndim == 0:
        return (g_values, None, None, None)
    return (scatter_add(_zeros_like(a), dim, out[1], g_values), None, None, None)


@register_vjp(topk)
def _topk_vjp(g: Any, a: Any, k: int, dim: int, largest: bool, is_sorted: bool, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None, None, None, None)
    if a.ndim == 0:
        return (g_values, None, None, None, None)
    return (scatter_add(_zeros_like(a), dim, out[1], g_values), None, None, None, None)


# running extrema (ops A): values and the index each came from
def _cumulative_extremum_meta(a: TensorProxy, dim: int) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("cummax", a, dim)
    return a.replace(), a.replace(dtype=dtypes.int64, requires_grad=False)


cummax = make_prim("cummax", _cumulative_extremum_meta, tags=REDUCTION)
cummin = make_prim("cummin", _cumulative_extremum_meta, tags=REDUCTION)


@register_vjp(cummax, cummin)
def _cumulative_extremum_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None)
    if a.ndim == 0:
        return (g_values, None)
    return (scatter_add(_zeros_like_grad(a, g_values), dim, out[1], g_values), None)
