"""Embeddings and one-hot encoding: ``F.embedding``, ``F.embedding_bag`` and ``F.one_hot``.

An embedding is an index_select of the weight's rows; its gradient rule accumulates the output's
gradient into those rows (index_add), skipping ``padding_idx`` and optionally scaling by frequency.
``max_norm`` renormalizes the weight in place in eager, a side effect thunder does not replay, so it
is refused by name.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype


def _flat(t: TensorProxy) -> TensorProxy:
    return prims.reshape(t, (t.numel(),)) if t.ndim != 1 else t


def _padding_index(padding_idx: int | None, rows: int) -> int | None:
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % rows


@torchsymbol(F.embedding)
def embedding(input: TensorProxy, weight: TensorProxy, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> TensorProxy:  # fmt: skip
    if max_norm is not None:
        raise NotImplementedError(
            "embedding with max_norm (which renormalizes the weight in place) is not supported by thunder yet"
        )
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.ndim}-D")
    if input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is dtypes.bool8:
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {input.dtype} instead"
        )
    _padding_index(padding_idx, weight.shape[0])
    rows = prims.take(weight, _flat(input), 0)
    return prims.reshape(rows, (*input.shape, weight.shape[1]))


def _embedding_backward(g: TensorProxy, a: TensorProxy, num_weights: int, padding_idx: int | None,
                        scale_grad_by_freq: bool) -> TensorProxy:  # fmt: skip
    """The weight's gradient, in ``g``'s dtype: each row of ``g`` added into the row its index names."""
    index = _flat(a)
    rows = prims.reshape(g, (index.numel(), g.shape[-1]))
    if padding_idx is not None:
        rows = ew.where(prims.reshape(ew.ne(index, padding_idx), (index.numel(), 1)), rows, 0.0)
    if scale_grad_by_freq:
        ones = prims.full((index.numel(),), 1, device=g.device, dtype=g.dtype)
        counts = prims.index_add(
            prims.full((num_weights,), 0, device=g.device, dtype=g.dtype), 0, index, ones
        )
        rows = ew.true_divide(rows, prims.reshape(prims.take(counts, index, 0), (index.numel(), 1)))
    zeros = prims.full((num_weights, g.shape[-1]), 0, device=g.device, dtype=g.dtype)
    return prims.index_add(zeros, 0, index, rows)


# One symbol, so that an executor can run it as one kernel: the torch executor runs PyTorch's
# embedding_dense_backward, which sums each row's gradients in float32 and allocates the result once
# (the decomposition's index_add is out of place: a zero tensor and the sum, two vocabulary-sized tensors).
embedding_backward = make_composite("embedding_backward", _embedding_backward)


@register_vjp(embedding)
def _embedding_vjp(g: Any, a: TensorProxy, weight: TensorProxy, padding_idx: int | None, max_norm: Any, norm_type: float,
                   scale_grad_by_freq: bool, sparse: bool, *, out: TensorProxy) -> tuple:  # fmt: skip
    if g is None or not weight.requires_grad:
        return (None,) * 7
    if sparse:
        raise NotImplementedError(
            "embedding(sparse=True) gradients (sparse tensors) are not supported by thunder"
        )
    padding = _padding_index(padding_idx, weight.shape[0])
    grad = embedding_backward(g, a, weight.shape[0], padding, scale_grad_by_freq)
    return (None, to_dtype(grad, weight.dtype), None, None, None, None, None)


@torchsymbol(F.embedding_bag)
def embedding_bag(input: TensorProxy, weight: TensorProxy, offsets: TensorProxy | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: TensorProxy | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> TensorProxy:  # fmt: skip
    """Bags of embeddings reduced by sum, mean or max. Bag membership comes from ``offsets`` (data):
    each index's bag is the number of offsets at or before its position, minus one."""
    if max_norm is not None:
        raise NotImplementedError(
            "embedding_bag with max_norm (which renormalizes the weight in place) is not supported by thunder yet"
        )
    if (scale_grad_by_freq or sparse) and weight.requires_grad:
        raise NotImplementedError(
            "embedding_bag gradients with scale_grad_by_freq or sparse are not supported by thunder yet"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and (mode != "sum" or per_sample_weights.shape != input.shape):
        raise NotImplementedError(
            "embedding_bag: per_sample_weights need mode='sum' and the shape of the input"
        )
    index, bag, bags = _bags(input, offsets, include_last_offset)
    padding = _padding_index(padding_idx, weight.shape[0])
    if padding is not None:  # padded positions go to an extra bag that is dropped at the end
        bag = ew.where(ew.eq(index, padding), bags, bag)
    dim = weight.shape[1]
    rows = prims.take(weight, index, 0)
    if per_sample_weights is not None:
        rows = ew.mul(
            rows, prims.reshape(to_dtype(_flat(per_sample_weights), rows.dtype), (index.numel(), 1))
        )
    zeros = prims.full((bags + 1, dim), 0, device=weight.device, dtype=weight.dtype)
    if mode == "max":
        spread = prims.broadcast_in_dim(prims.reshape(bag, (index.numel(), 1)), (index.numel(), dim), (0, 1))
        totals = prims.scatter_reduce(zeros, 0, spread, rows, "amax", False)
    else:
        totals = prims.index_add(zeros, 0, bag, rows)
    result = prims.slice_prim(totals, (0, 0), (bags, dim), (1, 1))
    if mode == "mean":
        ones = prims.full((index.numel(),), 1, device=weight.device, dtype=weight.dtype)
        counts = prims.index_add(
            prims.full((bags + 1,), 0, device=weight.device, dtype=weight.dtype), 0, bag, ones
        )
        counts = prims.reshape(prims.slice_prim(counts, (0,), (bags,), (1,)), (bags, 1))
        result = ew.where(
            ew.gt(counts, 0), ew.true_divide(result, ew.where(ew.gt(counts, 0), counts, 1.0)), 0.0
        )
    return result


def _bags(
    a: TensorProxy, offsets: TensorProxy | None, include_last_offset: bool
) -> tuple[TensorProxy, TensorProxy, int]:
    """(the flat indices, each one's bag, the number of bags)."""
    if a.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None")
        bags, length = a.shape
        positions = prims.iota(a.numel(), start=0, step=1, device=a.device, dtype=dtypes.int64)
        return _flat(a), ew.floor_divide(positions, max(length, 1)), bags
    if a.ndim != 1 or offsets is None or offsets.ndim != 1:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {a.ndim}, with 1D offsets"
        )
    bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    positions = prims.iota(a.numel(), start=0, step=1, device=a.device, dtype=offsets.dtype)
    starts = prims.slice_prim(offsets, (0,), (bags,), (1,)) if bags != offsets.shape[0] else offsets
    started = ew.le(prims.reshape(starts, (1, bags)), prims.reshape(positions, (a.numel(), 1)))
    bag = ew.sub(reductions.sum(started, 1), 1)
    if include_last_offset:  # positions at or past the last offset belong to no bag
        end = prims.reshape(prims.slice_prim(offsets, (bags,), (bags + 1,), (1,)), (1,))
        bag = ew.where(ew.lt(positions, prims.broadcast_in_dim(end, (a.numel(),), (0,))), bag, bags)
    return a, to_dtype(bag, dtypes.int64), bags


@torchsymbol(F.one_hot)
def one_hot(input: TensorProxy, num_classes: int = -1) -> TensorProxy:
    if num_classes == -1:
        raise NotImplementedError(
            "one_hot with num_classes=-1 depends on the data (its maximum); pass num_classes"
        )
    if input.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    classes = prims.iota(num_classes, start=0, step=1, device=input.device, dtype=dtypes.int64)
    matches = ew.eq(
        prims.reshape(input, (*input.shape, 1)), prims.reshape(classes, (1,) * input.ndim + (num_classes,))
    )
    return to_dtype(matches, dtypes.int64)
