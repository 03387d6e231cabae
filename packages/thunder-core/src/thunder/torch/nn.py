"""Neural-network ops: matrix products, activations, dropout, softmax and losses."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions, shape
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, to_dtype


def no_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise NotImplementedError(f"{name}(inplace=True) is not supported by thunder yet; use inplace=False")


@torchsymbol(F.linear)
def linear(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None) -> TensorProxy:
    return prims.linear(input, weight, bias)


@torchsymbol(torch.matmul, torch.Tensor.matmul, method="matmul")
def matmul(input: TensorProxy, other: TensorProxy) -> TensorProxy:
    return prims.matmul(input, other)


@torchsymbol(torch.mm, torch.Tensor.mm, method="mm")
def mm(input: TensorProxy, mat2: TensorProxy) -> TensorProxy:
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    return prims.matmul(input, mat2)


@torchsymbol(torch.bmm, torch.Tensor.bmm, method="bmm")
def bmm(input: TensorProxy, mat2: TensorProxy) -> TensorProxy:
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    return prims.matmul(input, mat2)


@torchsymbol(F.relu, torch.relu, torch.Tensor.relu, method="relu")
def relu(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("relu", inplace)
    zero = 0.0 if input.dtype.is_floating_point else 0
    return prims.where(prims.gt(input, zero), input, zero)


def _relu_backward(g: TensorProxy, out: TensorProxy) -> TensorProxy:
    """``g`` where relu's output is positive or NaN, else 0 (eager's threshold_backward at 0)."""
    return ew.where(ew.le(out, 0), 0.0, g)


# One symbol, so that the torch executor runs PyTorch's kernel (threshold_backward) instead of two
relu_backward = make_composite("relu_backward", _relu_backward, tags=frozenset({"elementwise"}))


@register_vjp(relu)
def _relu_vjp(g: Any, a: TensorProxy, inplace: bool, *, out: TensorProxy) -> tuple:
    return (None if g is None else relu_backward(g, out), None)


@torchsymbol(torch.sigmoid, torch.Tensor.sigmoid, F.sigmoid, method="sigmoid")
def sigmoid(input: TensorProxy) -> TensorProxy:
    return ew.apply_elementwise(prims.sigmoid, input, kind=ew.INT_TO_FLOAT)


@torchsymbol(F.gelu)
def gelu(input: TensorProxy, approximate: str = "none") -> TensorProxy:
    computation = to_dtype(input, dtypes.float32) if dtypes.is_low_precision(input.dtype) else input
    if approximate == "none":
        inner = ew.erf(ew.mul(computation, 1 / math.sqrt(2)))
    elif approximate == "tanh":
        cube = ew.mul(ew.mul(computation, computation), computation)
        inner = ew.tanh(ew.mul(ew.add(computation, ew.mul(cube, 0.044715)), math.sqrt(2 / math.pi)))
    else:
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    result = ew.mul(ew.mul(computation, 0.5), ew.add(inner, 1.0))
    return to_dtype(result, input.dtype)


def _gelu_backward(g: TensorProxy, a: TensorProxy, approximate: str) -> TensorProxy:
    """``g`` times gelu's derivative at ``a`` (in float32 for half precision), in ``a``'s dtype."""
    x = to_dtype(a, dtypes.float32) if dtypes.is_low_precision(a.dtype) else a
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        inner = ew.tanh(ew.mul(ew.add(x, ew.mul(ew.mul(ew.mul(x, x), x), 0.044715)), k))
        slope = ew.mul(
            ew.sub(1.0, ew.mul(inner, inner)), ew.mul(ew.add(ew.mul(ew.mul(x, x), 3 * 0.044715), 1.0), k)
        )
        derivative = ew.add(ew.mul(ew.add(inner, 1.0), 0.5), ew.mul(ew.mul(x, 0.5), slope))
    else:
        cdf = ew.mul(ew.add(ew.erf(ew.mul(x, 1 / math.sqrt(2))), 1.0), 0.5)
        pdf = ew.mul(ew.exp(ew.mul(ew.mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
        derivative = ew.add(cdf, ew.mul(x, pdf))
    return to_dtype(ew.mul(to_dtype(g, derivative.dtype), derivative), a.dtype)


gelu_backward = make_composite("gelu_backward", _gelu_backward)


@register_vjp(gelu)
def _gelu_vjp(g: Any, a: TensorProxy, approximate: str, *, out: TensorProxy) -> tuple:
    return (None if g is None else gelu_backward(g, a, approximate), None)


@torchsymbol(F.dropout)
def dropout(a: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> TensorProxy:
    no_inplace("dropout", inplace)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return a
    if p == 1.0:
        return ew.mul(a, 0.0)
    from thunder.torch.randomness import native_dropout

    # the mask as eager draws it, kept for the backward (randomness.py)
    return native_dropout(a, p, True)[0]


def _softmax_dtype(a: TensorProxy, dtype: Any) -> tuple[dtypes.dtype, dtypes.dtype]:
    result = dtypes.to_dtype(dtype) if dtype is not None else a.dtype
    if not (result.is_floating_point or result.is_complex):
        raise RuntimeError(f"softmax is not implemented for {result.name}")
    return (dtypes.float32 if dtypes.is_low_precision(result) else result), result


def _implicit_dim(dim: int | None) -> int:
    if dim is None:
        raise NotImplementedError("softmax without dim uses a deprecated implicit dim; pass dim explicitly")
    return dim


def _shifted_by_max(a: TensorProxy, dim: int | None, dtype: Any) -> tuple[TensorProxy, int, dtypes.dtype]:
    """``a - amax(a, dim)`` in the computation dtype (softmax's numerically safe start), the dim, the result dtype."""
    computation_dtype, result_dtype = _softmax_dtype(a, dtype)
    a = to_dtype(a, computation_dtype)
    d = canonical_dim(_implicit_dim(dim), a.ndim)
    if a.numel() == 0:
        return a, d, result_dtype
    return ew.sub(a, reductions.amax(a, d, keepdim=True)), d, result_dtype


@torchsymbol(F.softmax, torch.softmax, torch.Tensor.softmax, method="softmax")
def softmax(
    input: TensorProxy, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> TensorProxy:
    shifted, d, result_dtype = _shifted_by_max(input, dim, dtype)
    if shifted.numel() == 0:
        return to_dtype(shifted, result_dtype)
    exponentials = ew.exp(shifted)
    return to_dtype(ew.true_divide(exponentials, reductions.sum(exponentials, d, keepdim=True)), result_dtype)


def _softmax_family_vjp(grad_in_computation_dtype: Callable) -> Callable:
    """A rule for softmax or log_softmax: ``grad_in_computation_dtype(g, y, dim)`` in fp32 for low precision."""

    def vjp(g: Any, a: TensorProxy, dim: Any, _stacklevel: int, dtype: Any, *, out: TensorProxy) -> tuple:
        if g is None or a.numel() == 0:
            return (None if g is None else to_dtype(g, a.dtype), None, None, None)
        computation_dtype, _ = _softmax_dtype(a, dtype)
        y, g = to_dtype(out, computation_dtype), to_dtype(g, computation_dtype)
        grad = grad_in_computation_dtype(g, y, canonical_dim(dim, a.ndim))
        return (to_dtype(grad, a.dtype), None, None, None)

    return vjp


register_vjp(softmax)(
    _softmax_family_vjp(lambda g, y, d: ew.mul(y, ew.sub(g, reductions.sum(ew.mul(g, y), d, keepdim=True))))
)


@torchsymbol(F.log_softmax, torch.log_softmax, torch.Tensor.log_softmax, method="log_softmax")
def log_softmax(
    input: TensorProxy, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> TensorProxy:
    shifted, d, result_dtype = _shifted_by_max(input, dim, dtype)
    if shifted.numel() == 0:
        return to_dtype(shifted, result_dtype)
    log_normalizer = ew.log(reductions.sum(ew.exp(shifted), d, keepdim=True))
    return to_dtype(ew.sub(shifted, log_normalizer), result_dtype)


register_vjp(log_softmax)(
    _softmax_family_vjp(lambda g, y, d: ew.sub(g, ew.mul(ew.exp(y), reductions.sum(g, d, keepdim=True))))
)


def reduce_loss(losses: TensorProxy, reduction: str, divisor: Any = None) -> TensorProxy:
    if reduction == "none":
        return losses
    total = reductions.sum(losses)
    if reduction == "sum":
        return total
    if reduction == "mean" and divisor is None:
        return reductions.mean(losses)  # one rounding for half precision, NaN when empty, as eager
    if reduction == "mean":
        return ew.true_divide(total, divisor)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


@torchsymbol(F.nll_loss)
def nll_loss(input: TensorProxy, target: TensorProxy, weight: TensorProxy | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> TensorProxy:  # fmt: skip
    """Class-index targets over dim 1 (dim 0 for an unbatched input)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if target.dtype.is_floating_point:
        raise RuntimeError("nll_loss expects class indices (an integer target)")
    class_dim = 0 if input.ndim == 1 else 1
    kept = ew.ne(target, ignore_index)
    picked = shape.squeeze(
        prims.take_along_axis(input, _index_of(target, kept, class_dim), class_dim), class_dim
    )
    per_class_weight = _class_weights(weight, target, kept, input)
    losses = ew.where(kept, ew.neg(ew.mul(picked, per_class_weight)), 0.0)
    return reduce_loss(losses, reduction, reductions.sum(per_class_weight) if reduction == "mean" else None)


def _index_of(target: TensorProxy, kept: TensorProxy, class_dim: int) -> TensorProxy:
    """The target as an index along the class dim; ignored positions read class 0 (and are masked)."""
    return shape.unsqueeze(ew.where(kept, target, 0), class_dim)


def _class_weights(
    weight: TensorProxy | None, target: TensorProxy, kept: TensorProxy, a: TensorProxy
) -> TensorProxy:
    ones = to_dtype(kept, a.dtype)
    if weight is None:
        return ones
    safe = ew.where(kept, target, 0)
    flat = prims.reshape(safe, (safe.numel(),)) if safe.ndim != 1 else safe
    picked = prims.take_along_axis(weight, flat, 0)
    return ew.mul(prims.reshape(picked, target.shape) if picked.shape != target.shape else picked, ones)


@torchsymbol(F.cross_entropy)
def cross_entropy(input: TensorProxy, target: TensorProxy, weight: TensorProxy | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> TensorProxy:  # fmt: skip
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if _plain_class_indices(input, target, weight, label_smoothing, reduction):
        return cross_entropy_with_lse(input, target, ignore_index, reduction)[0]
    class_dim = 0 if input.ndim == 1 else 1
    log_probabilities = log_softmax(input, class_dim)
    classes = input.shape[class_dim]
    if target.dtype.is_floating_point:
        if label_smoothing:
            target = ew.add(ew.mul(target, 1.0 - label_smoothing), label_smoothing / classes)
        return _cross_entropy_with_probabilities(log_probabilities, target, weight, class_dim, reduction)
    loss = nll_loss(log_probabilities, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return loss
    smooth = _smoothing_loss(log_probabilities, target, weight, ignore_index, class_dim, reduction)
    return ew.add(ew.mul(loss, 1.0 - label_smoothing), ew.mul(smooth, label_smoothing / classes))


def _plain_class_indices(a: TensorProxy, target: TensorProxy, weight: TensorProxy | None, label_smoothing: float,
                         reduction: str) -> bool:  # fmt: skip
    """The common case (a batch of logits, class indices, no weights or smoothing) that has a
    gradient without the log-probabilities: ``cross_entropy_with_lse``."""
    return (
        a.ndim == 2
        and a.numel() > 0
        and a.dtype.is_floating_point
        and not target.dtype.is_floating_point
        and weight is None
        and not label_smoothing
        and reduction in ("mean", "sum", "none")
    )


def _cross_entropy_with_lse(a: TensorProxy, target: TensorProxy, ignore_index: int,
                            reduction: str) -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    """cross_entropy over dim 1 of a 2-D input with class-index targets, and each row's log-sum-exp
    (computation dtype), which is all its backward needs besides the input."""
    x = to_dtype(a, dtypes.float32) if dtypes.is_low_precision(a.dtype) else a
    lse = reductions.logsumexp(x, 1)
    kept = ew.ne(target, ignore_index)
    picked = shape.squeeze(prims.take_along_axis(x, _index_of(target, kept, 1), 1), 1)
    losses = ew.where(kept, ew.sub(lse, picked), 0.0)
    divisor = reductions.sum(to_dtype(kept, x.dtype)) if reduction == "mean" else None
    return to_dtype(reduce_loss(losses, reduction, divisor), a.dtype), lse


cross_entropy_with_lse = make_composite("cross_entropy_with_lse", _cross_entropy_with_lse)


def _cross_entropy_backward(g: TensorProxy, a: TensorProxy, target: TensorProxy, lse: TensorProxy, ignore_index: int,
                            reduction: str) -> TensorProxy:  # fmt: skip
    """(softmax(a) - one_hot(target)) times each row's share of ``g``; zero on ignored rows."""
    x = to_dtype(a, lse.dtype)
    kept = ew.ne(target, ignore_index)
    classes = prims.iota(a.shape[1], start=0, step=1, device=a.device, dtype=target.dtype)
    one_hot = to_dtype(ew.eq(shape.unsqueeze(classes, 0), shape.unsqueeze(target, 1)), x.dtype)
    g = to_dtype(g, x.dtype)
    if reduction == "mean":
        g = ew.true_divide(g, reductions.sum(to_dtype(kept, x.dtype)))
    row_share = ew.where(kept, g, 0.0)
    probabilities = ew.exp(ew.sub(x, shape.unsqueeze(lse, 1)))
    return to_dtype(ew.mul(ew.sub(probabilities, one_hot), shape.unsqueeze(row_share, 1)), a.dtype)


cross_entropy_backward = make_composite("cross_entropy_backward", _cross_entropy_backward)


@register_vjp(cross_entropy_with_lse)
def _cross_entropy_with_lse_vjp(g: Any, a: TensorProxy, target: TensorProxy, ignore_index: int, reduction: str, *,
                                out: tuple) -> tuple:  # fmt: skip
    if g[0] is None:
        return (None,) * 4
    return (cross_entropy_backward(g[0], a, target, out[1], ignore_index, reduction), None, None, None)


def _smoothing_loss(log_probabilities: TensorProxy, target: TensorProxy, weight: TensorProxy | None,
                    ignore_index: int, class_dim: int, reduction: str) -> TensorProxy:  # fmt: skip
    """Label smoothing's uniform part: minus the (class-weighted) sum of log-probabilities over the
    classes, per position; its mean divides by the same total weight as nll_loss's."""
    products = log_probabilities
    if weight is not None:
        weight_shape = tuple(weight.shape[0] if d == class_dim else 1 for d in range(products.ndim))
        products = ew.mul(products, shape.reshape(weight, weight_shape))
    kept = ew.ne(target, ignore_index)
    losses = ew.where(kept, ew.neg(reductions.sum(products, class_dim)), 0.0)
    divisor = (
        reductions.sum(_class_weights(weight, target, kept, log_probabilities))
        if reduction == "mean"
        else None
    )
    return reduce_loss(losses, reduction, divisor)


def _cross_entropy_with_probabilities(log_probabilities: TensorProxy, target: TensorProxy, weight: TensorProxy | None,
                                      class_dim: int, reduction: str) -> TensorProxy:  # fmt: skip
    """Class-probability targets; the mean is over all positions (the numel divided by the classes)."""
    products = ew.mul(log_probabilities, target)
    if weight is not None:
        weight_shape = tuple(weight.shape[0] if d == class_dim else 1 for d in range(products.ndim))
        products = ew.mul(products, shape.reshape(weight, weight_shape))
    losses = ew.neg(reductions.sum(products, class_dim))
    classes = log_probabilities.shape[class_dim]
    divisor = float(log_probabilities.numel() // classes) if classes else 0.0
    return reduce_loss(losses, reduction, divisor if reduction == "mean" else None)
