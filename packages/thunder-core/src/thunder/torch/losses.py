"""Losses of ``torch.nn.functional`` beyond nll and cross entropy (those live in ``nn.py``).

Each is an elementwise loss followed by the shared reduction; half-precision inputs compute in
float32. Arguments are checked as eagerly as PyTorch checks them, so a bad call raises here too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.promotion import result_dtype
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch import reductions, shape
from thunder.torch.activations import logsigmoid
from thunder.torch.nn import legacy_reduction, reduce_loss
from thunder.torch.nn_common import computation_dtype
from thunder.torch.normalization import pairwise_distance
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import broadcast, to_dtype


def _floats(*tensors: Any, upcast: bool = True) -> tuple[list[Any], dtypes.dtype]:
    """The tensors broadcast together in their computation dtype, and the result dtype.

    ``upcast=False`` keeps half precision, for losses that eager composes from separate ops (each
    rounding to the input's dtype): the torch-language ops then round at the same steps.
    """
    dtype = result_dtype(*tensors)
    compute = computation_dtype(dtype) if upcast else dtype
    return [to_dtype(t, compute) for t in broadcast(*tensors)], dtype


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _weighted(name: str, losses: TensorProxy, a: TensorProxy, weight: TensorProxy | None, reduction: str,
              mean_by_weight: bool, dtype: dtypes.dtype) -> TensorProxy:  # fmt: skip
    _check_reduction(reduction)
    if weight is None:
        return to_dtype(reduce_loss(losses, reduction), dtype)
    if weight.shape != a.shape:
        raise ValueError("Weights and input must have the same size.")
    weighted = ew.mul(losses, to_dtype(weight, losses.dtype))
    if reduction == "mean" and mean_by_weight:
        return to_dtype(
            ew.true_divide(reductions.sum(weighted), reductions.sum(to_dtype(weight, losses.dtype))), dtype
        )
    return to_dtype(reduce_loss(weighted, reduction), dtype)


@torchsymbol(F.mse_loss)
def mse_loss(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
             weight: TensorProxy | None = None) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    (x, y), dtype = _floats(input, target)
    difference = ew.sub(x, y)
    return _weighted("mse_loss", ew.mul(difference, difference), input, weight, reduction, True, dtype)


@torchsymbol(F.l1_loss)
def l1_loss(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
            weight: TensorProxy | None = None) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    (x, y), dtype = _floats(input, target)
    return _weighted("l1_loss", ew.abs(ew.sub(x, y)), input, weight, reduction, True, dtype)


@torchsymbol(F.smooth_l1_loss)
def smooth_l1_loss(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    (x, y), dtype = _floats(input, target)
    distance = ew.abs(ew.sub(x, y))
    if beta == 0:
        losses = distance
    else:
        quadratic = ew.true_divide(ew.mul(ew.mul(distance, distance), 0.5), beta)
        losses = ew.where(ew.lt(distance, beta), quadratic, ew.sub(distance, 0.5 * beta))
    return _weighted("smooth_l1_loss", losses, input, None, reduction, False, dtype)


@torchsymbol(F.huber_loss)
def huber_loss(input: TensorProxy, target: TensorProxy, reduction: str = "mean", delta: float = 1.0,
               weight: TensorProxy | None = None) -> TensorProxy:  # fmt: skip
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    (x, y), dtype = _floats(input, target)
    distance = ew.abs(ew.sub(x, y))
    quadratic = ew.mul(ew.mul(distance, distance), 0.5)
    losses = ew.where(ew.lt(distance, delta), quadratic, ew.mul(ew.sub(distance, 0.5 * delta), delta))
    return _weighted("huber_loss", losses, input, weight, reduction, False, dtype)


@torchsymbol(F.binary_cross_entropy)
def binary_cross_entropy(input: TensorProxy, target: TensorProxy, weight: TensorProxy | None = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) is deprecated."
        )
    _check_reduction(reduction)
    compute = computation_dtype(input.dtype)
    x, y = to_dtype(input, compute), to_dtype(target, compute)
    # log is clamped at -100 as in eager, so that a probability of exactly 0 or 1 costs a finite amount
    log_x = ew.where(ew.lt(ew.log(x), -100.0), -100.0, ew.log(x))
    log_not_x = ew.where(ew.lt(ew.log1p(ew.neg(x)), -100.0), -100.0, ew.log1p(ew.neg(x)))
    losses = ew.neg(ew.add(ew.mul(y, log_x), ew.mul(ew.sub(1.0, y), log_not_x)))
    if weight is not None:
        losses = ew.mul(losses, to_dtype(weight, compute))
    return to_dtype(reduce_loss(losses, reduction), input.dtype)


@torchsymbol(F.binary_cross_entropy_with_logits)
def binary_cross_entropy_with_logits(input: TensorProxy, target: TensorProxy, weight: TensorProxy | None = None,
                                     size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                                     pos_weight: TensorProxy | None = None) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    _check_reduction(reduction)
    compute = input.dtype  # eager composes this loss from ops that each round to the input's dtype
    x, y = to_dtype(input, compute), to_dtype(target, compute)
    # log(1 + exp(-x)) computed without overflow: max(-x, 0) + log1p(exp(-|x|))
    softplus_neg = ew.add(ew.where(ew.lt(x, 0), ew.neg(x), 0.0), ew.log1p(ew.exp(ew.neg(ew.abs(x)))))
    if pos_weight is not None:
        log_weight = ew.add(ew.mul(ew.sub(to_dtype(pos_weight, compute), 1.0), y), 1.0)
        softplus_neg = ew.mul(log_weight, softplus_neg)
    losses = ew.add(ew.mul(ew.sub(1.0, y), x), softplus_neg)
    if weight is not None:
        losses = ew.mul(losses, to_dtype(weight, compute))
    return to_dtype(reduce_loss(losses, reduction), input.dtype)


@torchsymbol(F.kl_div)
def kl_div(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    (x, y), dtype = _floats(input, target)
    if log_target:
        losses = ew.mul(ew.exp(y), ew.sub(y, x))
    else:
        # target * log(target) is 0 where the target is 0 (xlogy), NaN where it is negative
        y_log_y = ew.where(ew.eq(y, 0), 0.0, ew.mul(y, ew.log(y)))
        losses = ew.sub(y_log_y, ew.mul(y, x))
    if reduction == "batchmean":
        total = reductions.sum(losses)
        return to_dtype(ew.true_divide(total, float(input.shape[0])) if input.ndim else total, dtype)
    _check_reduction(reduction)
    return to_dtype(reduce_loss(losses, reduction), dtype)


@torchsymbol(F.poisson_nll_loss)
def poisson_nll_loss(input: TensorProxy, target: TensorProxy, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    (x, y), dtype = _floats(input, target, upcast=False)
    if log_input:
        losses = ew.sub(ew.exp(x), ew.mul(y, x))
    else:
        losses = ew.sub(x, ew.mul(y, ew.log(ew.add(x, eps))))
    if full:
        stirling = ew.add(ew.sub(ew.mul(y, ew.log(y)), y), ew.mul(ew.log(ew.mul(y, 2 * math.pi)), 0.5))
        losses = ew.add(losses, ew.where(ew.gt(y, 1), stirling, 0.0))
    return reduce_loss(losses, reduction)  # the ops above give eager's result dtype


@torchsymbol(F.soft_margin_loss)
def soft_margin_loss(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    (x, y), dtype = _floats(input, target)
    losses = ew.log1p(ew.exp(ew.neg(ew.mul(y, x))))
    return to_dtype(reduce_loss(losses, reduction), dtype)


@torchsymbol(F.margin_ranking_loss)
def margin_ranking_loss(input1: TensorProxy, input2: TensorProxy, target: TensorProxy, margin: float = 0.0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension")
    _check_reduction(reduction)
    (x1, x2, y), dtype = _floats(input1, input2, target)
    dtype = result_dtype(input1, input2, target, margin)  # an integer input with a float margin gives floats
    margins = ew.add(ew.neg(ew.mul(y, ew.sub(x1, x2))), margin)
    return to_dtype(reduce_loss(ew.where(ew.gt(margins, 0), margins, 0), reduction), dtype)


@torchsymbol(F.hinge_embedding_loss)
def hinge_embedding_loss(input: TensorProxy, target: TensorProxy, margin: float = 1.0, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    (x, y), dtype = _floats(input, target, upcast=False)
    # eager's composite turns the margin into a tensor of the input's dtype first
    margin = (
        torch.tensor(margin, dtype=dtype.torch_dtype).item() if dtypes.is_low_precision(dtype) else margin
    )
    below_margin = ew.sub(margin, x)
    below_margin = ew.where(ew.gt(below_margin, 0), below_margin, 0.0)
    losses = ew.add(ew.where(ew.ne(y, 1), below_margin, 0.0), ew.where(ew.ne(y, -1), x, 0.0))
    return reduce_loss(losses, reduction)  # the ops above give eager's result dtype


@torchsymbol(F.cosine_embedding_loss)
def cosine_embedding_loss(input1: TensorProxy, input2: TensorProxy, target: TensorProxy, margin: float = 0.0,
                          size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.ndim != input2.ndim or input1.ndim not in (1, 2) or target.ndim != input1.ndim - 1:
        raise RuntimeError(
            f"cosine_embedding_loss: 1D target tensor expected with 2D inputs (or 0D with 1D), got {input1.ndim}D, {input2.ndim}D and {target.ndim}D"
        )
    if input1.shape != input2.shape:
        raise RuntimeError(
            f"cosine_embedding_loss: input1 and input2 sizes differ: {input1.shape} and {input2.shape}"
        )
    dtype = result_dtype(input1, input2, target)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = dtypes.float32  # eager's cosine of integers is float
    compute = computation_dtype(dtype)
    x1, x2, y = (to_dtype(t, compute) for t in (input1, input2, target))
    dim = input1.ndim - 1
    dot = reductions.sum(ew.mul(x1, x2), dim)
    squares = ew.mul(
        ew.add(reductions.sum(ew.mul(x1, x1), dim), 1e-12), ew.add(reductions.sum(ew.mul(x2, x2), dim), 1e-12)
    )
    cosine = ew.true_divide(dot, ew.sqrt(squares))
    beyond_margin = ew.sub(cosine, margin)
    negative = ew.where(ew.gt(beyond_margin, 0), beyond_margin, 0.0)
    losses = ew.add(ew.where(ew.eq(y, 1), ew.sub(1.0, cosine), 0.0), ew.where(ew.eq(y, -1), negative, 0.0))
    return to_dtype(reduce_loss(losses, reduction), dtype)


@torchsymbol(F.triplet_margin_loss)
def triplet_margin_loss(anchor: TensorProxy, positive: TensorProxy, negative: TensorProxy, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False, size_average: Any = None,
                        reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions"
        )
    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        swapped = pairwise_distance(positive, negative, p, eps)
        negative_distance = ew.where(ew.lt(swapped, negative_distance), swapped, negative_distance)
    losses = ew.add(ew.sub(positive_distance, negative_distance), margin)
    return reduce_loss(ew.where(ew.gt(losses, 0), losses, 0.0), reduction)


@torchsymbol(F.multilabel_soft_margin_loss)
def multilabel_soft_margin_loss(input: TensorProxy, target: TensorProxy, weight: TensorProxy | None = None,
                                size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    losses = ew.neg(
        ew.add(ew.mul(target, logsigmoid(input)), ew.mul(ew.sub(1, target), logsigmoid(ew.neg(input))))
    )
    if weight is not None:
        losses = ew.mul(losses, weight)
    class_dim = input.ndim - 1
    per_sample = ew.true_divide(reductions.sum(losses, class_dim), float(input.shape[class_dim]))
    if reduction == "mean":
        return reductions.mean(per_sample)
    return reductions.sum(per_sample) if reduction == "sum" else per_sample


def _as_batch(a: TensorProxy, target: TensorProxy, name: str) -> tuple[TensorProxy, TensorProxy]:
    """(N, C) input and its targets; a 0-d or 1-d input is one sample."""
    if a.ndim > 2:
        raise RuntimeError(
            f"{name}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(a.shape)}"
        )
    x = prims.reshape(a, (1, max(a.numel(), 1) if a.ndim == 0 else a.shape[0])) if a.ndim < 2 else a
    return x, target


@torchsymbol(F.multi_margin_loss)
def multi_margin_loss(input: TensorProxy, target: TensorProxy, p: int = 1, margin: float = 1.0,
                      weight: TensorProxy | None = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> TensorProxy:  # fmt: skip
    """Per sample: the mean over classes i != y of max(0, margin - x[y] + x[i])^p, times weight[y]."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x, _ = _as_batch(input, target, "multi_margin_loss")
    n, classes = x.shape
    if target.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    y = prims.reshape(target, (n, 1))
    compute = computation_dtype(input.dtype)
    xf = to_dtype(x, compute)
    picked = prims.take_along_axis(xf, y, 1)
    hinge = ew.add(ew.sub(xf, picked), margin)
    hinge = ew.where(ew.gt(hinge, 0), hinge, 0.0)
    if p == 2:
        hinge = ew.mul(hinge, hinge)
    if weight is not None:
        hinge = ew.mul(
            hinge,
            prims.reshape(
                prims.take_along_axis(to_dtype(weight, compute), prims.reshape(target, (n,)), 0), (n, 1)
            ),
        )
    classes_index = prims.iota(classes, start=0, step=1, device=input.device, dtype=target.dtype)
    hinge = ew.where(ew.eq(prims.reshape(classes_index, (1, classes)), y), 0.0, hinge)
    losses = ew.true_divide(reductions.sum(hinge, 1), float(classes))
    losses = prims.reshape(losses, target.shape) if input.ndim < 2 else losses
    return to_dtype(reduce_loss(losses, reduction), input.dtype)


@torchsymbol(F.multilabel_margin_loss)
def multilabel_margin_loss(input: TensorProxy, target: TensorProxy, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean") -> TensorProxy:  # fmt: skip
    """Targets list class indices up to the first -1. Per sample: the sum over listed classes j and
    unlisted classes i of max(0, 1 - (x[j] - x[i])), divided by the number of classes."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise RuntimeError(
            f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}"
        )
    x, _ = _as_batch(input, target, "multilabel_margin_loss")
    t = prims.reshape(target, x.shape) if target.shape != x.shape else target
    n, classes = x.shape
    from thunder.torch.sorting import cumsum

    listed = ew.eq(cumsum(to_dtype(ew.eq(t, -1), dtypes.int64), 1), 0)  # positions before the first -1
    safe = ew.where(listed, t, 0)
    compute = computation_dtype(input.dtype)
    xf = to_dtype(x, compute)
    listed_values = prims.take_along_axis(xf, safe, 1)  # (N, K)
    class_index = prims.reshape(
        prims.iota(classes, start=0, step=1, device=input.device, dtype=t.dtype), (1, 1, classes)
    )
    is_listed = reductions.any(
        ew.bitwise_and(ew.eq(shape.unsqueeze(safe, 2), class_index), shape.unsqueeze(listed, 2)), 1
    )
    margins = ew.add(ew.sub(shape.unsqueeze(xf, 1), shape.unsqueeze(listed_values, 2)), 1.0)  # (N, K, C)
    margins = ew.where(ew.gt(margins, 0), margins, 0.0)
    valid = ew.bitwise_and(shape.unsqueeze(listed, 2), ew.bitwise_not(shape.unsqueeze(is_listed, 1)))
    losses = ew.true_divide(reductions.sum(ew.where(valid, margins, 0.0), (1, 2)), float(classes))
    losses = prims.reshape(losses, ()) if input.ndim < 2 else losses
    return to_dtype(reduce_loss(losses, reduction), input.dtype)


# F.linear_cross_entropy is new in torch 2.12; older torch (the GPU machine runs 2.11) has no such name
@torchsymbol(*[f for f in (getattr(F, "linear_cross_entropy", None),) if f is not None])
def linear_cross_entropy(input: TensorProxy, linear_weight: TensorProxy, target: TensorProxy, *,
                         linear_bias: TensorProxy | None = None, weight: TensorProxy | None = None,
                         reduction: str = "mean", ignore_index: int | None = None, label_smoothing: float = 0.0,
                         options: Any = None) -> TensorProxy:  # fmt: skip
    """cross_entropy of a linear projection. The weight may be (C, d_1, ..., d_K): the logits are
    then (*batch, C, d_1, ..., d_K). ``options`` (eager's chunking) does not change the values."""
    from thunder.torch.linalg import tensordot
    from thunder.torch.nn import cross_entropy

    if input.shape[-1:] != linear_weight.shape[-1:]:
        raise RuntimeError(
            f"linear_cross_entropy: input {list(input.shape)} and linear_weight {list(linear_weight.shape)} differ in features"
        )
    logits = tensordot(input, linear_weight, ([input.ndim - 1], [linear_weight.ndim - 1]))
    if linear_bias is not None:
        logits = ew.add(logits, linear_bias)
    index = -100 if ignore_index is None else ignore_index
    return cross_entropy(
        logits, target, weight, ignore_index=index, reduction=reduction, label_smoothing=label_smoothing
    )


@torchsymbol(F.triplet_margin_with_distance_loss)
def triplet_margin_with_distance_loss(anchor: TensorProxy, positive: TensorProxy, negative: TensorProxy, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> TensorProxy:  # fmt: skip
    """The distance is pairwise_distance by default; an ``nn.PairwiseDistance`` module is read as
    its arguments, any other callable is called on the proxies (it must be written in torch ops)."""
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(
            f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} instead"
        )
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions"
        )
    distance: Callable[[TensorProxy, TensorProxy], TensorProxy]
    if distance_function is None:
        distance = pairwise_distance
    elif isinstance(distance_function, torch.nn.PairwiseDistance):
        module = distance_function

        def distance(x: TensorProxy, y: TensorProxy) -> TensorProxy:  # noqa: F811 -- one of three choices
            return pairwise_distance(x, y, module.norm, module.eps, module.keepdim)
    else:
        distance = distance_function
    positive_distance = distance(anchor, positive)
    negative_distance = distance(anchor, negative)
    if swap:
        swapped = distance(positive, negative)
        negative_distance = ew.where(ew.lt(swapped, negative_distance), swapped, negative_distance)
    losses = ew.add(ew.sub(positive_distance, negative_distance), margin)
    return reduce_loss(ew.where(ew.gt(losses, 0), losses, 0.0), reduction)


@torchsymbol(F.gaussian_nll_loss)
def gaussian_nll_loss(input: TensorProxy, target: TensorProxy, var: Any, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> TensorProxy:  # fmt: skip
    """``0.5 * (log(var) + (a - target) ** 2 / var)``, var clamped to ``eps`` without a gradient through the
    clamp, as eager. Eager's check that no variance is negative reads the data; thunder cannot make it."""
    from thunder.torch.grad import detach

    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = prims.full(input.shape, var, device=input.device, dtype=input.dtype)
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = prims.reshape(var, (*var.shape, 1))
        elif not (input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = ew.add(var, detach(ew.sub(ew.clamp(var, min=eps), var)))  # eager clamps in place under no_grad
    loss = ew.mul(0.5, ew.add(ew.log(var), ew.true_divide(ew.pow(ew.sub(input, target), 2), var)))
    if full:
        loss = ew.add(loss, 0.5 * math.log(2 * math.pi))
    return reduce_loss(loss, reduction)
