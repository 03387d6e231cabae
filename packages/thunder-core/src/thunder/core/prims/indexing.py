"""Indexing prims: gather/scatter, index_select/add/copy, advanced indexing and index_put; with their rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder.core import dtypes
from thunder.core.gradients import register_vjp
from thunder.core.prims.core import (
    _check,
    _dim_meta_check,
    bitwise_and,
    convert_element_type,
    div,
    eq,
    full,
    pad,
    reshape,
    slice_prim,
    sum,  # noqa: A004 -- the prims, as in core
    take_along_axis,
    where,
)
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_prim


def _check_index(name: str, index: TensorProxy) -> None:
    _check(
        isinstance(index, TensorProxy) and dtypes.is_integer(index.dtype),
        lambda: f"prims.{name} needs an integer index tensor, got {index!r}",
    )


def _scatter_meta(a: TensorProxy, dim: int, index: TensorProxy, src: Any) -> TensorProxy:
    _check_index("scatter", index)
    _dim_meta_check("scatter", a, dim)
    _check(
        index.ndim == a.ndim or index.numel() == 0, lambda: "prims.scatter: index and input differ in ndim"
    )
    if isinstance(src, TensorProxy):
        _check(src.dtype is a.dtype, lambda: f"prims.scatter: src is {src.dtype}, input is {a.dtype}")
        requires_grad = a.requires_grad or src.requires_grad
    else:
        requires_grad = a.requires_grad
    return a.replace(requires_grad=requires_grad)


scatter = make_prim("scatter", _scatter_meta)  # src: a tensor or a number
scatter_add = make_prim("scatter_add", _scatter_meta)


def _scatter_reduce_meta(
    a: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy, reduce: str, include_self: bool
) -> TensorProxy:
    _check(reduce in ("sum", "prod", "mean", "amax", "amin"), lambda: f"unknown scatter reduction {reduce!r}")
    return _scatter_meta(a, dim, index, src)


scatter_reduce = make_prim("scatter_reduce", _scatter_reduce_meta)


def _gather_pad(g: TensorProxy, src: TensorProxy) -> TensorProxy:
    """``g`` (shaped like an index) zero-padded at the end to the shape of ``src``."""
    if g.shape == src.shape:
        return g
    config = [(0, s - i, 0) for s, i in zip(src.shape, g.shape)]
    return pad(g, 0.0 if g.dtype.is_floating_point or g.dtype.is_complex else 0, config)


def _gather(g: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    """``torch.gather``: the other dims of ``g`` are cut to the index's extent first."""
    if g.shape[:dim] + g.shape[dim + 1 :] != index.shape[:dim] + index.shape[dim + 1 :]:
        end = [i if d != dim else s for d, (i, s) in enumerate(zip(index.shape, g.shape))]
        g = slice_prim(g, [0] * g.ndim, end, [1] * g.ndim)
    return take_along_axis(g, index, dim)


def _src_grad(g: Any, dim: int, index: TensorProxy, src: Any) -> Any:
    if not isinstance(src, TensorProxy):
        return None
    if src.ndim == 0:
        return reshape(_gather(g, dim, index), ()) if g.ndim else g
    return _gather_pad(_gather(g, dim, index), src)


