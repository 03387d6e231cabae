"""Normalizations: layer, RMS, group, batch and instance norm; normalize, local response norm,
cosine similarity and distances.

Statistics are computed in float32 for half-precision inputs (as PyTorch's kernels do) and the
result is rounded once. Gradient rules on layer/rms/group/batch norm recompute the statistics from
the saved input instead of differentiating the decomposition step by step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions, shape
from thunder.torch.grad import detach
from thunder.torch.nn_common import computation_dtype, narrow, select_positions
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, to_dtype


def _statistics(x: TensorProxy, dims: Sequence[int], eps: float) -> tuple[TensorProxy, TensorProxy]:
    """Mean and reciprocal standard deviation (biased variance) over ``dims``, kept as size-1 dims."""
    dims = tuple(dims)
    mean = reductions.mean(x, dims, keepdim=True)
    centered = ew.sub(x, mean)
    variance = reductions.mean(ew.mul(centered, centered), dims, keepdim=True)
    return mean, ew.rsqrt(ew.add(variance, eps))


def _affine(
    x: TensorProxy, weight: TensorProxy | None, bias: TensorProxy | None, param_shape: tuple[int, ...]
) -> TensorProxy:
    if weight is not None:
        x = ew.mul(x, shape.reshape(to_dtype(weight, x.dtype), param_shape))
    if bias is not None:
        x = ew.add(x, shape.reshape(to_dtype(bias, x.dtype), param_shape))
    return x


# ---------------------------------------------------------------------------------------------
# layer norm


def _check_normalized_shape(
    name: str, a: TensorProxy, normalized_shape: Sequence[int], *params: TensorProxy | None
) -> tuple[int, ...]:
    normalized = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(normalized) == 0:
        raise RuntimeError(f"{name}: Expected normalized_shape to be at least 1-dimensional")
    for p in params:
        if p is not None and p.shape != normalized:
            raise RuntimeError(
                f"{name}: Expected weight/bias to be of same shape as normalized_shape, but got {p.shape} and {normalized}"
            )
    if a.ndim < len(normalized) or a.shape[a.ndim - len(normalized) :] != normalized:
        raise RuntimeError(
            f"{name}: Given normalized_shape={list(normalized)}, expected input with shape [*, {', '.join(map(str, normalized))}], but got input of size {list(a.shape)}"
        )
    return normalized


@torchsymbol(F.layer_norm, torch.layer_norm)
def layer_norm(input: TensorProxy, normalized_shape: Sequence[int], weight: TensorProxy | None = None,
               bias: TensorProxy | None = None, eps: float = 1e-5) -> TensorProxy:  # fmt: skip
    normalized = _check_normalized_shape("layer_norm", input, normalized_shape, weight, bias)
    if input.numel() == 0:
        x = to_dtype(input, computation_dtype(input.dtype))
        return to_dtype(_affine(x, weight, bias, normalized), input.dtype)
    return layer_norm_with_statistics(input, normalized, weight, bias, eps)[0]


def _layer_norm_with_statistics(a: TensorProxy, normalized_shape: Sequence[int], weight: TensorProxy | None,
                       bias: TensorProxy | None, eps: float) -> tuple[TensorProxy, TensorProxy, TensorProxy]:  # fmt: skip
    """Layer norm's output with its mean and reciprocal standard deviation (computation dtype, the
    normalized dims kept as size 1): what ``layer_norm_backward`` reads instead of recomputing."""
    x = to_dtype(a, computation_dtype(a.dtype))
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    mean, rstd = _statistics(x, dims, eps)
    out = to_dtype(_affine(ew.mul(ew.sub(x, mean), rstd), weight, bias, tuple(normalized_shape)), a.dtype)
    return out, mean, rstd


layer_norm_with_statistics = make_composite("layer_norm_with_statistics", _layer_norm_with_statistics)


def _layer_norm_backward(g: TensorProxy, a: TensorProxy, normalized_shape: Sequence[int], mean: TensorProxy,
                                rstd: TensorProxy, weight: TensorProxy | None, bias: TensorProxy | None,
                                output_mask: Sequence[bool], addend: TensorProxy | None = None) -> tuple:  # fmt: skip
    """Gradients of input, weight and bias (``None`` where ``output_mask`` says not wanted); ``addend``
    (a residual connection's other gradient, ``core/transforms/norm_backward_adds.py``) is added to
    the input's."""
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    batch_dims = tuple(range(a.ndim - len(normalized_shape)))
    x = to_dtype(a, computation_dtype(a.dtype))
    g = to_dtype(g, x.dtype)
    normalized_x = ew.mul(ew.sub(x, mean), rstd)
    dy = ew.mul(g, to_dtype(weight, x.dtype)) if weight is not None else g
    grad_a = (
        to_dtype(_normalization_input_grad(dy, normalized_x, rstd, dims), a.dtype) if output_mask[0] else None
    )
    grad_a = _plus(addend, grad_a)
    grad_weight = _param_grad(ew.mul(g, normalized_x), batch_dims, weight) if output_mask[1] else None
    grad_bias = _param_grad(g, batch_dims, bias) if output_mask[2] else None
    return grad_a, grad_weight, grad_bias


layer_norm_backward = make_composite("layer_norm_backward", _layer_norm_backward)


@register_vjp(layer_norm_with_statistics)
def _layer_norm_with_statistics_vjp(g: Any, a: TensorProxy, normalized_shape: Any, weight: TensorProxy | None,
                           bias: TensorProxy | None, eps: float, *, out: tuple) -> tuple:  # fmt: skip
    if g[0] is None:  # mean and rstd are internal outputs: only the backward reads them
        return (None,) * 5
    _, mean, rstd = out
    output_mask = (
        a.requires_grad,
        weight is not None and weight.requires_grad,
        bias is not None and bias.requires_grad,
    )
    grads = layer_norm_backward(g[0], a, normalized_shape, mean, rstd, weight, bias, output_mask)
    return (grads[0], None, grads[1], grads[2], None)


def _plus(addend: TensorProxy | None, grad: TensorProxy | None) -> TensorProxy | None:
    """``addend + grad``, as autograd accumulates a residual connection's two gradients."""
    return grad if addend is None or grad is None else ew.add(addend, grad)


def _normalization_input_grad(
    dy: TensorProxy, normalized_x: TensorProxy, rstd: TensorProxy, dims: Sequence[int]
) -> TensorProxy:
    """d/dx of (x - mean) * rstd over ``dims``, applied to ``dy``."""
    mean_dy = reductions.mean(dy, tuple(dims), keepdim=True)
    mean_dy_x = reductions.mean(ew.mul(dy, normalized_x), tuple(dims), keepdim=True)
    return ew.mul(rstd, ew.sub(ew.sub(dy, mean_dy), ew.mul(normalized_x, mean_dy_x)))


def _param_grad(values: TensorProxy, dims: Sequence[int], param: TensorProxy | None) -> TensorProxy | None:
    if param is None or not param.requires_grad:
        return None
    summed = reductions.sum(values, tuple(dims)) if dims else values
    return to_dtype(shape.reshape(summed, param.shape), param.dtype)


# ---------------------------------------------------------------------------------------------
# RMS norm


@torchsymbol(F.rms_norm, torch.rms_norm)
def rms_norm(input: TensorProxy, normalized_shape: Sequence[int], weight: TensorProxy | None = None,
             eps: float | None = None) -> TensorProxy:  # fmt: skip
    normalized = _check_normalized_shape("rms_norm", input, normalized_shape, weight)
    return rms_norm_with_rstd(input, normalized, weight, eps)[0]


# How the weight meets the normalized row: "torch" (``F.rms_norm``) multiplies in float32 and rounds
# once; "llama" (Hugging Face's Llama, Mistral, Qwen, ... ``weight * normalized.to(x.dtype)``, found by
# ``core/transforms/rms_norms.py``) rounds the normalized row, then multiplies in the input's dtype.
RMS_NORM_WEIGHTINGS = ("torch", "llama")


def _rms_norm_with_rstd(a: TensorProxy, normalized_shape: Sequence[int], weight: TensorProxy | None,
                        eps: float | None, weighting: str = "torch") -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    """The RMS norm and its reciprocal root mean square (computation dtype, the normalized dims kept
    as size 1): what ``rms_norm_backward`` reads instead of recomputing. The ops are the user's, in
    ``weighting``'s order, so that the forward rounds as eager does."""
    if weighting not in RMS_NORM_WEIGHTINGS:
        raise ValueError(f"rms_norm_with_rstd's weighting is one of {RMS_NORM_WEIGHTINGS}, got {weighting!r}")
    x = to_dtype(a, _rms_computation_dtype(a, weighting))
    rstd = _rms_reciprocal(x, _normalized_dims(a, normalized_shape), a.dtype, eps)
    result = ew.mul(x, rstd)
    if weight is None:
        return to_dtype(result, a.dtype), rstd
    if weighting == "llama":
        return ew.mul(to_dtype(result, a.dtype), weight), rstd
    return to_dtype(ew.mul(result, to_dtype(weight, result.dtype)), a.dtype), rstd


rms_norm_with_rstd = make_composite("rms_norm_with_rstd", _rms_norm_with_rstd)


def _rms_computation_dtype(a: TensorProxy, weighting: str) -> dtypes.dtype:
    """Llama's norm computes in float32 whatever the input (``x.to(torch.float32)``, a float64 input
    included); ``F.rms_norm`` in float32 for half precision, else in the input's dtype."""
    return dtypes.float32 if weighting == "llama" else computation_dtype(a.dtype)


def _normalized_dims(a: TensorProxy, normalized_shape: Sequence[int]) -> tuple[int, ...]:
    count = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return tuple(range(a.ndim - count, a.ndim))


def _rms_reciprocal(
    x: TensorProxy, dims: tuple[int, ...], dtype: dtypes.dtype, eps: float | None
) -> TensorProxy:
    if eps is None:
        eps = torch.finfo(dtype.torch_dtype).eps
    return ew.rsqrt(ew.add(reductions.mean(ew.mul(x, x), dims, keepdim=True), eps))


def _rms_norm_backward(g: TensorProxy, a: TensorProxy, normalized_shape: Sequence[int], rstd: TensorProxy,
                       weight: TensorProxy | None, output_mask: Sequence[bool], weighting: str = "torch",
                       addend: TensorProxy | None = None) -> tuple[TensorProxy | None, TensorProxy | None]:  # fmt: skip
    """Gradients of input and weight (``None`` where ``output_mask`` says not wanted), rounded where
    ``weighting``'s forward rounds, as eager's autograd of those ops computes them; ``addend`` is
    added to the input's (``core/transforms/norm_backward_adds.py``)."""
    dims = _normalized_dims(a, normalized_shape)
    x = to_dtype(a, _rms_computation_dtype(a, weighting))
    normalized_x = ew.mul(x, rstd)
    if weight is not None and weighting == "llama":  # d(weight * rounded) in the input's dtype
        dy = to_dtype(ew.mul(g, weight), x.dtype)
        weighted_g = ew.mul(g, to_dtype(normalized_x, a.dtype))
    else:
        g = to_dtype(g, x.dtype)
        dy = ew.mul(g, to_dtype(weight, x.dtype)) if weight is not None else g
        weighted_g = ew.mul(g, normalized_x)
    grad_a = None
    if output_mask[0]:
        mean_dy_x = reductions.mean(ew.mul(dy, normalized_x), dims, keepdim=True)
        grad_a = _plus(addend, to_dtype(ew.mul(rstd, ew.sub(dy, ew.mul(normalized_x, mean_dy_x))), a.dtype))
    batch_dims = tuple(range(a.ndim - len(dims)))
    grad_weight = _param_grad(weighted_g, batch_dims, weight) if output_mask[1] else None
    return grad_a, grad_weight


rms_norm_backward = make_composite("rms_norm_backward", _rms_norm_backward)


@register_vjp(rms_norm_with_rstd)
def _rms_norm_with_rstd_vjp(g: Any, a: TensorProxy, normalized_shape: Any, weight: TensorProxy | None,
                            eps: float | None, weighting: str = "torch", *, out: tuple) -> tuple:  # fmt: skip
    if g[0] is None:  # rstd is an internal output: only the backward reads it
        return (None,) * 5
    output_mask = (a.requires_grad, weight is not None and weight.requires_grad)
    grad_a, grad_weight = rms_norm_backward(g[0], a, normalized_shape, out[1], weight, output_mask, weighting)
    return (grad_a, None, grad_weight, None, None)


# ---------------------------------------------------------------------------------------------
# group norm


@torchsymbol(F.group_norm, torch.group_norm)
def group_norm(input: TensorProxy, num_groups: int, weight: TensorProxy | None = None, bias: TensorProxy | None = None,
               eps: float = 1e-5) -> TensorProxy:  # fmt: skip
    grouped, param_shape = _group_shape(input, num_groups, weight, bias)
    x = to_dtype(input, computation_dtype(input.dtype))
    if input.numel() == 0:
        return to_dtype(_affine(x, weight, bias, param_shape), input.dtype)
    xg = shape.reshape(x, grouped)
    mean, rstd = _statistics(xg, (2,), eps)
    normalized = shape.reshape(ew.mul(ew.sub(xg, mean), rstd), input.shape)
    return to_dtype(_affine(normalized, weight, bias, param_shape), input.dtype)


def _group_shape(
    a: TensorProxy, num_groups: int, weight: TensorProxy | None, bias: TensorProxy | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if a.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {a.ndim}")
    channels = a.shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of shape {list(a.shape)} and num_groups={num_groups}"
        )
    for p in (weight, bias):
        if p is not None and (p.ndim != 1 or p.shape[0] != channels):
            raise RuntimeError(
                f"Expected weight to be a vector of size equal to the number of channels in input, but got weight of shape {list(p.shape)} and input of shape {list(a.shape)}"
            )
    param_shape = (channels,) + (1,) * (a.ndim - 2)
    return (a.shape[0], num_groups, a.numel() // max(a.shape[0] * num_groups, 1)), param_shape


@register_vjp(group_norm)
def _group_norm_vjp(g: Any, a: TensorProxy, num_groups: int, weight: TensorProxy | None, bias: TensorProxy | None,
                    eps: float, *, out: TensorProxy) -> tuple:  # fmt: skip
    if g is None:
        return (None,) * 5
    grouped, param_shape = _group_shape(a, num_groups, weight, bias)
    x = shape.reshape(to_dtype(a, computation_dtype(a.dtype)), grouped)
    g = to_dtype(g, x.dtype)
    mean, rstd = _statistics(x, (2,), eps)
    normalized_x = ew.mul(ew.sub(x, mean), rstd)
    dy = ew.mul(g, shape.reshape(to_dtype(weight, x.dtype), param_shape)) if weight is not None else g
    grad_a = shape.reshape(
        _normalization_input_grad(shape.reshape(dy, grouped), normalized_x, rstd, (2,)), a.shape
    )
    param_dims = (0,) + tuple(range(2, a.ndim))
    normalized_full = shape.reshape(normalized_x, a.shape)
    grad_weight = _param_grad(ew.mul(g, normalized_full), param_dims, weight)
    grad_bias = _param_grad(g, param_dims, bias)
    return (to_dtype(grad_a, a.dtype), None, grad_weight, grad_bias, None)


# ---------------------------------------------------------------------------------------------
# batch norm and instance norm


def _channel_shape(a: TensorProxy) -> tuple[int, ...]:
    return (a.shape[1],) + (1,) * (a.ndim - 2)


@torchsymbol(F.batch_norm)
def batch_norm(input: TensorProxy, running_mean: TensorProxy | None, running_var: TensorProxy | None,
               weight: TensorProxy | None = None, bias: TensorProxy | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> TensorProxy:  # fmt: skip
    """The normalized output. In training mode eager also updates the running statistics in place;
    ``batch_norm_running_stats`` gives their new values for the caller to write back."""
    if input.ndim < 2:
        if input.ndim == 1 and input.numel() == 0:  # eager accepts an empty vector and returns it
            return ew.mul(input, 1)
        raise RuntimeError(f"batch_norm: expected at least 2D input (got {input.ndim}D input)")
    channels = input.shape[1]
    for p in (running_mean, running_var, weight, bias):
        if p is not None and p.numel() != channels:
            raise RuntimeError(
                f"batch_norm: expected a tensor of {channels} elements per channel, got {list(p.shape)}"
            )
    x = to_dtype(input, computation_dtype(input.dtype))
    reduced = (0,) + tuple(range(2, input.ndim))
    if training:
        if input.shape[0] * math.prod(input.shape[2:]) == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {list(input.shape)}"
            )
        mean, rstd = _statistics(x, reduced, eps)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in evaluation mode")
        param_shape = _channel_shape(input)
        mean = shape.reshape(to_dtype(running_mean, x.dtype), param_shape)
        rstd = ew.rsqrt(ew.add(shape.reshape(to_dtype(running_var, x.dtype), param_shape), eps))
    return to_dtype(_affine(ew.mul(ew.sub(x, mean), rstd), weight, bias, _channel_shape(input)), input.dtype)


def batch_norm_running_stats(a: TensorProxy, running_mean: TensorProxy, running_var: TensorProxy,
                             momentum: float | None = 0.1) -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    """The running mean and variance that ``F.batch_norm(..., training=True)`` writes in place.

    The batch variance here is unbiased (as eager uses for the running estimate). ``momentum`` may be
    a number read from a tensor (``tensor_numbers.TensorNumber``): BatchNorm's cumulative average
    (``momentum=None`` on the module) passes ``1 / float(num_batches_tracked)``.
    """
    if momentum is None:
        raise RuntimeError(
            "batch_norm: momentum=None is the module's cumulative average; F.batch_norm needs a number"
        )
    from thunder.torch.tensor_numbers import tensor_of

    momentum = tensor_of(momentum)
    if a.numel() == 0:  # an empty batch leaves the running statistics as they are (eager returns early)
        return running_mean, running_var
    reduced = (0,) + tuple(range(2, a.ndim))
    x = to_dtype(a, computation_dtype(a.dtype))
    count = a.numel() // a.shape[1]
    batch_mean = reductions.mean(x, reduced)
    batch_var = reductions.var(x, reduced, correction=1) if count > 1 else ew.mul(batch_mean, float("nan"))
    keep = ew.sub(1, momentum) if isinstance(momentum, TensorProxy) else 1 - momentum
    new_mean = ew.add(ew.mul(to_dtype(running_mean, x.dtype), keep), ew.mul(batch_mean, momentum))
    new_var = ew.add(ew.mul(to_dtype(running_var, x.dtype), keep), ew.mul(batch_var, momentum))
    return to_dtype(new_mean, running_mean.dtype), to_dtype(new_var, running_var.dtype)


@register_vjp(batch_norm)
def _batch_norm_vjp(g: Any, a: TensorProxy, running_mean: Any, running_var: Any, weight: TensorProxy | None,
                    bias: TensorProxy | None, training: bool, momentum: float, eps: float, *, out: TensorProxy) -> tuple:  # fmt: skip
    if g is None:
        return (None,) * 8
    if a.ndim < 2:  # the empty vector eager passes through
        return (g, None, None, None, None, None, None, None)
    x = to_dtype(a, computation_dtype(a.dtype))
    g = to_dtype(g, x.dtype)
    reduced = (0,) + tuple(range(2, a.ndim))
    param_shape = _channel_shape(a)
    if training:
        mean, rstd = _statistics(x, reduced, eps)
    else:
        mean = shape.reshape(to_dtype(running_mean, x.dtype), param_shape)
        rstd = ew.rsqrt(ew.add(shape.reshape(to_dtype(running_var, x.dtype), param_shape), eps))
    normalized_x = ew.mul(ew.sub(x, mean), rstd)
    dy = ew.mul(g, shape.reshape(to_dtype(weight, x.dtype), param_shape)) if weight is not None else g
    grad_a = _normalization_input_grad(dy, normalized_x, rstd, reduced) if training else ew.mul(dy, rstd)
    grad_weight = _param_grad(ew.mul(g, normalized_x), reduced, weight)
    grad_bias = _param_grad(g, reduced, bias)
    return (to_dtype(grad_a, a.dtype), None, None, grad_weight, grad_bias, None, None, None)


@torchsymbol(F.instance_norm)
def instance_norm(input: TensorProxy, running_mean: TensorProxy | None = None, running_var: TensorProxy | None = None,
                  weight: TensorProxy | None = None, bias: TensorProxy | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> TensorProxy:  # fmt: skip
    """Per-sample, per-channel normalization; like batch_norm, running statistics are not updated here."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected at least 3D input (got {input.ndim}D input)")
    if use_input_stats and math.prod(input.shape[2:]) <= 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {list(input.shape)}"
        )
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    x = to_dtype(input, computation_dtype(input.dtype))
    mean, rstd = _statistics(x, tuple(range(2, input.ndim)), eps)
    return to_dtype(_affine(ew.mul(ew.sub(x, mean), rstd), weight, bias, _channel_shape(input)), input.dtype)


# ---------------------------------------------------------------------------------------------
# local response norm, normalize, cosine similarity, distances


@torchsymbol(F.local_response_norm)
def local_response_norm(
    input: TensorProxy, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> TensorProxy:
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:  # eager returns the input itself
        return ew.mul(input, 1)
    x = to_dtype(input, computation_dtype(input.dtype))
    squares = ew.mul(x, x)
    channels = input.shape[1]
    low, high = size // 2, (size - 1) // 2
    config = [(0, 0, 0)] * input.ndim
    config[1] = (low, high, 0)
    padded = prims.pad(squares, 0.0, config)
    window = narrow(padded, 1, 0, channels)
    for offset in range(1, size):
        window = ew.add(window, narrow(padded, 1, offset, channels))
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        # eager averages integer squares with an integer pool (truncating), then divides in float
        average = ew.div(window, size, rounding_mode="trunc")
        return ew.true_divide(x, ew.pow(ew.add(ew.mul(average, alpha), k), beta))
    scale = ew.add(ew.mul(ew.true_divide(window, float(size)), alpha), k)
    return to_dtype(ew.true_divide(x, ew.pow(scale, beta)), input.dtype)


def vector_norm(x: TensorProxy, p: float, dims: Sequence[int], keepdim: bool = False) -> TensorProxy:
    """The p-norm over ``dims`` of a floating tensor (computed in its own dtype)."""
    dims = tuple(dims)
    magnitude = ew.abs(x)
    if p == 2:
        return ew.sqrt(reductions.sum(ew.mul(x, x), dims, keepdim=keepdim))
    if p == 1:
        return reductions.sum(magnitude, dims, keepdim=keepdim)
    if p == math.inf:
        return (
            reductions.amax(magnitude, dims, keepdim=keepdim)
            if x.numel()
            else reductions.sum(magnitude, dims, keepdim=keepdim)
        )
    if p == -math.inf:
        return reductions.amin(magnitude, dims, keepdim=keepdim)
    if p == 0:
        return reductions.sum(to_dtype(ew.ne(x, 0), x.dtype), dims, keepdim=keepdim)
    return ew.pow(reductions.sum(ew.pow(magnitude, p), dims, keepdim=keepdim), 1.0 / p)


@torchsymbol(F.normalize)
def normalize(
    input: TensorProxy, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> TensorProxy:
    if out is not None:
        raise NotImplementedError("normalize with out= is not supported by thunder yet")
    x = to_dtype(input, computation_dtype(input.dtype))
    d = canonical_dim(dim, input.ndim)
    norm = vector_norm(x, p, (d,) if input.ndim else (), keepdim=True)
    denominator = ew.where(ew.lt(norm, eps), eps, norm)
    return to_dtype(ew.true_divide(x, denominator), input.dtype)


@torchsymbol(F.cosine_similarity, torch.cosine_similarity)
def cosine_similarity(x1: TensorProxy, x2: TensorProxy, dim: int = 1, eps: float = 1e-8) -> TensorProxy:
    from thunder.core.promotion import broadcast_shapes, result_dtype

    dtype = result_dtype(x1, x2)
    target = broadcast_shapes(x1.shape, x2.shape)
    d = canonical_dim(dim, len(target))
    a = to_dtype(
        prims.broadcast_in_dim(x1, target, tuple(range(len(target) - x1.ndim, len(target))))
        if x1.shape != target
        else x1,
        computation_dtype(dtype),
    )
    b = to_dtype(
        prims.broadcast_in_dim(x2, target, tuple(range(len(target) - x2.ndim, len(target))))
        if x2.shape != target
        else x2,
        computation_dtype(dtype),
    )
    a_norm = vector_norm(a, 2, (d,), keepdim=True)
    b_norm = vector_norm(b, 2, (d,), keepdim=True)
    a = ew.true_divide(a, ew.where(ew.lt(a_norm, eps), eps, a_norm))
    b = ew.true_divide(b, ew.where(ew.lt(b_norm, eps), eps, b_norm))
    return to_dtype(reductions.sum(ew.mul(a, b), d), dtype)


@torchsymbol(F.pairwise_distance, torch.pairwise_distance)
def pairwise_distance(
    x1: TensorProxy, x2: TensorProxy, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> TensorProxy:
    ndim = max(x1.ndim, x2.ndim)
    difference = ew.add(ew.sub(x1, x2), eps)
    if ndim == 0:
        return ew.abs(difference) if p != 0 else to_dtype(ew.ne(difference, 0), difference.dtype)
    x = to_dtype(difference, computation_dtype(difference.dtype))
    return to_dtype(vector_norm(x, p, (ndim - 1,), keepdim=keepdim), difference.dtype)


@torchsymbol(torch.native_layer_norm)
def native_layer_norm(input: TensorProxy, normalized_shape: Sequence[int], weight: TensorProxy | None,
                      bias: TensorProxy | None, eps: float) -> tuple[TensorProxy, TensorProxy, TensorProxy]:  # fmt: skip
    """layer_norm that also returns the mean and reciprocal standard deviation it used."""
    normalized = _check_normalized_shape("native_layer_norm", input, normalized_shape, weight, bias)
    x = to_dtype(input, computation_dtype(input.dtype))
    dims = tuple(range(input.ndim - len(normalized), input.ndim))
    mean, rstd = _statistics(x, dims, eps)
    out = to_dtype(_affine(ew.mul(ew.sub(x, mean), rstd), weight, bias, normalized), input.dtype)
    # the statistics are outputs without gradients in eager
    return out, detach(to_dtype(mean, input.dtype)), detach(to_dtype(rstd, input.dtype))


@torchsymbol(torch.native_group_norm)
def native_group_norm(input: TensorProxy, weight: TensorProxy | None, bias: TensorProxy | None, N: int, C: int,
                      HxW: int, group: int, eps: float) -> tuple[TensorProxy, TensorProxy, TensorProxy]:  # fmt: skip
    """group_norm that also returns the per-(sample, group) mean and reciprocal standard deviation."""
    if (N, C, HxW) != (input.shape[0], input.shape[1], math.prod(input.shape[2:])):
        raise RuntimeError(
            f"native_group_norm: N={N}, C={C}, HxW={HxW} do not describe an input of shape {list(input.shape)}"
        )
    grouped, param_shape = _group_shape(input, group, weight, bias)
    xg = shape.reshape(to_dtype(input, computation_dtype(input.dtype)), grouped)
    mean, rstd = _statistics(xg, (2,), eps)
    normalized = shape.reshape(ew.mul(ew.sub(xg, mean), rstd), input.shape)
    out = to_dtype(_affine(normalized, weight, bias, param_shape), input.dtype)
    stats_shape = (input.shape[0], group)
    return (
        out,
        to_dtype(shape.reshape(mean, stats_shape), input.dtype),
        to_dtype(shape.reshape(rstd, stats_shape), input.dtype),
    )


def _check_p_norm(name: str, p: float) -> None:
    if p < 0:
        raise RuntimeError(f"{name} only supports non-negative p values")


@torchsymbol(F.pdist, torch.pdist)
def pdist(input: TensorProxy, p: float = 2.0) -> TensorProxy:
    """Distances between every pair of rows i < j, in row-major order of the pairs."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    _check_p_norm("pdist", p)
    rows = input.shape[0]
    first = [i for i in range(rows) for _ in range(i + 1, rows)]
    second = [j for i in range(rows) for j in range(i + 1, rows)]
    if not first:
        return prims.full((0,), 0.0, device=input.device, dtype=input.dtype)
    x = to_dtype(input, computation_dtype(input.dtype))
    difference = ew.sub(select_positions(x, 0, first), select_positions(x, 0, second))
    return to_dtype(vector_norm(difference, p, (1,)), input.dtype)


@torchsymbol(torch.cdist)
def cdist(x1: TensorProxy, x2: TensorProxy, p: float = 2.0, compute_mode: str | None = None) -> TensorProxy:
    """Batched distances between the rows of x1 and x2. For p=2 eager may use the matrix-product
    expansion |a|^2 - 2 a.b + |b|^2 (by ``compute_mode`` and size); so does this."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"cdist: X1 and X2 must have the same number of columns, got shapes {list(x1.shape)} and {list(x2.shape)}"
        )
    _check_p_norm("cdist", p)
    if compute_mode not in (
        None,
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    a, b = to_dtype(x1, computation_dtype(x1.dtype)), to_dtype(x2, computation_dtype(x2.dtype))
    rows, columns = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (
        compute_mode == "use_mm_for_euclid_dist"
        or (compute_mode in (None, "use_mm_for_euclid_dist_if_necessary") and (rows > 25 or columns > 25))
    )
    if use_mm:
        a_norm = reductions.sum(ew.mul(a, a), -1, keepdim=True)
        b_norm = shape.transpose(reductions.sum(ew.mul(b, b), -1, keepdim=True), -2, -1)
        products = prims.matmul(*_batch_broadcast(ew.mul(a, -2.0), shape.transpose(b, -2, -1)))
        squared = ew.add(ew.add(products, a_norm), b_norm)
        return to_dtype(ew.sqrt(ew.where(ew.lt(squared, 0.0), 0.0, squared)), x1.dtype)
    difference = ew.sub(shape.unsqueeze(a, -2), shape.unsqueeze(b, -3))
    return to_dtype(vector_norm(difference, p, (difference.ndim - 1,)), x1.dtype)


def _batch_broadcast(a: TensorProxy, b: TensorProxy) -> tuple[TensorProxy, TensorProxy]:
    from thunder.core.promotion import broadcast_shapes
    from thunder.torch.utils import expand_to

    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return expand_to(a, batch + a.shape[-2:]), expand_to(b, batch + b.shape[-2:])
