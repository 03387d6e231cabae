"""Shape ops that rearrange or replicate elements: flip, roll, repeat, tile, tril/triu, diag, stacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol
from thunder.torch.shape import cat, reshape, stack, transpose
from thunder.torch.utils import canonical_dim, int_list
from thunder.torch.views import _slice_dim, atleast_1d, atleast_2d, atleast_3d, diagonal, movedim

SHAPE = frozenset({"shape"})


def _zero(a: TensorProxy) -> Any:
    return False if a.dtype is dtypes.bool8 else 0


@torchsymbol(torch.flip, torch.Tensor.flip, method="flip", tags=SHAPE, sizes="dims")
def flip(input: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    flipped = tuple(canonical_dim(d, input.ndim) for d in int_list("flip", "dims", dims))
    if len(set(flipped)) != len(flipped):
        raise RuntimeError("dims has duplicates")
    flipped = tuple(d for d in flipped if input.ndim and input.shape[d] > 1)
    return prims.flip(input, flipped) if flipped else input


@torchsymbol(torch.fliplr, torch.Tensor.fliplr, method="fliplr", tags=SHAPE)
def fliplr(input: TensorProxy) -> TensorProxy:
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@torchsymbol(torch.flipud, torch.Tensor.flipud, method="flipud", tags=SHAPE)
def flipud(input: TensorProxy) -> TensorProxy:
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


@torchsymbol(torch.roll, torch.Tensor.roll, method="roll", tags=SHAPE)
def roll(input: TensorProxy, shifts: Any, dims: Any = None) -> TensorProxy:
    shifts = (shifts,) if isinstance(shifts, (int, torch.SymInt)) else tuple(shifts)
    if dims is None or (isinstance(dims, Sequence) and len(dims) == 0):
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: 0")
        return reshape(roll(reshape(input, (input.numel(),)), shifts, 0), input.shape)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    result = input
    for shift, dim in zip(shifts, dims):
        if input.ndim == 0 and dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        d = canonical_dim(dim, input.ndim)
        size = input.shape[d] if input.ndim else 1
        s = shift % size if size else 0
        if s and input.ndim:
            result = prims.cat([_slice_dim(result, d, size - s, size), _slice_dim(result, d, 0, size - s)], d)
    return result


@torchsymbol(torch.rot90, torch.Tensor.rot90, method="rot90", tags=SHAPE)
def rot90(input: TensorProxy, k: int = 1, dims: Sequence[int] = (0, 1)) -> TensorProxy:
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = canonical_dim(dims[0], input.ndim), canonical_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return input


@torchsymbol(torch.Tensor.repeat, method="repeat", tags=SHAPE, sizes="repeats")
def repeat(a: TensorProxy, repeats: Sequence[int]) -> TensorProxy:
    repeats = int_list("repeat", "repeats", repeats)
    if len(repeats) < a.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(repeats)}")
    shape = (1,) * (len(repeats) - a.ndim) + a.shape
    # (s0, s1, ...) -> (1, s0, 1, s1, ...) -> (r0, s0, r1, s1, ...) -> (r0 * s0, r1 * s1, ...)
    interleaved = prims.reshape(a, tuple(x for s in shape for x in (1, s)))
    target = tuple(x for r, s in zip(repeats, shape) for x in (r, s))
    expanded = prims.broadcast_in_dim(interleaved, target, tuple(range(len(target))))
    return prims.reshape(expanded, tuple(r * s for r, s in zip(repeats, shape)))


@torchsymbol(torch.tile, torch.Tensor.tile, method="tile", tags=SHAPE, sizes="dims")
def tile(input: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    dims = int_list("tile", "dims", dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@torchsymbol(torch.repeat_interleave, torch.Tensor.repeat_interleave, method="repeat_interleave", tags=SHAPE)
def repeat_interleave(a: TensorProxy, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> TensorProxy:  # fmt: skip
    if not isinstance(repeats, int):
        raise NotImplementedError(
            "repeat_interleave with repeats in a tensor has a data-dependent shape, which thunder does not support"
        )
    if repeats < 0:
        raise RuntimeError("repeats can not be negative")
    if dim is None:
        a, d = reshape(a, (a.numel(),)), 0
    else:
        d = canonical_dim(dim, a.ndim)
        if a.ndim == 0:
            a = reshape(a, (1,))
    shape = a.shape[: d + 1] + (repeats,) + a.shape[d + 1 :]
    kept = tuple(i if i <= d else i + 1 for i in range(a.ndim))
    expanded = prims.broadcast_in_dim(a, shape, kept)
    return prims.reshape(expanded, a.shape[:d] + (a.shape[d] * repeats,) + a.shape[d + 1 :])


def _triangle(a: TensorProxy, diagonal: int, lower: bool) -> TensorProxy:
    if a.ndim < 2:
        raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions")
    rows, cols = a.shape[-2:]
    row = prims.broadcast_in_dim(prims.iota(rows, start=0, step=1, device=a.device, dtype=dtypes.int64),
                                 (rows, cols), (0,))  # fmt: skip
    col = prims.broadcast_in_dim(prims.iota(cols, start=0, step=1, device=a.device, dtype=dtypes.int64),
                                 (rows, cols), (1,))  # fmt: skip
    offset = prims.sub(col, row)
    keep = prims.le(offset, diagonal) if lower else prims.ge(offset, diagonal)
    keep = prims.broadcast_in_dim(keep, a.shape, (a.ndim - 2, a.ndim - 1))
    return prims.where(keep, a, _zero(a))


@torchsymbol(torch.tril, torch.Tensor.tril, method="tril", tags=SHAPE)
def tril(input: TensorProxy, diagonal: int = 0) -> TensorProxy:
    return _triangle(input, diagonal, lower=True)


@torchsymbol(torch.triu, torch.Tensor.triu, method="triu", tags=SHAPE)
def triu(input: TensorProxy, diagonal: int = 0) -> TensorProxy:
    return _triangle(input, diagonal, lower=False)


@torchsymbol(torch.diag_embed, torch.Tensor.diag_embed, method="diag_embed", tags=SHAPE)
def diag_embed(input: TensorProxy, offset: int = 0, dim1: int = -2, dim2: int = -1) -> TensorProxy:
    ndim = input.ndim + 1
    d1, d2 = canonical_dim(dim1, ndim), canonical_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] if input.ndim else 1
    input = input if input.ndim else reshape(input, (1,))
    size = n + abs(offset)
    batch = input.shape[:-1]
    if offset:
        zeros = prims.full(batch + (abs(offset),), _zero(input), device=input.device, dtype=input.dtype)
        input = prims.cat([input, zeros], input.ndim - 1)
    # element (i, j) of each matrix is a[i] (offset >= 0) or a[j] (offset < 0) where j - i == offset
    square = batch + (size, size)
    values = prims.broadcast_in_dim(
        input, square, tuple(range(len(batch))) + ((len(batch),) if offset >= 0 else (len(batch) + 1,))
    )
    row = prims.broadcast_in_dim(prims.iota(size, start=0, step=1, device=input.device, dtype=dtypes.int64),
                                 (size, size), (0,))  # fmt: skip
    col = prims.broadcast_in_dim(prims.iota(size, start=0, step=1, device=input.device, dtype=dtypes.int64),
                                 (size, size), (1,))  # fmt: skip
    on_diagonal = prims.broadcast_in_dim(prims.eq(prims.sub(col, row), offset), square,
                                         (len(batch), len(batch) + 1))  # fmt: skip
    matrices = prims.where(on_diagonal, values, _zero(input))
    return movedim(matrices, (-2, -1), (d1, d2))


@torchsymbol(torch.diag, torch.Tensor.diag, method="diag", tags=SHAPE)
def diag(input: TensorProxy, diagonal: int = 0) -> TensorProxy:
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return _diagonal(input, diagonal)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")


def _diagonal(a: TensorProxy, offset: int) -> TensorProxy:
    return diagonal(a, offset, 0, 1)


@torchsymbol(torch.diagflat, torch.Tensor.diagflat, method="diagflat", tags=SHAPE)
def diagflat(input: TensorProxy, offset: int = 0) -> TensorProxy:
    return diag_embed(reshape(input, (input.numel(),)), offset, 0, 1)


@torchsymbol(torch.meshgrid, tags=SHAPE)
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[TensorProxy, ...]:
    if len(tensors) == 1 and not isinstance(tensors[0], TensorProxy):
        tensors = tuple(tensors[0])
    indexing = indexing or "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of 'xy' or 'ij', but received: {indexing}")
    for x in tensors:
        if x.ndim > 1:
            raise RuntimeError(
                f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {x.ndim}D"
            )
    swap = indexing == "xy" and len(tensors) >= 2
    ordered = (tensors[1], tensors[0], *tensors[2:]) if swap else tensors
    shape = tuple(x.numel() for x in ordered)
    grids = [prims.broadcast_in_dim(reshape(x, (x.numel(),)), shape, (i,)) for i, x in enumerate(ordered)]
    return (grids[1], grids[0], *grids[2:]) if swap else tuple(grids)


def _as_list(tensors: Any, name: str) -> list[TensorProxy]:
    items = [tensors] if isinstance(tensors, TensorProxy) else list(tensors)
    if not items:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return items


@torchsymbol(torch.hstack, tags=SHAPE)
def hstack(tensors: Sequence[TensorProxy]) -> TensorProxy:
    items = [atleast_1d(x) for x in _as_list(tensors, "hstack")]
    return cat(items, 0 if items[0].ndim == 1 else 1)


@torchsymbol(torch.vstack, torch.row_stack, tags=SHAPE)
def vstack(tensors: Sequence[TensorProxy]) -> TensorProxy:
    return cat([atleast_2d(x) for x in _as_list(tensors, "vstack")], 0)


@torchsymbol(torch.dstack, tags=SHAPE)
def dstack(tensors: Sequence[TensorProxy]) -> TensorProxy:
    return cat([atleast_3d(x) for x in _as_list(tensors, "dstack")], 2)


@torchsymbol(torch.column_stack, tags=SHAPE)
def column_stack(tensors: Sequence[TensorProxy]) -> TensorProxy:
    items = [reshape(x, (x.numel(), 1)) if x.ndim <= 1 else x for x in _as_list(tensors, "column_stack")]
    return cat(items, 1)


@torchsymbol(torch.cartesian_prod, tags=SHAPE)
def cartesian_prod(*tensors: TensorProxy) -> TensorProxy:
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, (g.numel(),)) for g in grids], 1)


@torchsymbol(torch.block_diag, tags=SHAPE)
def block_diag(*tensors: TensorProxy) -> TensorProxy:
    from thunder.core.promotion import promote_dtypes

    matrices = [reshape(x, (1, x.numel())) if x.ndim <= 1 else x for x in tensors]
    if any(m.ndim != 2 for m in matrices):
        raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer dimensions")
    dtype = matrices[0].dtype
    for m in matrices[1:]:
        dtype = promote_dtypes(dtype, m.dtype)
    width = sum(m.shape[1] for m in matrices)
    rows, left = [], 0
    for m in matrices:
        parts = []
        if left:
            parts.append(prims.full((m.shape[0], left), 0, device=m.device, dtype=dtype))
        parts.append(prims.convert_element_type(m, dtype) if m.dtype is not dtype else m)
        right = width - left - m.shape[1]
        if right:
            parts.append(prims.full((m.shape[0], right), 0, device=m.device, dtype=dtype))
        rows.append(prims.cat(parts, 1) if len(parts) > 1 else parts[0])
        left += m.shape[1]
    return prims.cat(rows, 0)


@torchsymbol(torch.combinations, tags=SHAPE)
def combinations(input: TensorProxy, r: int = 2, with_replacement: bool = False) -> TensorProxy:
    """The rows of ``itertools.combinations`` of ``a``'s elements: an index_select by constant indices."""
    import itertools

    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return prims.full((0,), 0, device=input.device, dtype=input.dtype)
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(input.shape[0]), r))
    flat = [i for row in rows for i in row]
    index = prims.tensor_from_sequence(flat, device=input.device, dtype=dtypes.int64) if flat else None
    if index is None:
        return prims.full((0, r), 0, device=input.device, dtype=input.dtype)
    return prims.reshape(prims.take(input, index, 0), (len(rows), r))