@register_vjp(scatter_add)
def _scatter_add_vjp(g: Any, a: Any, dim: int, index: Any, src: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (g, None, None, _src_grad(g, dim, index, src))


@register_vjp(scatter)
def _scatter_vjp(g: Any, a: Any, dim: int, index: Any, src: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (scatter(g, dim, index, 0.0), None, None, _src_grad(g, dim, index, src))


@register_vjp(scatter_reduce)
def _scatter_reduce_vjp(
    g: Any, a: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool, *, out: Any
) -> tuple:
    if g is None:
        return (None,) * 6
    if reduce == "prod":
        raise NotImplementedError("the derivative of scatter_reduce with reduce='prod' is not implemented")
    if reduce == "sum":
        grad_a = g if include_self else scatter(g, dim, index, 0.0)
        return (grad_a, None, None, _src_grad(g, dim, index, src), None, None)
    # mean and amax/amin: each contributor gets its share of the cotangent of its output element
    used = src if src.shape == index.shape else slice_prim(src, [0] * src.ndim, index.shape, [1] * src.ndim)
    indexed = scatter(full(a.shape, 0.0, device=a.device, dtype=g.dtype), dim, index, 1.0)
    not_indexed = eq(indexed, 0.0)
    if reduce == "mean":
        from_self = convert_element_type(where(not_indexed, 1.0, 1.0 if include_self else 0.0), g.dtype)
        counts = scatter_add(from_self, dim, index, full(index.shape, 1.0, device=a.device, dtype=g.dtype))
        share = div(g, counts)
        grad_a = where(not_indexed, g, share if include_self else 0.0)
        return (grad_a, None, None, _gather_pad(_gather(share, dim, index), src), None, None)
    self_wins = eq(a, out)
    if not include_self:
        self_wins = bitwise_and(self_wins, not_indexed)
    src_wins = eq(used, _gather(out, dim, index))
    counts = scatter_add(
        convert_element_type(self_wins, g.dtype), dim, index, convert_element_type(src_wins, g.dtype)
    )
    share = div(g, where(eq(counts, 0.0), 1.0, counts))
    grad_a = where(self_wins, share, 0.0)
    grad_src = where(src_wins, _gather(share, dim, index), 0.0)
    return (grad_a, None, None, _gather_pad(grad_src, src), None, None)


@register_vjp(take_along_axis)
def _take_along_axis_vjp(g: Any, a: Any, index: Any, dim: int, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    return (scatter_add(_zeros_like_grad(a, g), dim, index, g), None, None)


def _zeros_like_grad(a: TensorProxy, g: TensorProxy) -> TensorProxy:
    return full(a.shape, 0, device=a.device, dtype=g.dtype)


def _index_select_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    """``torch.index_select``: the slices of ``a`` along ``dim`` at a 1-d (or 0-d) ``index``."""
    _check_index("take", index)
    _check(index.ndim <= 1, lambda: "prims.take needs a 0-d or 1-d index")
    _dim_meta_check("take", a, dim)
    if a.ndim == 0:
        return a.replace(shape=())
    return a.replace(shape=a.shape[:dim] + (index.numel(),) + a.shape[dim + 1 :])


take = make_prim("take", _index_select_meta)


def _index_update_meta(a: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
    _check_index("index_add", index)
    _dim_meta_check("index_add", a, dim)
    _check(source.dtype is a.dtype, lambda: f"source is {source.dtype}, input is {a.dtype}")
    return a.replace(requires_grad=a.requires_grad or source.requires_grad)


index_add = make_prim("index_add", _index_update_meta)
index_copy = make_prim("index_copy", _index_update_meta)


def _source_grad(g: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
    selected = take(g, index, dim)
    return reshape(selected, source.shape) if selected.shape != source.shape else selected


@register_vjp(take)
def _take_vjp(g: Any, a: Any, index: Any, dim: int, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    if a.ndim == 0:
        return (reshape(g, ()) if g.ndim else g, None, None)
    source = reshape(g, a.shape[:dim] + (index.numel(),) + a.shape[dim + 1 :])
    return (index_add(_zeros_like_grad(a, g), dim, reshape(index, (index.numel(),)), source), None, None)


@register_vjp(index_add)
def _index_add_vjp(g: Any, a: Any, dim: int, index: Any, source: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (g, None, None, _source_grad(g, dim, index, source))


@register_vjp(index_copy)
def _index_copy_vjp(g: Any, a: Any, dim: int, index: Any, source: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    cleared = index_copy(g, dim, index, full(source.shape, 0, device=g.device, dtype=g.dtype))
    return (cleared, None, None, _source_grad(g, dim, index, source))


def _meta_tensor(a: TensorProxy) -> Any:
    import torch

    return torch.empty(a.shape, dtype=a.dtype.torch_dtype, device="meta")


def _index_meta(a: TensorProxy, indices: Sequence[TensorProxy | None]) -> TensorProxy:
    """Advanced indexing (``aten.index``): one integer tensor or None per leading dim of ``a``."""
    import torch

    for index in indices:
        if index is not None:
            _check_index("index", index)
    _check(any(i is not None for i in indices), lambda: "prims.index needs at least one index tensor")
    if _has_symbolic_size(a, *indices):
        return a.replace(
            shape=_symbolic_index_shape(a.shape, [None if i is None else i.shape for i in indices])
        )
    meta_indices = [None if i is None else _meta_tensor(i) for i in indices]
    shape = torch.ops.aten.index.Tensor(_meta_tensor(a), meta_indices).shape
    return a.replace(shape=tuple(shape))


def _has_symbolic_size(*tensors: TensorProxy | None) -> bool:
    import torch

    return any(t is not None and any(type(s) is torch.SymInt for s in t.shape) for t in tensors)


def _symbolic_index_shape(shape: tuple, index_shapes: list) -> tuple:
    """``aten.index``'s result shape where a size is symbolic (core/symbolic_shapes.py; torch's meta
    function wants a fake-tensor mode for those): the index tensors' broadcast shape replaces the dims
    they index, in place when those dims are adjacent, else in front."""
    from thunder.core.promotion import broadcast_shapes

    _check(len(index_shapes) <= len(shape), lambda: f"too many indices for tensor of dimension {len(shape)}")
    positions = [d for d, index_shape in enumerate(index_shapes) if index_shape is not None]
    indexed = broadcast_shapes(*(index_shapes[d] for d in positions))
    if positions == list(range(positions[0], positions[-1] + 1)):
        return (*shape[: positions[0]], *indexed, *shape[positions[-1] + 1 :])
    return (*indexed, *(size for d, size in enumerate(shape) if d not in positions))


index = make_prim("index", _index_meta)


def _index_put_meta(
    a: TensorProxy, indices: Sequence[TensorProxy | None], values: TensorProxy, accumulate: bool
) -> TensorProxy:
    indexed = _index_meta(a, indices)
    _check(values.dtype is a.dtype, lambda: f"prims.index_put: values are {values.dtype}, input is {a.dtype}")
    from thunder.core.promotion import broadcast_shapes

    _check(
        broadcast_shapes(values.shape, indexed.shape) == indexed.shape,
        lambda: f"prims.index_put: values of shape {values.shape} do not broadcast to {indexed.shape}",
    )
    return a.replace(requires_grad=a.requires_grad or values.requires_grad)


index_put = make_prim("index_put", _index_put_meta)


@register_vjp(index)
def _index_vjp(g: Any, a: Any, indices: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None)
    return (index_put(_zeros_like_grad(a, g), indices, g, True), None)


@register_vjp(index_put)
def _index_put_vjp(g: Any, a: Any, indices: Any, values: Any, accumulate: bool, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    grad_a = g if accumulate else index_put(g, indices, full((), 0, device=g.device, dtype=g.dtype), False)
    selected = index(g, indices)
    if selected.shape != values.shape:
        offset = selected.ndim - values.ndim
        summed = list(range(offset)) + [
            offset + d for d, size in enumerate(values.shape) if size == 1 and selected.shape[offset + d] != 1
        ]
        selected = reshape(sum(selected, summed), values.shape)
    return (grad_a, None, selected, None)
