"""Indexing: advanced ``__getitem__``, gather/scatter, index_* ops, masks, and functional updates.

Everything here has a static output shape. What would not (a boolean mask as an index,
``masked_select``, ``nonzero``) raises a ``NotImplementedError`` that says so. The functional
updates (``index_put``, ``slice_scatter``, ``select_scatter``, ``diagonal_scatter``, ``setitem``)
are what in-place indexing ops are rewritten into.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import broadcast_shapes
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import alias, torchsymbol
from thunder.torch.shape import _apply_basic_index, getitem, reshape
from thunder.torch.utils import canonical_dim, expand_to, on_one_device, to_dtype
from thunder.torch.views import movedim

INDEXING = frozenset({"indexing"})

_DATA_DEPENDENT = "has a data-dependent shape, which thunder does not support"


def _int_index(index: TensorProxy, name: str) -> TensorProxy:
    if index.dtype is dtypes.bool8 or index.dtype is dtypes.uint8:
        raise NotImplementedError(f"{name} with a boolean mask as an index {_DATA_DEPENDENT}")
    if not dtypes.is_integer(index.dtype):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return index


def _constant_index(values: Any, device: Any) -> TensorProxy:
    """A Python list of ints used as an index becomes a constant int64 tensor of the program."""
    flat = list(_flatten(values))
    if any(isinstance(v, bool) for v in flat):
        raise NotImplementedError(f"indexing with a list of booleans {_DATA_DEPENDENT}")
    if not all(isinstance(v, int) for v in flat):
        raise NotImplementedError(f"indexing with the list {values!r} is not supported by thunder")
    return prims.tensor_from_sequence(_as_lists(values), device=device, dtype=dtypes.int64)


def _flatten(values: Any) -> Any:
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def _as_lists(values: Any) -> Any:
    return [_as_lists(v) for v in values] if isinstance(values, (list, tuple)) else values


def _long_index(index: TensorProxy, name: str) -> TensorProxy:
    """gather and scatter take any integer index (uint8 is no mask for them); prims take int64."""
    if not dtypes.is_integer(index.dtype):
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    return to_dtype(index, dtypes.int64)


@torchsymbol(torch.gather, torch.Tensor.gather, method="gather", tags=INDEXING)
def gather(input: TensorProxy, dim: int, index: TensorProxy, *, sparse_grad: bool = False) -> TensorProxy:
    index = _long_index(index, "gather")
    if index.numel() == 0:
        return prims.full(index.shape, 0, device=input.device, dtype=input.dtype)
    if input.ndim == 0 or index.ndim == 0:
        if (
            max(input.ndim, index.ndim) > 1
            or input.ndim != index.ndim
            and (input.numel() != 1 or index.numel() != 1)
        ):
            raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
        result = prims.take_along_axis(reshape(input, (1,)), reshape(index, (1,)), 0)
        return reshape(result, index.shape)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    d = canonical_dim(dim, input.ndim)
    for i, (size, bound) in enumerate(zip(index.shape, input.shape)):
        if i != d and size > bound:
            raise RuntimeError(f"Size does not match at dimension {i} expected index {list(index.shape)} to be "
                               f"no larger than self {list(input.shape)} apart from dimension {d}")  # fmt: skip
    # gather reads the leading part of the other dims; take_along_axis wants them equal
    window = tuple(slice(0, s) if i != d else slice(None) for i, s in enumerate(index.shape))
    return prims.take_along_axis(_apply_basic_index(input, window), index, d)


def _scatter_checks(a: TensorProxy, dim: int, index: TensorProxy, src: Any) -> int:
    if a.ndim and index.ndim and index.ndim != a.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, TensorProxy) and src.dtype is not a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    return canonical_dim(dim, a.ndim)


def _scatter_shapes(a: TensorProxy, index: TensorProxy, src: Any) -> tuple[TensorProxy, TensorProxy, Any]:
    """0-d operands as 1-d, so that the prims see tensors of one rank."""
    if a.ndim and index.ndim and (not isinstance(src, TensorProxy) or src.ndim):
        return a, index, src
    one = (1,)
    src = reshape(src, one) if isinstance(src, TensorProxy) and src.ndim == 0 else src
    return (reshape(a, one) if a.ndim == 0 else a), (reshape(index, one) if index.ndim == 0 else index), src


def _scatter_op(
    prim: Any, a: TensorProxy, dim: int, index: TensorProxy, src: Any, *extra: Any
) -> TensorProxy:
    index = _long_index(index, "scatter")
    d = _scatter_checks(a, dim, index, src)
    if index.numel() == 0:
        return a
    a1, index1, src1 = _scatter_shapes(a, index, src)
    result = prim(a1, d, index1, src1, *extra)
    return reshape(result, a.shape) if result.shape != a.shape else result


@torchsymbol(torch.scatter, torch.Tensor.scatter, method="scatter", tags=INDEXING)
def scatter(input: TensorProxy, dim: int, index: TensorProxy, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> TensorProxy:  # fmt: skip
    src = value if src is None else src
    if isinstance(src, TensorProxy) and src.ndim == 0 and input.ndim > 0 and index.ndim > 0:
        src = to_dtype(src, input.dtype)
        src = expand_to(reshape(src, (1,) * input.ndim), index.shape)
    if not isinstance(src, TensorProxy):
        src = to_dtype(src, input.dtype)
        if reduce is not None:
            src = prims.full(index.shape, src, device=input.device, dtype=input.dtype)
    if reduce == "add":
        return _scatter_op(prims.scatter_add, input, dim, index, src)
    if reduce == "multiply":
        return _scatter_op(prims.scatter_reduce, input, dim, index, src, "prod", True)
    if reduce is not None:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return _scatter_op(prims.scatter, input, dim, index, src)


@torchsymbol(torch.scatter_add, torch.Tensor.scatter_add, method="scatter_add", tags=INDEXING)
def scatter_add(input: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy) -> TensorProxy:
    return _scatter_op(prims.scatter_add, input, dim, index, src)


@torchsymbol(torch.scatter_reduce, torch.Tensor.scatter_reduce, method="scatter_reduce", tags=INDEXING)
def scatter_reduce(input: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy, reduce: str, *,
                   include_self: bool = True) -> TensorProxy:  # fmt: skip
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return _scatter_op(prims.scatter_reduce, input, dim, index, src, reduce, bool(include_self))


def _vector_index(index: TensorProxy, name: str) -> TensorProxy:
    _int_index(index, name)
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    return reshape(index, (index.numel(),)) if index.ndim == 0 else index


@torchsymbol(torch.index_select, torch.Tensor.index_select, method="index_select", tags=INDEXING)
def index_select(input: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    d = canonical_dim(dim, input.ndim)
    index = _vector_index(index, "index_select")
    if input.ndim == 0:
        return reshape(prims.take(reshape(input, (1,)), index, 0), ())
    return prims.take(input, index, d)


def _index_update(prim: Any, name: str, a: TensorProxy, dim: int, index: TensorProxy,
                  source: TensorProxy) -> TensorProxy:  # fmt: skip
    d = canonical_dim(dim, a.ndim)
    index = _vector_index(index, name)
    if source.dtype is not a.dtype:
        raise RuntimeError(
            f"{name}(): self ({a.dtype.name}) and source ({source.dtype.name}) must have the same scalar type"
        )
    if a.ndim == 0:
        result = prim(reshape(a, (1,)), 0, index, reshape(source, (source.numel(),)))
        return reshape(result, ())
    expected = a.shape[:d] + (index.numel(),) + a.shape[d + 1 :]
    if source.shape != expected:
        if source.numel() != index.numel() or source.ndim > 1 or a.ndim > 1:
            raise RuntimeError(
                f"{name}(): source of shape {list(source.shape)} does not match {list(expected)}"
            )
        source = reshape(source, expected)
    return prim(a, d, index, source)


@torchsymbol(torch.index_add, torch.Tensor.index_add, method="index_add", tags=INDEXING)
def index_add(
    input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy, *, alpha: Any = 1
) -> TensorProxy:
    if alpha != 1:
        source = to_dtype(prims.mul(source, to_dtype(alpha, source.dtype)), source.dtype)
    return _index_update(prims.index_add, "index_add", input, dim, index, source)


@torchsymbol(torch.index_copy, torch.Tensor.index_copy, method="index_copy", tags=INDEXING)
def index_copy(input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
    return _index_update(prims.index_copy, "index_copy", input, dim, index, source)


@torchsymbol(torch.index_fill, torch.Tensor.index_fill, method="index_fill", tags=INDEXING)
def index_fill(input: TensorProxy, dim: int, index: TensorProxy, value: Any) -> TensorProxy:
    d = canonical_dim(dim, input.ndim)
    index = _vector_index(index, "index_fill")
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor")
        value = to_dtype(value, input.dtype)
    shape = input.shape[:d] + (index.numel(),) + input.shape[d + 1 :] if input.ndim else (index.numel(),)
    if isinstance(value, TensorProxy):
        # a mask of the filled places, then a select: the value's gradient sums each place once, as
        # eager's does, where copying the value to every index counted a repeated index twice
        filled = prims.full(shape, True, device=input.device, dtype=dtypes.bool8)
        empty = prims.full(input.shape, False, device=input.device, dtype=dtypes.bool8)
        mask = _index_update(prims.index_copy, "index_fill", empty, d, index, filled)
        return prims.where(mask, prims.broadcast_in_dim(value, input.shape, ()), input)
    source = prims.full(shape, to_dtype(value, input.dtype), device=input.device, dtype=input.dtype)
    return _index_update(prims.index_copy, "index_fill", input, d, index, source)


def _put_indices(a: TensorProxy, indices: Sequence[Any]) -> list[TensorProxy | None]:
    result: list[TensorProxy | None] = []
    for index in indices:
        if index is None:
            result.append(None)
        elif isinstance(index, TensorProxy):
            result.append(index if index.dtype is dtypes.bool8 else _int_index(index, "index_put"))
        else:
            result.append(_constant_index(index, a.device))
    if len(result) > a.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a.ndim} (got {len(result)})")
    return result


@torchsymbol(torch.index_put, torch.Tensor.index_put, method="index_put", tags=INDEXING)
def index_put(
    input: TensorProxy, indices: Sequence[Any], values: Any, accumulate: bool = False
) -> TensorProxy:
    """``a`` with ``a[indices] = values`` (or ``+=`` when ``accumulate``); ``indices`` as in ``aten.index``."""
    index_list = _put_indices(input, indices)
    if not isinstance(values, TensorProxy):
        values = prims.full((), to_dtype(values, input.dtype), device=input.device, dtype=input.dtype)
    if values.dtype is not input.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {input.dtype.name} for the destination "
            f"and {values.dtype.name} for the source."
        )
    if not any(i is not None for i in index_list):
        return (
            expand_to(values, input.shape)
            if not accumulate
            else prims.add(input, expand_to(values, input.shape))
        )
    if len(index_list) == 1 and index_list[0] is not None and index_list[0].dtype is dtypes.bool8:
        return _masked_put(input, index_list[0], values, bool(accumulate))
    for index in index_list:
        if index is not None and index.dtype is dtypes.bool8:
            raise NotImplementedError(f"index_put with a boolean mask among other indices {_DATA_DEPENDENT}")
    return prims.index_put(input, index_list, values, bool(accumulate))


def _masked_put(a: TensorProxy, mask: TensorProxy, values: TensorProxy, accumulate: bool) -> TensorProxy:
    """``a[mask] = values`` for a mask over the leading dims: static, since the result is shaped like ``a``."""
    k = mask.ndim
    if mask.shape != a.shape[:k]:
        raise IndexError(f"The shape of the mask {list(mask.shape)} does not match the shape of the indexed tensor "
                         f"{list(a.shape)}")  # fmt: skip
    rest = a.shape[k:]
    full_mask = prims.broadcast_in_dim(mask, a.shape, tuple(range(k)))
    zero = False if a.dtype is dtypes.bool8 else 0
    if values.ndim <= len(rest) or values.shape[0] == 1:
        # one row of values for every selected position
        row = reshape(values, values.shape[1:]) if values.ndim == len(rest) + 1 else values
        if broadcast_shapes(row.shape, rest) != rest:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast"
            )
        spread = expand_to(row, a.shape)
        if accumulate:
            return prims.add(a, prims.where(full_mask, spread, zero))
        return prims.where(full_mask, spread, a)
    # one row per True, in order
    if values.shape[1:] != rest:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast")
    from thunder.core.inplace import check_true_count

    check_true_count(mask, values.shape[0])  # eager raises for more rows than Trues, as for fewer
    base = prims.full(a.shape, zero, device=a.device, dtype=a.dtype) if accumulate else a
    scattered = masked_scatter(base, full_mask, values)
    return prims.add(a, scattered) if accumulate else scattered


@torchsymbol(torch.Tensor.put, torch.put, method="put", tags=INDEXING)
def put(input: TensorProxy, index: TensorProxy, source: TensorProxy, accumulate: bool = False) -> TensorProxy:
    _int_index(index, "put")
    if index.numel() != source.numel():
        raise RuntimeError("put_(): Expected source and index to have the same number of elements")
    flat = reshape(input, (input.numel(),))
    positions = _wrap_negative(reshape(index, (index.numel(),)), input.numel())
    updated = index_put(flat, [positions], reshape(source, (source.numel(),)), accumulate)
    return reshape(updated, input.shape)


def _wrap_negative(index: TensorProxy, size: int) -> TensorProxy:
    return prims.where(prims.lt(index, 0), prims.add(index, size), index)


@torchsymbol(torch.take, torch.Tensor.take, method="take", tags=INDEXING)
def take(input: TensorProxy, index: TensorProxy) -> TensorProxy:
    _int_index(index, "take")
    flat_index = _wrap_negative(reshape(index, (index.numel(),)), input.numel())
    taken = prims.take(reshape(input, (input.numel(),)), flat_index, 0)
    return reshape(taken, index.shape)


@torchsymbol(torch.take_along_dim, torch.Tensor.take_along_dim, method="take_along_dim", tags=INDEXING)
def take_along_dim(input: TensorProxy, indices: TensorProxy, dim: int | None = None) -> TensorProxy:
    _int_index(indices, "take_along_dim")
    if dim is None:
        return take(input, reshape(indices, (indices.numel(),)))
    if input.ndim != indices.ndim:
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of dimensions"
        )
    d = canonical_dim(dim, input.ndim)
    # the other dims broadcast
    a_shape = broadcast_shapes(
        input.shape[:d] + (1,) + input.shape[d + 1 :], indices.shape[:d] + (1,) + indices.shape[d + 1 :]
    )
    input = expand_to(input, a_shape[:d] + (input.shape[d],) + a_shape[d + 1 :])
    indices = expand_to(indices, a_shape[:d] + (indices.shape[d],) + a_shape[d + 1 :])
    # PyTorch counts negative indices from the end; the gradient's scatter takes only non-negative ones
    return prims.take_along_axis(input, _wrap_negative(indices, input.shape[d]), d)


@torchsymbol(torch.masked_fill, torch.Tensor.masked_fill, method="masked_fill", tags=INDEXING)
def masked_fill(input: TensorProxy, mask: TensorProxy, value: Any) -> TensorProxy:
    if mask.dtype is not dtypes.bool8:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype.name}"
        )
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor")
        value = to_dtype(value, input.dtype)
    else:
        value = to_dtype(value, input.dtype)
    if isinstance(
        value, TensorProxy
    ):  # a value tensor of no dims on the CPU fills a CUDA tensor, as in eager
        input, mask, value = on_one_device((input, mask, value))
    shape = broadcast_shapes(input.shape, mask.shape)
    input, mask = expand_to(input, shape), expand_to(mask, shape)
    if isinstance(value, TensorProxy):
        value = expand_to(value, shape)
    return prims.where(mask, value, input)


@torchsymbol(torch.masked_scatter, torch.Tensor.masked_scatter, method="masked_scatter", tags=INDEXING)
def masked_scatter(input: TensorProxy, mask: TensorProxy, source: TensorProxy) -> TensorProxy:
    """The i-th True of ``mask`` (in order) takes ``source``'s i-th element: a gather at the running count."""
    if mask.dtype is not dtypes.bool8:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype.name}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes")
    shape = broadcast_shapes(input.shape, mask.shape)
    input, mask = expand_to(input, shape), expand_to(mask, shape)
    flat_mask = reshape(mask, (mask.numel(),))
    counts = prims.cumsum(to_dtype(flat_mask, dtypes.int64), 0) if flat_mask.ndim else flat_mask
    # positions where mask is False read element 0 (if any) and are discarded; a short source makes
    # the gather go out of range, an error as in eager
    positions = prims.where(flat_mask, prims.sub(counts, 1), 0)
    flat_source = reshape(source, (source.numel(),))
    if source.numel() == 0:
        flat_source = prims.full((1,), 0, device=input.device, dtype=input.dtype)
    taken = reshape(prims.take(flat_source, positions, 0), shape)
    return prims.where(mask, taken, input)


