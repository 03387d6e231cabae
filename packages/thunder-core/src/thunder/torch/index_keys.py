"""Indexing keys as eager PyTorch reads them, for ``x[key]`` and ``x[key] = v``.

Eager applies a key in three steps (``applySlicing`` in torch/csrc/autograd/python_variable_indexing.cpp),
and so does thunder, so that every key lands its dims where eager's does:

1. ``basic``: ints, slices and None make a view. A Python bool and a 0-dim bool tensor add a dim of
   size 1 there, as None does; a k-dim mask or an index tensor takes its dims whole.
2. ``selects``: a 0-dim integer tensor selects its dim, as an int would (eager reads its value): one
   ``index`` with 0-dim tensors only, which places no dim.
3. ``indices``: the advanced indices over the dims left, in ``aten.index``'s form (an index tensor, a
   mask spanning its dims, or None for a dim taken whole). A Python bool indexes its new dim with
   ``[0]`` (True) or nothing (False), a 0-dim bool tensor is a mask of it. The indexed dims land where
   the (adjacent) indices are, or first where a dim taken whole separates them.

Reading is then ``index`` after the view; writing is ``index_put`` into the view (or, for one mask,
a select), written back into the base by the in-place machinery (``thunder.torch.inplace.setitem``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import broadcast_shapes
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.torch.indexing import _as_lists, _flatten, _masked_put, index_put
from thunder.torch.utils import expand_to, to_dtype
from thunder.torch.views import movedim

__all__ = ["IndexKey", "parse_key", "advanced_getitem", "put", "value_of_write"]

_DATA_DEPENDENT = "has a data-dependent shape, which thunder does not support"


@dataclass(frozen=True)
class IndexKey:
    """A key as eager applies it: ``a[basic]``, then ``index(., selects)``, then ``index(., indices)``."""

    basic: tuple  # ints, slices and None
    selects: tuple  # per dim of the view: a 0-dim integer tensor, or None
    indices: tuple  # per advanced position of what the selects leave: a tensor, or None (the dim whole)


def _is_tensor(k: Any) -> bool:
    return isinstance(k, TensorProxy)


def _is_mask(k: Any) -> bool:
    return _is_tensor(k) and (k.dtype is dtypes.bool8 or k.dtype is dtypes.uint8)


def _dims_taken(k: Any) -> int:
    """How many dims of the indexed tensor a key entry consumes."""
    if k is None or k is Ellipsis or isinstance(k, bool):
        return 0
    if _is_mask(k):
        return k.ndim
    return 1


def _entry(k: Any, device: Any) -> Any:
    """A key entry checked, with a Python list made a constant tensor (as eager makes it) and a number
    input of the trace (``cache="symbolic values"``) specialized to its value, as any index is."""
    if isinstance(k, NumberProxy):
        k = k.specialize()
    if isinstance(k, (list, tuple)):
        flat = list(_flatten(k))
        if flat and all(isinstance(v, bool) for v in flat):
            return prims.tensor_from_sequence(_as_lists(k), device=device, dtype=dtypes.bool8)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
            raise NotImplementedError(f"indexing with the list {k!r} is not supported by thunder")
        return prims.tensor_from_sequence(_as_lists(k), device=device, dtype=dtypes.int64)
    if _is_tensor(k):
        if not (dtypes.is_integer(k.dtype) or k.dtype is dtypes.bool8):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return k
    if k is None or k is Ellipsis or isinstance(k, (int, slice, torch.SymInt)):
        return k
    raise IndexError(
        "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
        f"(got {type(k).__name__})"
    )


def _bool_index(value: bool, device: Any) -> TensorProxy:
    """A Python bool's index of the dim of size 1 it adds: ``[0]`` for True, nothing for False."""
    if value:
        return prims.tensor_from_sequence([0], device=device, dtype=dtypes.int64)
    return prims.full((0,), 0, device=device, dtype=dtypes.int64)


