"""View-like shape ops: expand_as, movedim, narrow, select, split and its kin, diagonal, unfold.

Traces are functional, so a view is a value like any other; each op here is reshapes, permutes and
slices of prims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import torch
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import alias, torchsymbol
from thunder.torch.shape import (
    _select,
    expand,
    flatten,
    infer_shape,
    permute,
    reshape,
    squeeze,
    t,
    transpose,
    unbind,
    unsqueeze,
    view,
)
from thunder.torch.utils import canonical_dim, expand_to, int_list

SHAPE = frozenset({"shape"})
# ``x.view_as(y)``: only ``y``'s shape is read; the result requires grad as ``x`` does (transforms/autograd.py)
SHAPE_OF_OTHER = SHAPE | {"reads_metadata_of_others"}


@torchsymbol(torch.Tensor.expand_as, method="expand_as", tags=SHAPE_OF_OTHER)
def expand_as(a: TensorProxy, other: TensorProxy) -> TensorProxy:
    return expand(a, other.shape)


@torchsymbol(torch.broadcast_to, torch.Tensor.broadcast_to, method="broadcast_to", tags=SHAPE, sizes="size")
def broadcast_to(input: TensorProxy, size: Sequence[int]) -> TensorProxy:
    return expand(input, int_list("broadcast_to", "size", size))


@torchsymbol(torch.broadcast_tensors, tags=SHAPE)
def broadcast_tensors(*tensors: TensorProxy) -> tuple[TensorProxy, ...]:
    from thunder.core.promotion import broadcast_shapes

    shape = broadcast_shapes(*(x.shape for x in tensors))
    return tuple(_own_view(expand_to(x, shape), x) for x in tensors)


def _own_view(view: TensorProxy, source: TensorProxy) -> TensorProxy:
    """An output of a view op of several tensors that is one of them is a view of its own (eager's is a
    new tensor object): the op's outputs must not be its inputs (in-place tracking, regions)."""
    return prims.reshape(source, tuple(source.shape)) if view is source else view


@torchsymbol(torch.Tensor.view_as, method="view_as", tags=SHAPE_OF_OTHER)
def view_as(a: TensorProxy, other: TensorProxy) -> TensorProxy:
    return reshape(a, other.shape)


@torchsymbol(torch.Tensor.reshape_as, method="reshape_as", tags=SHAPE_OF_OTHER)
def reshape_as(a: TensorProxy, other: TensorProxy) -> TensorProxy:
    return reshape(a, other.shape)


@torchsymbol(torch.ravel, torch.Tensor.ravel, method="ravel", tags=SHAPE)
def ravel(input: TensorProxy) -> TensorProxy:
    return reshape(input, (input.numel(),))


@torchsymbol(
    torch.movedim,
    torch.moveaxis,
    torch.Tensor.movedim,
    torch.Tensor.moveaxis,
    method=("movedim", "moveaxis"),
    tags=SHAPE,
)
def movedim(input: TensorProxy, source: Any, destination: Any) -> TensorProxy:
    sources = (source,) if isinstance(source, int) else tuple(source)
    destinations = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(sources) != len(destinations):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(sources)} dims) should contain the same "
            f"number of dims as destination ({list(destinations)} dims)"
        )
    sources = tuple(canonical_dim(d, input.ndim) for d in sources)
    destinations = tuple(canonical_dim(d, input.ndim) for d in destinations)
    if len(set(sources)) != len(sources) or len(set(destinations)) != len(destinations):
        raise RuntimeError("movedim: repeated dim")
    if input.ndim == 0:
        return input
    order: list[int | None] = [None] * input.ndim
    for s, d in zip(sources, destinations):
        order[d] = s
    rest = iter(d for d in range(input.ndim) if d not in sources)
    return permute(input, [next(rest) if o is None else o for o in order])


@torchsymbol(
    torch.swapdims, torch.Tensor.swapdims, torch.Tensor.swapaxes, method=("swapdims", "swapaxes"), tags=SHAPE
)
def swapdims(input: TensorProxy, dim0: int, dim1: int) -> TensorProxy:
    return transpose(input, dim0, dim1)


@torchsymbol(torch.unflatten, torch.Tensor.unflatten, method="unflatten", tags=SHAPE)
def unflatten(input: TensorProxy, dim: int, sizes: Sequence[int]) -> TensorProxy:
    if len(sizes) == 0:
        raise RuntimeError("unflatten: sizes must be non-empty")
    d = canonical_dim(dim, input.ndim)
    inner = infer_shape(input.shape[d], tuple(sizes)) if input.ndim else tuple(sizes)
    return reshape(input, input.shape[:d] + inner + input.shape[d + 1 :])