@torchsymbol(torch.masked_select, torch.Tensor.masked_select, method="masked_select", tags=INDEXING)
def masked_select(input: TensorProxy, mask: TensorProxy) -> TensorProxy:
    raise NotImplementedError(f"masked_select {_DATA_DEPENDENT}")


# functional updates
def _positions_along(a: TensorProxy, dim: int, start: int, length: int, step: int) -> TensorProxy:
    return prims.iota(length, start=start, step=step, device=a.device, dtype=dtypes.int64)


@torchsymbol(torch.slice_scatter, tags=INDEXING)
def slice_scatter(input: TensorProxy, src: TensorProxy, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> TensorProxy:  # fmt: skip
    """``a`` with ``a[..., start:end:step, ...] = src`` along ``dim``."""
    d = canonical_dim(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    lo, hi, st = slice(start, end, step).indices(input.shape[d])
    length = max(0, (hi - lo + st - 1) // st)
    expected = input.shape[:d] + (length,) + input.shape[d + 1 :]
    if src.shape != expected:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expected)}")  # fmt: skip
    src = to_dtype(src, input.dtype)
    if length == 0:
        return input
    return prims.index_copy(input, d, _positions_along(input, d, lo, length, st), src)


@torchsymbol(torch.select_scatter, tags=INDEXING)
def select_scatter(input: TensorProxy, src: TensorProxy, dim: int, index: int) -> TensorProxy:
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    expected = input.shape[:d] + input.shape[d + 1 :]
    if src.shape != expected:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expected)}")  # fmt: skip
    src = reshape(to_dtype(src, input.dtype), input.shape[:d] + (1,) + input.shape[d + 1 :])
    return prims.index_copy(input, d, _positions_along(input, d, index % size, 1, 1), src)


