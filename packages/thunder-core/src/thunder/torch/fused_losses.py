"""A language model's last linear layer and its cross entropy as one symbol.

``F.cross_entropy(head(x).flatten(0, 1).float(), targets)`` materializes [N, V] logits (GPT-2:
16384 x 50304, 1.5 GiB in bf16, twice that after the upcast), saves them for the backward and
materializes their gradient too. ``transforms/fuse_linear_cross_entropy.py`` replaces that chain by
one of the symbols here, which an executor computes a block of rows at a time, so that only a block
of logits ever exists:

* ``linear_cross_entropy_loss``: the loss alone (nothing requires a gradient);
* ``linear_cross_entropy_with_grads``: the loss and, computed in the same pass for a unit gradient
  of the loss, the gradients of the input, the weight and the bias. Its gradient rule only scales
  them by the loss's incoming gradient, which the backward receives.

The decompositions are the plain math (linear, optional upcast to float32, cross entropy), so every
executor can run them. Only class-index targets with reduction "mean" or "sum", no class weights
and no label smoothing are fused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions, shape
from thunder.torch.nn import cross_entropy_backward, cross_entropy_with_lse, linear
from thunder.torch.utils import to_dtype

__all__ = ["linear_cross_entropy_loss", "linear_cross_entropy_with_grads", "FUSED_REDUCTIONS"]

FUSED_REDUCTIONS = ("mean", "sum")


def _logits(x: TensorProxy, weight: TensorProxy, bias: TensorProxy | None, upcast: bool) -> TensorProxy:
    """The [N, V] logits of ``x`` [..., d] (rows flattened), in float32 when ``upcast``."""
    rows = prims.reshape(x, (x.numel() // x.shape[-1], x.shape[-1])) if x.ndim != 2 else x
    logits = linear(rows, weight, bias)
    return to_dtype(logits, dtypes.float32) if upcast else logits


def _linear_cross_entropy_loss(x: TensorProxy, weight: TensorProxy, bias: TensorProxy | None, target: TensorProxy,
                               ignore_index: int, reduction: str, upcast: bool) -> TensorProxy:  # fmt: skip
    """``cross_entropy(linear(x, weight, bias) as [N, V] (.float() when upcast), target)``."""
    logits = _logits(x, weight, bias, upcast)
    return cross_entropy_with_lse(logits, target, ignore_index, reduction)[0]


linear_cross_entropy_loss = make_composite("linear_cross_entropy_loss", _linear_cross_entropy_loss)


def _linear_cross_entropy_with_grads(x: TensorProxy, weight: TensorProxy, bias: TensorProxy | None,
                                     target: TensorProxy, ignore_index: int, reduction: str, upcast: bool,
                                     wanted: Sequence[bool]) -> tuple:  # fmt: skip
    """The loss and the gradients of ``x``, ``weight`` and ``bias`` for a loss gradient of 1
    (``None`` where ``wanted`` says not wanted, or for a missing bias)."""
    logits = _logits(x, weight, bias, upcast)
    loss, lse = cross_entropy_with_lse(logits, target, ignore_index, reduction)
    one = prims.full((), 1.0, device=loss.device, dtype=loss.dtype)
    grad_logits = to_dtype(cross_entropy_backward(one, logits, target, lse, ignore_index, reduction), x.dtype)
    rows = prims.reshape(x, grad_logits.shape[:1] + x.shape[-1:]) if x.ndim != 2 else x
    grad_x = prims.reshape(prims.matmul(grad_logits, weight), x.shape) if wanted[0] else None
    grad_weight = prims.matmul(shape.transpose(grad_logits, 0, 1), rows) if wanted[1] else None
    grad_bias = None
    if bias is not None and wanted[2]:
        grad_bias = to_dtype(reductions.sum(to_dtype(grad_logits, dtypes.float32), 0), bias.dtype)
    return loss, grad_x, grad_weight, grad_bias


linear_cross_entropy_with_grads = make_composite(
    "linear_cross_entropy_with_grads", _linear_cross_entropy_with_grads
)


@register_vjp(linear_cross_entropy_with_grads)
def _linear_cross_entropy_with_grads_vjp(g: Any, x: TensorProxy, weight: TensorProxy, bias: TensorProxy | None,
                                         target: TensorProxy, ignore_index: int, reduction: str, upcast: bool,
                                         wanted: Sequence[bool], *, out: tuple) -> tuple:  # fmt: skip
    if g[0] is None:
        return (None,) * 8
    grads = tuple(None if grad is None else to_dtype(ew.mul(grad, g[0]), grad.dtype) for grad in out[1:])
    return (*grads, None, None, None, None, None)
