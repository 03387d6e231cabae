"""Shape and view ops. Traces are functional, so a view is a value like any other."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import dtypes, layouts, prims
from thunder.core.promotion import promote_dtypes
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, expand_to, int_list, to_dtype

SHAPE = frozenset({"shape"})
VIEW = frozenset({"shape", "view"})  # PyTorch returns a view of the input (reshape: where the layout allows)


def infer_shape(numel: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


@torchsymbol(torch.Tensor.reshape, torch.reshape, method="reshape", tags=VIEW, sizes="shape")
def reshape(input: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    new_shape = infer_shape(input.numel(), int_list("reshape", "shape", shape))
    return input if new_shape == input.shape else prims.reshape(input, new_shape)


@torchsymbol(torch.Tensor.view, method="view", tags=VIEW, sizes="size")
def view(input: TensorProxy, size: Sequence[int]) -> TensorProxy:
    if isinstance(size, (torch.dtype, dtypes.dtype)):
        raise NotImplementedError("Tensor.view(dtype) is not supported by thunder")
    new_shape = infer_shape(input.numel(), int_list("view", "size", size))
    if not layouts.view_allowed(input, new_shape):  # eager's layout of ``a`` (core/layouts.py)
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        )
    return reshape(input, new_shape)


@torchsymbol(torch.flatten, torch.Tensor.flatten, method="flatten", tags=VIEW)
def flatten(input: TensorProxy, start_dim: int = 0, end_dim: int = -1) -> TensorProxy:
    if input.ndim == 0:
        return reshape(input, (1,))
    start, end = canonical_dim(start_dim, input.ndim), canonical_dim(end_dim, input.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape[:start] + (math.prod(input.shape[start : end + 1]),) + input.shape[end + 1 :]
    return reshape(input, shape)


@torchsymbol(torch.Tensor.permute, torch.permute, method="permute", tags=VIEW, sizes="dims")
def permute(input: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    permutation = tuple(canonical_dim(d, input.ndim) for d in int_list("permute", "dims", dims))
    if len(permutation) != input.ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match")
    return input if permutation == tuple(range(input.ndim)) else prims.transpose(input, permutation)


@torchsymbol(torch.transpose, torch.swapaxes, torch.Tensor.transpose, method="transpose", tags=VIEW)
def transpose(input: TensorProxy, dim0: int, dim1: int) -> TensorProxy:
    if input.ndim == 0:
        return input
    permutation = list(range(input.ndim))
    d0, d1 = canonical_dim(dim0, input.ndim), canonical_dim(dim1, input.ndim)
    permutation[d0], permutation[d1] = permutation[d1], permutation[d0]
    return permute(input, permutation)


@torchsymbol(torch.t, torch.Tensor.t, method="t", tags=VIEW)
def t(input: TensorProxy) -> TensorProxy:
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


@torchsymbol(method="T", tags=VIEW)
def T(a: TensorProxy) -> TensorProxy:  # noqa: N802 -- torch's name
    return permute(a, tuple(reversed(range(a.ndim))))


@torchsymbol(method="mT", tags=VIEW)
def mT(input: TensorProxy) -> TensorProxy:  # noqa: N802 -- torch's name
    return transpose(input, -2, -1)


@torchsymbol(torch.unsqueeze, torch.Tensor.unsqueeze, method="unsqueeze", tags=VIEW)
def unsqueeze(input: TensorProxy, dim: int) -> TensorProxy:
    d = canonical_dim(dim, input.ndim + 1)
    return prims.reshape(input, input.shape[:d] + (1,) + input.shape[d:])


@torchsymbol(torch.squeeze, torch.Tensor.squeeze, method="squeeze", tags=VIEW, sizes="dim")
def squeeze(input: TensorProxy, dim: Any = None) -> TensorProxy:
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        dims = tuple(
            canonical_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, (int, TensorProxy)) else dim)
        )
    shape = tuple(s for d, s in enumerate(input.shape) if not (d in dims and s == 1))
    return input if shape == input.shape else prims.reshape(input, shape)


@torchsymbol(torch.Tensor.expand, method="expand", tags=VIEW, sizes="size")
def expand(a: TensorProxy, size: Sequence[int], *, implicit: bool = False) -> TensorProxy:
    target = int_list("expand", "size", size)
    offset = len(target) - a.ndim
    if offset < 0:
        raise RuntimeError(
            "expand: the number of sizes provided must be greater or equal to the number of dimensions"
        )
    resolved = tuple(a.shape[d - offset] if s == -1 and d >= offset else s for d, s in enumerate(target))
    return expand_to(a, resolved)


@torchsymbol(torch.Tensor.contiguous, method="contiguous", tags=SHAPE)
def contiguous(a: TensorProxy, memory_format: Any = None) -> TensorProxy:
    # eager copies a tensor whose layout is not contiguous (``x.t().contiguous()``): a tensor of its own
    return a if layouts.is_contiguous(a) else prims.copy(a)


def _check_cat_inputs(tensors: Any) -> None:
    """Eager's errors for what cat cannot take: a tensor instead of a sequence, an empty one, ``None``, 0-d."""
    if isinstance(tensors, TensorProxy):
        raise TypeError("cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if len(tensors) == 0:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for position, t in enumerate(tensors):
        if not isinstance(t, TensorProxy):
            raise TypeError(
                f"expected Tensor as element {position} in argument 0, but got {type(t).__name__}"
            )
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {position}) cannot be concatenated")