def _slice_dim(a: TensorProxy, dim: int, start: int, end: int, step: int = 1) -> TensorProxy:
    starts, ends, steps = [0] * a.ndim, list(a.shape), [1] * a.ndim
    starts[dim], ends[dim], steps[dim] = start, end, step
    if (starts, ends, steps) == ([0] * a.ndim, list(a.shape), [1] * a.ndim):
        return a
    return prims.slice_prim(a, starts, ends, steps)


@torchsymbol(torch.narrow, torch.Tensor.narrow, method="narrow", tags=SHAPE)
def narrow(input: TensorProxy, dim: int, start: Any, length: int) -> TensorProxy:
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(start, TensorProxy):
        return _narrow_at(input, d, start, length)
    if not -size <= start <= size:
        raise IndexError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got {start})"
        )
    start = start % size if start < 0 else start
    if length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _slice_dim(input, d, start, start + length)


def _narrow_at(a: TensorProxy, dim: int, start: TensorProxy, length: int) -> TensorProxy:
    """narrow at a start held in a 0-d tensor: a gather, which raises (when run) if it goes out of range."""
    if start.numel() != 1 or start.dtype.is_floating_point or start.dtype.is_complex:
        raise RuntimeError("start must be an 0-dim integral Tensor.")
    size = a.shape[dim]
    start = prims.reshape(prims.convert_element_type(start, dtypes.int64), ())
    start = prims.where(prims.lt(start, 0), prims.add(start, size), start)
    positions = prims.iota(length, start=0, step=1, device=a.device, dtype=dtypes.int64)
    return prims.take(a, prims.add(positions, prims.broadcast_in_dim(start, (length,), ())), dim)


@torchsymbol(torch.select, torch.Tensor.select, method="select", tags=SHAPE)
def select(input: TensorProxy, dim: int, index: int) -> TensorProxy:
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = canonical_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    return _select(input, d, index % size)


def _split_by_sizes(a: TensorProxy, sizes: Sequence[int], dim: int) -> tuple[TensorProxy, ...]:
    d = canonical_dim(dim, a.ndim)
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    if any(s < 0 for s in sizes) or sum(sizes) != a.shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {a.shape[d]} (input tensor's size at "
            f"dimension {d}), but got split_sizes={list(sizes)}"
        )
    pieces, offset = [], 0
    for size in sizes:
        pieces.append(_slice_dim(a, d, offset, offset + size))
        offset += size
    return tuple(pieces)


@torchsymbol(torch.split_with_sizes, torch.Tensor.split_with_sizes, torch.split_with_sizes_copy,
             method="split_with_sizes", tags=SHAPE)  # fmt: skip
def split_with_sizes(input: TensorProxy, split_sizes: Sequence[int], dim: int = 0) -> tuple[TensorProxy, ...]:
    return _split_by_sizes(input, tuple(split_sizes), dim)


@torchsymbol(torch.split, torch.Tensor.split, torch.unsafe_split, method="split", tags=SHAPE)
def split(a: TensorProxy, split_size_or_sections: Any, dim: int = 0) -> tuple[TensorProxy, ...]:
    if not isinstance(split_size_or_sections, (int, torch.SymInt)):  # a symbolic size or int is one size
        return _split_by_sizes(a, tuple(split_size_or_sections), dim)
    # a SymInt too: sizes are typed int here, as torch.Size's are (symbolic ones behave as ints)
    size = cast(int, split_size_or_sections)
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    length = a.shape[canonical_dim(dim, a.ndim)]
    if size < 0 or (size == 0 and length != 0):
        raise RuntimeError(
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {length}"
        )
    if length == 0:
        return (a,)
    count = math.ceil(length / size)
    return _split_by_sizes(a, [size] * (count - 1) + [length - size * (count - 1)], dim)


def _split_vjp(g: Any, a: TensorProxy, sizes: Any, dim: int, *, out: tuple) -> tuple:
    """The pieces' gradients concatenated (zeros for pieces without one): one copy, where the
    slices' own rules would pad each gradient to the input's shape and add them up."""
    if all(piece is None for piece in g):
        return (None, None, None)
    pieces = [
        piece if piece is not None else prims.full(o.shape, 0.0, device=o.device, dtype=o.dtype)
        for piece, o in zip(g, out)
    ]
    return (prims.cat(pieces, canonical_dim(dim, a.ndim)) if len(pieces) > 1 else pieces[0], None, None)