def parse_key(a: TensorProxy, key: Any) -> IndexKey:
    """``key`` (anything ``a[key]`` takes) split into eager's three steps (see the module's docstring)."""
    key = key if isinstance(key, tuple) else (key,)
    key = tuple(_entry(k, a.device) for k in key)
    consumed = sum(_dims_taken(k) for k in key)
    if consumed > a.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]  # by identity: proxies overload ==
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    rest = (slice(None),) * (a.ndim - consumed)
    key = key[: ellipses[0]] + rest + key[ellipses[0] + 1 :] if ellipses else key + rest
    basic: list[Any] = []
    selects: list[TensorProxy | None] = []
    indices: list[TensorProxy | None] = []
    dim = 0  # the dim of ``a`` the entry indexes
    for k in key:
        dim += _dims_taken(k)
        if isinstance(k, bool):
            basic.append(None)
            selects.append(None)
            indices.append(_bool_index(k, a.device))
        elif k is None or isinstance(k, slice):
            basic.append(k)
            selects.append(None)
            indices.append(None)
        elif not _is_tensor(k):  # an int
            basic.append(k)
        elif _is_mask(k):
            if k.dtype is dtypes.uint8:
                raise NotImplementedError(
                    "indexing with a uint8 tensor (deprecated in PyTorch) is not supported by thunder; use a "
                    "bool mask"
                )
            _check_mask(k, a, dim - k.ndim)
            if k.ndim == 0:  # a dim of size 1, which the mask keeps or drops
                basic.append(None)
                k = prims.reshape(k, (1,))
            else:
                basic.extend([slice(None)] * k.ndim)
            selects.extend([None] * k.ndim)
            indices.append(k)
        elif k.ndim == 0:
            basic.append(slice(None))
            selects.append(k)
        else:
            basic.append(slice(None))
            selects.append(None)
            indices.append(k)
    return IndexKey(tuple(basic), _trimmed(selects), _trimmed(indices))


def _check_mask(mask: TensorProxy, a: TensorProxy, start: int) -> None:
    for d, size in enumerate(mask.shape):
        if size != a.shape[start + d]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {d} does not match the shape of the indexed "
                f"tensor {list(a.shape)} at index {start + d}"
            )


def _check_index_shapes(indices: Sequence[TensorProxy | None]) -> None:
    """The index tensors broadcast together, else eager's IndexError."""
    shapes = [tuple(index.shape) for index in indices if index is not None and not _is_mask(index)]
    try:
        broadcast_shapes(*shapes)
    except RuntimeError:
        listed = ", ".join(str(list(shape)) for shape in shapes)
        raise IndexError(
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {listed}"
        ) from None


def _trimmed(entries: list) -> tuple:
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


def _view(a: TensorProxy, basic: tuple) -> TensorProxy:
    from thunder.torch.shape import _apply_basic_index

    return _apply_basic_index(a, basic)


def advanced_getitem(a: TensorProxy, key: Any) -> TensorProxy:
    """``a[key]`` for a key with index tensors, lists or bools: a copy, as eager's."""
    parsed = parse_key(a, key)
    result = _view(a, parsed.basic)
    if parsed.selects:
        result = prims.index(result, list(parsed.selects))
    if parsed.indices:
        if any(_is_mask(index) for index in parsed.indices):
            raise NotImplementedError(f"indexing with a boolean mask as an index {_DATA_DEPENDENT}")
        _check_index_shapes(parsed.indices)
        result = prims.index(result, list(parsed.indices))
    return result


# ---------------------------------------------------------------------------------------------
# Writing


def value_of_write(value: Any) -> Any:
    """What eager writes for ``x[key] = value``: a tensor's leading dims of size 1 dropped (NumPy's
    rule, eager's ``slicePrefix1sSize``), so that ``x[0] = torch.ones(1, 3)`` fills a row."""
    if not isinstance(value, TensorProxy):
        return value
    leading = 0
    while leading < value.ndim and value.shape[leading] == 1:
        leading += 1
    return prims.reshape(value, value.shape[leading:]) if leading else value


def _indexed_shape(view: TensorProxy, indices: Sequence[TensorProxy | None]) -> tuple:
    """The shape of ``view[indices]`` (``aten.index``'s rule), recording nothing."""
    from thunder.core.prims.indexing import _index_meta

    return tuple(_index_meta(view, list(indices)).shape) if indices else tuple(view.shape)