@torchsymbol(torch.diagonal_scatter, tags=INDEXING)
def diagonal_scatter(
    input: TensorProxy, src: TensorProxy, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> TensorProxy:
    from thunder.torch.views import _diagonal_shape, diagonal

    d1, d2, length = _diagonal_shape(input, offset, dim1, dim2)
    expected = diagonal(input, offset, dim1, dim2).shape
    if src.shape != expected:
        raise RuntimeError(f"expected src to have a size equal to the diagonal of self. src size = "
                           f"{list(src.shape)}, diagonal size = {list(expected)}")  # fmt: skip
    if length == 0:
        return input
    m = input.shape[d2]
    moved = movedim(input, (d1, d2), (-2, -1))
    batch = moved.shape[:-2]
    flat = reshape(moved, (*batch, moved.shape[-2] * m))
    start = offset if offset >= 0 else -offset * m
    positions = _positions_along(input, -1, start, length, m + 1)
    updated = prims.index_copy(flat, flat.ndim - 1, positions, to_dtype(src, input.dtype))
    return movedim(reshape(updated, moved.shape), (-2, -1), (d1, d2))


@torchsymbol(name="setitem", tags=INDEXING)
def setitem(a: TensorProxy, key: Any, value: Any) -> TensorProxy:
    """Functional ``a[key] = value``: a new tensor. The positions ``key`` selects come from indexing
    an iota shaped like ``a``, so any key ``__getitem__`` takes works; then one ``index_put``."""
    from thunder.torch.index_keys import value_of_write

    positions = getitem(reshape(prims.iota(a.numel(), start=0, step=1, device=a.device, dtype=dtypes.int64),
                                a.shape), key)  # fmt: skip
    value = value_of_write(value)
    if isinstance(value, TensorProxy):
        value = to_dtype(value, a.dtype)
        if broadcast_shapes(value.shape, positions.shape) != positions.shape:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                               f"indexing result of shape {list(positions.shape)}")  # fmt: skip
        value = expand_to(value, positions.shape)
    else:
        value = prims.full(positions.shape, to_dtype(value, a.dtype), device=a.device, dtype=a.dtype)
    flat = prims.index_put(reshape(a, (a.numel(),)), [reshape(positions, (positions.numel(),))],
                           reshape(value, (value.numel(),)), False)  # fmt: skip
    return reshape(flat, a.shape)