register_vjp(split, split_with_sizes)(_split_vjp)


@torchsymbol(torch.chunk, torch.Tensor.chunk, torch.unsafe_chunk, method="chunk", tags=SHAPE)
def chunk(input: TensorProxy, chunks: int, dim: int = 0) -> tuple[TensorProxy, ...]:
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    length = input.shape[canonical_dim(dim, input.ndim)]
    if not length:  # torch gives ``chunks`` empty pieces (a split by 0 would give one)
        return split(input, [0] * chunks, dim)
    return split(input, math.ceil(length / chunks), dim)


@torchsymbol(torch.tensor_split, torch.Tensor.tensor_split, method="tensor_split", tags=SHAPE)
def tensor_split(input: TensorProxy, indices_or_sections: Any, dim: int = 0) -> tuple[TensorProxy, ...]:
    if isinstance(indices_or_sections, TensorProxy):
        raise NotImplementedError(
            "tensor_split with indices in a tensor reads its values, which thunder does not see while tracing"
        )
    if input.ndim == 0:
        raise RuntimeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    d = canonical_dim(dim, input.ndim)
    length = input.shape[d]
    if isinstance(indices_or_sections, (int, torch.SymInt)):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        # divmod takes no symbolic sizes; SymInt's __rmod__ is added outside its class body, unseen by mypy
        base, extra = length // sections, length % sections  # type: ignore[operator]
        sizes = [base + 1] * extra + [base] * (sections - extra)
        return _split_by_sizes(input, sizes, d)
    bounds = [0] + [min(max(i + length if i < 0 else i, 0), length) for i in indices_or_sections] + [length]
    return tuple(_slice_dim(input, d, s, max(s, e)) for s, e in zip(bounds, bounds[1:]))


def _directional_split(name: str, dim: int, min_ndim: int) -> Any:
    def op(input: TensorProxy, indices_or_sections: Any) -> tuple[TensorProxy, ...]:
        if input.ndim < min_ndim:
            raise RuntimeError(
                f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got {input.ndim}"
            )
        d = 0 if name == "hsplit" and input.ndim == 1 else dim
        if isinstance(indices_or_sections, int) and (
            indices_or_sections == 0 or input.shape[d] % indices_or_sections
        ):
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                f"{input.shape[d]} is not divisible by the split_size {indices_or_sections}!"
            )
        return tensor_split(input, indices_or_sections, d)

    op.__name__ = name
    return torchsymbol(getattr(torch, name), getattr(torch.Tensor, name), method=name, tags=SHAPE)(op)


hsplit = _directional_split("hsplit", 1, 1)
vsplit = _directional_split("vsplit", 0, 2)
dsplit = _directional_split("dsplit", 2, 3)


