"""Activation functions of ``torch.nn.functional``, each a short elementwise decomposition.

Half-precision inputs are computed in float32 and rounded once at the end, as PyTorch's kernels do.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import shape
from thunder.torch.nn import no_inplace, sigmoid, softmax
from thunder.torch.nn_common import in_float, narrow
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, to_dtype

ELEMENTWISE = frozenset({"elementwise"})

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_core(x: TensorProxy, alpha: float, scale: float, input_scale: float) -> TensorProxy:
    negative = ew.mul(ew.expm1(ew.mul(x, input_scale)), alpha * scale)
    return ew.where(ew.gt(x, 0), ew.mul(x, scale), negative)


@torchsymbol(F.elu, tags=ELEMENTWISE)
def elu(input: TensorProxy, alpha: float = 1.0, inplace: bool = False) -> TensorProxy:
    no_inplace("elu", inplace)
    return in_float(input, lambda x: _elu_core(x, alpha, 1.0, 1.0))


@torchsymbol(F.celu, torch.celu, tags=ELEMENTWISE)
def celu(input: TensorProxy, alpha: float = 1.0, inplace: bool = False) -> TensorProxy:
    no_inplace("celu", inplace)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return in_float(input, lambda x: _elu_core(x, alpha, 1.0, 1.0 / alpha))


@torchsymbol(F.selu, torch.selu, tags=ELEMENTWISE)
def selu(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("selu", inplace)
    return in_float(input, lambda x: _elu_core(x, _SELU_ALPHA, _SELU_SCALE, 1.0))


@torchsymbol(F.leaky_relu, tags=ELEMENTWISE)
def leaky_relu(input: TensorProxy, negative_slope: float = 0.01, inplace: bool = False) -> TensorProxy:
    no_inplace("leaky_relu", inplace)
    return in_float(input, lambda x: ew.where(ew.gt(x, 0), x, ew.mul(x, negative_slope)))


def _clamp(x: TensorProxy, low: float, high: float) -> TensorProxy:
    """Clamp that keeps NaN, as torch.clamp does."""
    return ew.where(ew.lt(x, low), low, ew.where(ew.gt(x, high), high, x))


@torchsymbol(F.hardtanh, tags=ELEMENTWISE)
def hardtanh(
    input: TensorProxy, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> TensorProxy:
    no_inplace("hardtanh", inplace)
    if input.dtype is dtypes.bool8:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        min_val, max_val = int(min_val), int(max_val)
    return _clamp(input, min_val, max_val)


@torchsymbol(F.relu6, tags=ELEMENTWISE)
def relu6(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("relu6", inplace)
    return hardtanh(input, 0.0, 6.0)


@torchsymbol(F.hardsigmoid, tags=ELEMENTWISE)
def hardsigmoid(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("hardsigmoid", inplace)
    return in_float(input, lambda x: ew.true_divide(_clamp(ew.add(x, 3.0), 0.0, 6.0), 6.0))


@torchsymbol(F.hardswish, tags=ELEMENTWISE)
def hardswish(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("hardswish", inplace)
    return in_float(input, lambda x: ew.mul(x, ew.true_divide(_clamp(ew.add(x, 3.0), 0.0, 6.0), 6.0)))


@torchsymbol(F.hardshrink, torch.Tensor.hardshrink, method="hardshrink", tags=ELEMENTWISE)
def hardshrink(input: TensorProxy, lambd: float = 0.5) -> TensorProxy:
    inside = ew.bitwise_and(ew.ge(input, -lambd), ew.le(input, lambd))
    return ew.where(inside, 0.0, input)


@torchsymbol(F.softshrink, tags=ELEMENTWISE)
def softshrink(input: TensorProxy, lambd: float = 0.5) -> TensorProxy:
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")

    def body(x: TensorProxy) -> TensorProxy:
        shrunk = ew.where(
            ew.gt(x, lambd), ew.sub(x, lambd), ew.where(ew.lt(x, -lambd), ew.add(x, lambd), 0.0)
        )
        return ew.where(ew.isnan(x), x, shrunk)

    return in_float(input, body)


@torchsymbol(F.tanhshrink, tags=ELEMENTWISE)
def tanhshrink(input: TensorProxy) -> TensorProxy:
    return in_float(input, lambda x: ew.sub(x, ew.tanh(x)))


def _softplus(x: TensorProxy, beta: float, threshold: float) -> TensorProxy:
    scaled = ew.mul(x, beta) if beta != 1 else x
    smooth = ew.log1p(ew.exp(scaled))
    smooth = ew.true_divide(smooth, beta) if beta != 1 else smooth
    return ew.where(ew.gt(scaled, threshold), x, smooth)


@torchsymbol(F.softplus, tags=ELEMENTWISE)
def softplus(input: TensorProxy, beta: float = 1.0, threshold: float = 20.0) -> TensorProxy:
    return in_float(input, lambda x: _softplus(x, beta, threshold))


@torchsymbol(F.softsign, tags=ELEMENTWISE)
def softsign(input: TensorProxy) -> TensorProxy:
    return in_float(input, lambda x: ew.true_divide(x, ew.add(ew.abs(x), 1)))


@torchsymbol(F.logsigmoid, tags=ELEMENTWISE)
def logsigmoid(input: TensorProxy) -> TensorProxy:
    def body(x: TensorProxy) -> TensorProxy:
        return ew.sub(ew.where(ew.lt(x, 0), x, 0.0), ew.log1p(ew.exp(ew.neg(ew.abs(x)))))

    return in_float(input, body)


@torchsymbol(F.mish, tags=ELEMENTWISE)
def mish(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("mish", inplace)
    return in_float(input, lambda x: ew.mul(x, ew.tanh(_softplus(x, 1.0, 20.0))))


@torchsymbol(F.silu, tags=ELEMENTWISE)
def silu(input: TensorProxy, inplace: bool = False) -> TensorProxy:
    no_inplace("silu", inplace)
    return in_float(input, lambda x: ew.mul(x, sigmoid(x)))


def _silu_backward(g: TensorProxy, a: TensorProxy) -> TensorProxy:
    """``g`` times silu's derivative ``s * (1 + x * (1 - s))`` at ``a`` (``s = sigmoid(x)``), in ``a``'s dtype."""

    def body(x: TensorProxy) -> TensorProxy:
        s = sigmoid(x)
        derivative = ew.mul(s, ew.add(ew.mul(x, ew.sub(1.0, s)), 1.0))
        return ew.mul(to_dtype(g, x.dtype), derivative)

    return in_float(a, body)


# One symbol, so that the torch executor runs PyTorch's silu_backward kernel (SwiGLU MLPs apply silu
# to their widest activation: its decomposition was eight float32 kernels in the backward).
silu_backward = make_composite("silu_backward", _silu_backward, tags=ELEMENTWISE)


@register_vjp(silu)
def _silu_vjp(g: Any, a: TensorProxy, inplace: bool, *, out: TensorProxy) -> tuple:
    return (None if g is None else silu_backward(g, a), None)


@torchsymbol(F.threshold, torch.threshold, tags=ELEMENTWISE)
def threshold(input: TensorProxy, threshold: float, value: float, inplace: bool = False) -> TensorProxy:
    no_inplace("threshold", inplace)
    return ew.where(ew.gt(input, threshold), input, value)


@torchsymbol(F.rrelu, torch.rrelu, tags=ELEMENTWISE)
def rrelu(input: TensorProxy, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, training: bool = False,
          inplace: bool = False) -> TensorProxy:  # fmt: skip
    no_inplace("rrelu", inplace)
    if training:
        raise NotImplementedError("rrelu with training=True (random slopes) is not supported by thunder yet")
    return leaky_relu(input, (lower + upper) / 2)


@torchsymbol(F.prelu, torch.prelu, torch.Tensor.prelu, method="prelu")
def prelu(input: TensorProxy, weight: TensorProxy) -> TensorProxy:
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() not in (1, channels):
        raise RuntimeError(
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {weight.numel()} "
            f"and channel size = {channels}."
        )
    if weight.ndim > 1:
        raise RuntimeError(
            f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}"
        )
    if weight.numel() == 1 or input.ndim < 2:
        slope = shape.reshape(weight, ())
    else:
        slope = shape.reshape(weight, (channels,) + (1,) * (input.ndim - 2))
    return ew.where(ew.gt(input, 0), input, ew.mul(slope, input))


@torchsymbol(F.glu)
def glu(input: TensorProxy, dim: int = -1) -> TensorProxy:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = canonical_dim(dim, input.ndim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    half = input.shape[d] // 2
    return in_float(input, lambda x: ew.mul(narrow(x, d, 0, half), sigmoid(narrow(x, d, half, half))))


@torchsymbol(F.softmin)
def softmin(
    input: TensorProxy, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> TensorProxy:
    negated = ew.neg(to_dtype(input, dtypes.to_dtype(dtype)) if dtype is not None else input)
    return softmax(negated, dim, dtype=dtype)


@torchsymbol(torch.ops.aten._softmax_backward_data.default, torch.ops.aten._softmax_backward_data,
             name="softmax_backward_data")  # fmt: skip
def softmax_backward_data(grad: TensorProxy, out: TensorProxy, dim: int, input_dtype: Any) -> TensorProxy:
    """ATen's softmax gradient, ``out * (grad - sum(grad * out, dim))``, as ``torch._decomp`` writes it."""
    from thunder.torch.reductions import sum as sum_

    computation_dtype = dtypes.float32 if dtypes.is_low_precision(grad.dtype) else grad.dtype
    g, y = to_dtype(grad, computation_dtype), to_dtype(out, computation_dtype)
    d = canonical_dim(dim, grad.ndim)
    scaled = ew.mul(g, y)
    grad_input = ew.sub(scaled, ew.mul(y, sum_(scaled, d, keepdim=True)))
    return to_dtype(grad_input, dtypes.to_dtype(input_dtype) if input_dtype != grad.dtype else grad.dtype)


@torchsymbol(torch.ops.aten._safe_softmax.default, torch.ops.aten._safe_softmax, name="safe_softmax")
def safe_softmax(a: TensorProxy, dim: int, dtype: Any = None) -> TensorProxy:
    """softmax, with zeros (not NaNs) for slices that are all ``-inf`` (fully masked attention rows)."""
    from thunder.torch.reductions import all as all_

    out = softmax(a, dim, dtype=dtype)
    masked = all_(ew.eq(a, float("-inf")), canonical_dim(dim, a.ndim), keepdim=True)
    return ew.where(masked, 0, out)


@register_vjp(safe_softmax)
def _safe_softmax_vjp(g: Any, a: TensorProxy, dim: int, dtype: Any, *, out: TensorProxy) -> tuple:
    """ATen's rule, from the result: zero in fully masked slices (the decomposition's softmax is NaN there)."""
    if g is None:
        return (None, None, None)
    return (softmax_backward_data(g, out, dim, a.dtype), None, None)