alias(torch.Tensor.__getitem__, getitem)


def _clamped_indices(a: TensorProxy, indices: Sequence[TensorProxy | None]) -> list[TensorProxy | None]:
    from thunder.torch.elementwise import clamp

    return [None if index is None else clamp(index, 0, a.shape[i] - 1) for i, index in enumerate(indices)]


@torchsymbol(torch._unsafe_masked_index, name="unsafe_masked_index")
def unsafe_masked_index(input: TensorProxy, mask: TensorProxy, indices: Sequence[TensorProxy | None],
                        fill: Any) -> TensorProxy:  # fmt: skip
    """``a[indices]`` with out-of-range indices clamped, and ``fill`` where ``mask`` is False (torch._decomp)."""
    from thunder.torch.elementwise import where

    if mask.dtype is not dtypes.bool8:
        raise RuntimeError(f"_unsafe_masked_index found unexpected mask dtype {mask.dtype}")
    if input.numel() == 0:
        shape = prims.index(input, list(indices)).shape
        return prims.full(shape, fill, device=input.device, dtype=input.dtype)
    return where(mask, prims.index(input, _clamped_indices(input, indices)), to_dtype(fill, input.dtype))


@torchsymbol(torch._unsafe_masked_index_put_accumulate, name="unsafe_masked_index_put_accumulate")
def unsafe_masked_index_put_accumulate(input: TensorProxy, mask: TensorProxy, indices: Sequence[TensorProxy | None],
                                       values: TensorProxy) -> TensorProxy:  # fmt: skip
    """``a.index_put(indices, values, accumulate=True)`` of the values where ``mask`` holds (torch._decomp)."""
    from thunder.torch.elementwise import where

    if mask.dtype is not dtypes.bool8:
        raise RuntimeError(f"_unsafe_masked_index_put_accumulate found unexpected mask dtype {mask.dtype}")
    if input.numel() == 0:
        return prims.convert_element_type(input, input.dtype)
    masked_values = where(mask, values, 0)
    return prims.index_put(
        input, _clamped_indices(input, indices), to_dtype(masked_values, input.dtype), True
    )