@torchsymbol(torch._chunk_cat, name="chunk_cat", tags=SHAPE)
def chunk_cat(tensors: Sequence[TensorProxy], dim: int, num_chunks: int) -> TensorProxy:
    """Each tensor zero-padded along ``dim`` to a multiple of ``num_chunks``, viewed as
    ``(*shape[:dim], num_chunks, -1)`` and concatenated along ``dim + 1`` (torch._decomp's definition)."""
    if not tensors:
        raise RuntimeError("_chunk_cat expects a non-empty input tensor list")
    if num_chunks < 1:
        raise RuntimeError("_chunk_cat expects positive num_chunks")
    ndims = {t.ndim for t in tensors}
    if dim < 0 and len(ndims) > 1:
        raise RuntimeError("_chunk_cat expects non-negative dim when input tensors have different ndims")
    if dim >= min(ndims):
        raise RuntimeError("_chunk_cat expects dim < ndim for all input tensors")
    d = canonical_dim(dim, tensors[0].ndim)
    pieces = []
    for t in tensors:
        size = t.shape[d]
        padded = (size + num_chunks - 1) // num_chunks * num_chunks
        if padded != size:
            config = [(0, padded - size if i == d else 0, 0) for i in range(t.ndim)]
            t = prims.pad(t, 0, config)
        rest = 1
        for extent in t.shape[d:]:
            rest *= extent
        pieces.append(prims.reshape(t, (*t.shape[:d], num_chunks, rest // num_chunks)))
    return cat(pieces, d + 1)