def _diagonal_shape(a: TensorProxy, offset: int, dim1: int, dim2: int) -> tuple[int, int, int]:
    d1, d2 = canonical_dim(dim1, a.ndim), canonical_dim(dim2, a.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n, m = a.shape[d1], a.shape[d2]
    length = max(0, min(n, m - offset)) if offset >= 0 else max(0, min(n + offset, m))
    return d1, d2, length


@torchsymbol(torch.diagonal, torch.Tensor.diagonal, torch.diagonal_copy, method="diagonal", tags=SHAPE)
def diagonal(input: TensorProxy, offset: int = 0, dim1: int = 0, dim2: int = 1) -> TensorProxy:
    """The diagonal as the strided slice of the two dims flattened together: step m + 1."""
    d1, d2, length = _diagonal_shape(input, offset, dim1, dim2)
    m = input.shape[d2]
    rest = [d for d in range(input.ndim) if d not in (d1, d2)]
    moved = permute(input, [*rest, d1, d2])
    batch = moved.shape[:-2]
    flat = reshape(moved, (*batch, moved.shape[-2] * m))
    start = offset if offset >= 0 else -offset * m
    if length == 0:
        return prims.slice_prim(flat, [0] * flat.ndim, [*batch, 0], [1] * flat.ndim)
    end = start + (length - 1) * (m + 1) + 1
    return prims.slice_prim(flat, [0] * len(batch) + [start], [*batch, end], [1] * len(batch) + [m + 1])


@torchsymbol(torch.linalg.diagonal, tags=SHAPE)
def linalg_diagonal(A: TensorProxy, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> TensorProxy:
    return diagonal(A, offset, dim1, dim2)


@torchsymbol(torch.Tensor.unfold, method="unfold", tags=SHAPE)
def unfold(input: TensorProxy, dimension: int, size: int, step: int) -> TensorProxy:
    """Windows of ``size`` every ``step`` along ``dimension``, as a new last dim: a gather of static indices."""
    if input.ndim == 0:
        if size > 1:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        return reshape(input, (size,))
    d = canonical_dim(dimension, input.ndim)
    length = input.shape[d]
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    count = (length - size) // step + 1
    starts = prims.broadcast_in_dim(prims.iota(count, start=0, step=step, device=input.device, dtype=dtypes.int64),
                                    (count, size), (0,))  # fmt: skip
    offsets = prims.broadcast_in_dim(prims.iota(size, start=0, step=1, device=input.device, dtype=dtypes.int64),
                                     (count, size), (1,))  # fmt: skip
    index = prims.reshape(prims.add(starts, offsets), (count * size,))
    windows = prims.take(input, index, d)
    windows = prims.reshape(windows, input.shape[:d] + (count, size) + input.shape[d + 1 :])
    return movedim(windows, d + 1, -1)


@torchsymbol(torch.Tensor.sum_to_size, method="sum_to_size", tags=SHAPE, sizes="size")
def sum_to_size(a: TensorProxy, size: Sequence[int]) -> TensorProxy:
    from thunder.torch.reductions import sum as sum_

    shape = int_list("sum_to_size", "size", size)
    offset = a.ndim - len(shape)
    if offset < 0 or any(s not in (1, a.shape[offset + i]) for i, s in enumerate(shape)):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(a.shape)}}}.")
    dims = list(range(offset)) + [
        offset + i for i, s in enumerate(shape) if s == 1 and a.shape[offset + i] != 1
    ]
    if a.ndim == 0:  # eager sums a 0-d tensor (so bools and integers become int64)
        return sum_(a)
    return reshape(sum_(a, dims), shape) if dims else a


def _atleast(ndim: int) -> Any:
    def one(a: TensorProxy) -> TensorProxy:
        if a.ndim >= ndim:
            return a
        if ndim == 3 and a.ndim == 2:
            return reshape(a, a.shape + (1,))
        if ndim == 3 and a.ndim == 1:
            return reshape(a, (1,) + a.shape + (1,))
        return reshape(a, (1,) * (ndim - a.ndim) + a.shape)

    def op(*tensors: Any) -> Any:
        if len(tensors) == 1 and isinstance(tensors[0], TensorProxy):
            return one(tensors[0])
        items = tensors[0] if len(tensors) == 1 else tensors
        return tuple(_own_view(one(x), x) for x in items)

    name = f"atleast_{ndim}d"
    op.__name__ = name
    return torchsymbol(getattr(torch, name), tags=SHAPE)(op)


atleast_1d = _atleast(1)
atleast_2d = _atleast(2)
atleast_3d = _atleast(3)


# The *_copy variants: in a functional trace a copy and a view are the same value.
for _torch_fn, _symbol in {
    torch.permute_copy: permute, torch.transpose_copy: transpose, torch.t_copy: t,
    torch.unsqueeze_copy: unsqueeze, torch.unbind_copy: unbind, torch.unfold_copy: unfold,
    torch.view_copy: view, torch.squeeze_copy: squeeze, torch.Tensor.flatten: flatten,
}.items():  # fmt: skip
    alias(_torch_fn, _symbol)


@torchsymbol(torch.expand_copy, tags=SHAPE)
def expand_copy(input: TensorProxy, size: Sequence[int], *, implicit: bool = False) -> TensorProxy:
    return expand(input, int_list("expand_copy", "size", size))


@torchsymbol(torch.alias_copy, tags=SHAPE)
def alias_copy(input: TensorProxy) -> TensorProxy:
    return input


@torchsymbol(torch.ops.aten.slice.Tensor, torch.ops.aten.slice, name="aten_slice", tags=SHAPE)
def aten_slice(a: TensorProxy, dim: int = 0, start: int | None = None, end: int | None = None,
               step: int = 1) -> TensorProxy:  # fmt: skip
    """ATen's ``slice``: ``a[..., start:end:step]`` along ``dim``, the bounds clamped as Python clamps them."""
    from thunder.torch.nn_common import narrow as narrow_steps

    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = canonical_dim(dim, a.ndim)
    begin, stop, _ = slice(start, end, step).indices(a.shape[d])
    return narrow_steps(a, d, begin, len(range(begin, stop, step)), step)