def _check_broadcast(value: Any, shape: Sequence[int]) -> None:
    if not isinstance(value, TensorProxy):
        return
    try:
        broadcast = broadcast_shapes(value.shape, tuple(shape))
    except RuntimeError:
        broadcast = None
    if broadcast != tuple(shape):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to indexing result "
            f"of shape {list(shape)}"
        )


def put(view: TensorProxy, parsed: IndexKey, value: Any) -> TensorProxy:
    """The new value of ``view`` (``a[parsed.basic]``) after ``view[selects][indices] = value``."""
    value = value_of_write(value)
    if not parsed.selects:
        return _put_indices(view, parsed.indices, value)
    selects = list(parsed.selects)
    if parsed.indices:
        written = _put_indices(prims.index(view, selects), parsed.indices, value)
    else:  # eager copies into the selected view: any dtype converts
        shape = _indexed_shape(view, selects)
        _check_broadcast(value, shape)
        written = expand_to(to_dtype(value, view.dtype), shape)
        if not isinstance(written, TensorProxy):
            written = prims.full(shape, written, device=view.device, dtype=view.dtype)
    return _index_put(view, selects, written)


def _put_indices(view: TensorProxy, indices: Sequence[TensorProxy | None], value: Any) -> TensorProxy:
    _check_index_shapes(indices)
    masks = [i for i, index in enumerate(indices) if _is_mask(index)]
    if masks:
        if len(masks) > 1 or sum(index is not None for index in indices) > 1:
            raise NotImplementedError(
                f"x[key] = v with a boolean mask beside other index tensors or bools in key {_DATA_DEPENDENT}: "
                "the mask's count of Trues broadcasts with them"
            )
        mask = indices[masks[0]]
        assert mask is not None  # _is_mask holds only for a tensor
        return _masked_write(view, masks[0], mask, value)
    _check_broadcast(value, _indexed_shape(view, indices))
    return _index_put(view, indices, value)


def _index_put(view: TensorProxy, indices: Sequence[TensorProxy | None], value: Any) -> TensorProxy:
    """``torch.index_put`` where every index is a tensor (the in-place form ``index_put_`` takes
    those: transforms/reinplace.py), else the prim, which takes None for a dim taken whole."""
    if not isinstance(value, TensorProxy):
        value = prims.full((), to_dtype(value, view.dtype), device=view.device, dtype=view.dtype)
    if all(index is not None for index in indices):
        return index_put(view, list(indices), value)
    if value.dtype is not view.dtype:
        index_put(view, [index for index in indices if index is not None], value)  # raises eager's error
    return prims.index_put(view, list(indices), value, False)


def _masked_write(view: TensorProxy, position: int, mask: TensorProxy, value: Any) -> TensorProxy:
    """``view[(None,) * position + (mask,)] = value``: a select where the mask holds, the mask's dims
    moved first (``_masked_put``'s form). ``position`` dims taken whole precede the mask's."""
    k = mask.ndim
    mask_dims = tuple(range(position, position + k))
    moved = movedim(view, mask_dims, tuple(range(k))) if position else view
    pre, post = tuple(view.shape[:position]), tuple(view.shape[position + k :])
    if not isinstance(value, TensorProxy):
        value = prims.full((), to_dtype(value, view.dtype), device=view.device, dtype=view.dtype)
    if value.dtype is not view.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {view.dtype.name} for the "
            f"destination and {value.dtype.name} for the source."
        )
    rank = len(pre) + 1 + len(post)  # the indexing result: pre, the Trues, post
    if value.ndim > rank:
        _check_broadcast(value, (*pre, 1, *post))  # raises, as eager does
    value = prims.reshape(value, (1,) * (rank - value.ndim) + tuple(value.shape))
    rows = value.shape[position]
    _check_broadcast(value, (*pre, rows, *post))
    value = expand_to(value, (*pre, rows, *post))
    if position:
        value = movedim(value, position, 0)  # one row per True first, as the mask's dims are
    written = _masked_put(moved, mask, value, False)
    return movedim(written, tuple(range(k)), mask_dims) if position else written