@torchsymbol(torch.cat, torch.concat, torch.concatenate, tags=SHAPE)
def cat(tensors: Sequence[TensorProxy], dim: int = 0) -> TensorProxy:
    _check_cat_inputs(tensors)
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    d = canonical_dim(dim, tensors[0].ndim)
    dtype = tensors[0].dtype
    for other in tensors[1:]:
        dtype = promote_dtypes(dtype, other.dtype)
    return prims.cat([to_dtype(t, dtype) for t in tensors], d)


@torchsymbol(torch.stack, tags=SHAPE)
def stack(tensors: Sequence[TensorProxy], dim: int = 0) -> TensorProxy:
    d = canonical_dim(dim, tensors[0].ndim + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


@torchsymbol(torch.unbind, torch.Tensor.unbind, method="unbind", tags=SHAPE)
def unbind(input: TensorProxy, dim: int = 0) -> tuple[TensorProxy, ...]:
    d = canonical_dim(dim, input.ndim)
    return tuple(_select(input, d, i) for i in range(input.shape[d]))


def _select(a: TensorProxy, dim: int, index: int) -> TensorProxy:
    start = [0] * a.ndim
    end = list(a.shape)
    start[dim], end[dim] = index, index + 1
    sliced = prims.slice_prim(a, start, end, [1] * a.ndim)
    return prims.reshape(sliced, a.shape[:dim] + a.shape[dim + 1 :])


@torchsymbol(method="getitem", name="getitem", tags=SHAPE)
def getitem(a: TensorProxy, key: Any) -> TensorProxy:
    """Basic indexing: integers, slices, None and Ellipsis."""
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if not (k is None or k is Ellipsis or isinstance(k, (int, slice, torch.SymInt))) or isinstance(
            k, bool
        ):
            from thunder.torch.index_keys import advanced_getitem

            return advanced_getitem(a, key)
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > a.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (a.ndim - consumed) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (a.ndim - consumed)
    return _apply_basic_index(a, key)


def _slice_indices(k: slice, size: Any) -> tuple[Any, Any, int]:
    """``k.indices(size)`` for a positive step, also where ``size`` or a bound is a symbolic size
    (core/symbolic_shapes.py): each comparison with a symbol is then a guard, unless it is known."""
    if not builtins.any(type(v) is torch.SymInt for v in (size, k.start, k.stop)):
        return k.indices(size)
    st = 1 if k.step is None else int(k.step)

    def bound(v: Any, default: Any) -> Any:
        if v is None:
            return default
        if v < 0:
            v = v + size
            return 0 if v < 0 else v
        return size if v > size else v

    return bound(k.start, 0), bound(k.stop, size), st


def _apply_basic_index(a: TensorProxy, key: tuple) -> TensorProxy:
    start, end, step, out_shape, dim = [], [], [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = a.shape[dim]
        if isinstance(k, (int, torch.SymInt)):
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
            k = k + size if k < 0 else k  # not k % size: a symbolic size keeps s0 - 1, not Mod(-1, s0)
            start.append(k)
            end.append(k + 1)
            step.append(1)
        else:
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            lo, hi, st = _slice_indices(k, size)
            start.append(lo)
            end.append(max(lo, hi))
            step.append(st)
            out_shape.append(max(0, (max(lo, hi) - lo + st - 1) // st))
        dim += 1
    sliced = a
    if (start, end, step) != ([0] * a.ndim, list(a.shape), [1] * a.ndim):
        sliced = prims.slice_prim(a, start, end, step)
    return sliced if tuple(out_shape) == sliced.shape else prims.reshape(sliced, tuple(out_shape))
