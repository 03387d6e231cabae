"""PyTorch's own fused kernels for the forward/backward pairs of the torch language.

The torch language routes training through symbol pairs whose forward returns what the backward
needs (``attention_with_lse`` and ``attention_backward``, ``layer_norm_with_statistics`` and
``layer_norm_backward``, ``rms_norm_with_rstd`` and ``rms_norm_backward``, ``cross_entropy_with_lse``
and ``cross_entropy_backward``,
``gelu_backward``, ``silu_backward``, ``relu_backward``, ``dropout_backward``, ``embedding_backward``). Their decompositions are the math; here the torch executor claims them as
single calls of the kernels PyTorch's autograd uses (flash attention, ``native_layer_norm``, ...),
so a compiled training step launches what eager launches, or fewer kernels, instead of dozens of
elementwise ones. Each function returns exactly the dtypes its symbol's decomposition declares.

Cross entropy of CUDA logits runs as the Triton kernels of ``triton/cross_entropy.py`` instead,
which read half-precision logits without a float32 copy; triton is imported only when CUDA logits
are met, so a machine without it runs the torch functions here.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import torch

import thunder.torch as ltorch
from thunder.core.executor import OperatorExecutor
from thunder.core.proxies import TensorProxy

__all__ = [
    "register_torch_kernels",
    "attention_with_lse",
    "attention_backward",
    "layer_norm_with_statistics",
    "layer_norm_backward",
    "rms_norm_backward",
    "gelu_backward",
    "silu_backward",
    "relu_backward",
    "dropout_backward",
    "embedding_backward",
    "cross_entropy_with_lse",
    "cross_entropy_backward",
    "triton_cross_entropy_with_lse",
    "triton_cross_entropy_backward",
]

_HALF = (torch.float16, torch.bfloat16)


def _computation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _HALF else dtype


def _to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t.to(dtype)`` without the call when the dtype is already right (2.6 us of a 10 us layer norm
    on our CPU machines, paid for each statistic in the forward and again in the backward)."""
    return t if t.dtype is dtype else t.to(dtype)


def _aten(name: str) -> Callable:
    """The default overload of ``torch.ops.aten.<name>`` as the C++ callable it wraps, for the kernels
    that torch's Python namespace does not bind: calling the op packet resolves the overload and goes
    through two Python frames (threshold_backward: 4.9-6.4 us a call against 2.7 on our CPU machines)."""
    overload = getattr(torch.ops.aten, name).default
    return getattr(overload, "_op", overload)


# Kernels without a binding in ``torch``'s namespace (those with one are called there: it parses
# arguments in C++ and skips the op registry's Python layers, e.g. torch.native_layer_norm 6.4 us a
# call against 14.2 for torch.ops.aten.native_layer_norm).
_native_layer_norm_backward = _aten("native_layer_norm_backward")
_fused_rms_norm_backward = _aten("_fused_rms_norm_backward")
_gelu_backward = _aten("gelu_backward")
_silu_backward = _aten("silu_backward")
_threshold_backward = _aten("threshold_backward")
_native_dropout_backward = _aten("native_dropout_backward")
_embedding_dense_backward = _aten("embedding_dense_backward")
_flash_attention_cpu_backward = _aten("_scaled_dot_product_flash_attention_for_cpu_backward")
_flash_attention_backward = _aten("_scaled_dot_product_flash_attention_backward")
_cudnn_attention_backward = _aten("_scaled_dot_product_cudnn_attention_backward")


# ---------------------------------------------------------------------------------------------
# attention: cuDNN's fused attention on Hopper and newer (what PyTorch's own dispatch and Inductor
# pick there; GPT-2's step on an H200: forward 1.03 ms per step against flash's 1.75, backward
# 2.75 against 4.24; README.md), flash kernels elsewhere (CUDA half precision, PyTorch's CPU flash kernel)


def _uses_cudnn_attention(q: torch.Tensor) -> bool:
    """cuDNN for half-precision CUDA attention on compute capability 9+ with head dims up to 128."""
    if not q.is_cuda or q.dtype not in _HALF or q.shape[-1] > 128 or q.shape[-1] % 8:
        return False
    if not (torch.backends.cuda.cudnn_sdp_enabled() and _cudnn_available()):
        return False
    return _compute_capability(q.device.index)[0] >= 9


@functools.cache
def _cudnn_available() -> bool:
    return torch.backends.cudnn.is_available()


@functools.cache
def _compute_capability(index: int | None) -> tuple[int, int]:
    """A device's capability, asked once: each attention call asks (twice per training step per
    layer), and torch's query builds the device's properties each time."""
    return torch.cuda.get_device_capability(index)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, scale: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if _uses_cudnn_attention(q):
        out, lse, *_ = torch._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, is_causal, False, scale=scale
        )
        return out, lse.squeeze(-1)  # cuDNN's statistics are (B, H, S, 1), float32
    k, v = _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1])  # flash kernels take no grouped heads
    if q.is_cuda:
        out, lse, *_ = torch._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, False, scale=scale)
    else:
        out, lse = torch._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, scale=scale)
    return out, _to(lse, _computation_dtype(q.dtype))


def _repeat_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t if t.shape[1] == heads else t.repeat_interleave(heads // t.shape[1], dim=1)


def _sum_heads(grad: torch.Tensor, heads: int) -> torch.Tensor:
    """The gradient of ``_repeat_heads``: each group's heads summed."""
    if grad.shape[1] == heads:
        return grad
    return grad.unflatten(1, (heads, grad.shape[1] // heads)).sum(2)


def attention_backward(
    g: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
    is_causal: bool, scale: float | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    if q.is_cuda:
        # dense batches have no sequence offsets (undefined tensors, as the forward returns them);
        # without dropout the kernels do not read the random state
        unused = torch.empty(0, dtype=torch.int64, device=q.device)
        if _uses_cudnn_attention(q):  # the same choice as the forward's: the statistics are cuDNN's
            if g.stride() != out.stride():  # cuDNN reads the output's gradient in the output's layout
                g = torch.empty_strided(out.shape, out.stride(), dtype=g.dtype, device=g.device).copy_(g)
            # Grouped heads are repeated for the backward: cuDNN's grouped backward (an extra head
            # reduction kernel, slower main kernel) took 0.60 ms per call against 0.48 for repeated
            # heads on the H100 (HF Llama, 32/4 heads, 4 x 2048); the repeat and the sum cost less.
            grad_q, grad_k, grad_v = _cudnn_attention_backward(
                g, q, _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1]), out, lse.unsqueeze(-1), unused,
                unused, None, None, None, q.shape[-2], k.shape[-2], 0.0, is_causal, scale=scale,
            )  # fmt: skip
            return grad_q, _sum_heads(grad_k, k.shape[1]), _sum_heads(grad_v, v.shape[1])
        grad_q, grad_k, grad_v = _flash_attention_backward(
            g.contiguous(), q, _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1]), out, _to(lse, torch.float32), None,
            None, q.shape[-2], k.shape[-2], 0.0, is_causal, unused, unused, scale=scale,
        )  # fmt: skip
    else:
        grad_q, grad_k, grad_v = _flash_attention_cpu_backward(
            g.contiguous(), q, _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1]), out,
            _to(lse, q.dtype if q.dtype == torch.float64 else torch.float32), 0.0, is_causal, scale=scale,
        )  # fmt: skip
    return grad_q, _sum_heads(grad_k, k.shape[1]), _sum_heads(grad_v, v.shape[1])


def _attention_checker(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, *args: object, **kwargs: object
) -> bool:
    head_dim = q.shape[-1]
    if q.device.type == "cuda":
        return q.dtype.torch_dtype in _HALF and head_dim % 8 == 0 and head_dim <= 256
    return q.device.type == "cpu" and q.dtype.torch_dtype in (torch.float32, torch.float64, *_HALF)


# ---------------------------------------------------------------------------------------------
# layer norm, gelu


def layer_norm_with_statistics(
    a: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None, bias: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    out, mean, rstd = torch.native_layer_norm(a, normalized_shape, weight, bias, eps)
    compute = _computation_dtype(a.dtype)
    return out, _to(mean, compute), _to(rstd, compute)


def layer_norm_backward(
    g: torch.Tensor, a: torch.Tensor, normalized_shape: Sequence[int], mean: torch.Tensor, rstd: torch.Tensor,
    weight: torch.Tensor | None, bias: torch.Tensor | None, output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    if not a.is_cuda:  # PyTorch's CPU kernel keeps the statistics in the input's dtype
        mean, rstd = _to(mean, a.dtype), _to(rstd, a.dtype)
    grad_a, grad_weight, grad_bias = _native_layer_norm_backward(
        g, a, normalized_shape, mean, rstd, weight, bias, output_mask
    )
    wants_a, wants_weight, wants_bias = output_mask
    return (grad_a if wants_a else None, grad_weight if wants_weight else None,
            grad_bias if wants_bias else None)  # fmt: skip


def _without_addend(*args: object, addend: object = None, **kwargs: object) -> bool:
    """The kernels here add no residual gradient of their own (their functions take no ``addend``): a
    folded add (``core/transforms/norm_backward_adds.py``) is left to an executor that fuses it."""
    return addend is None


def rms_norm_backward(
    g: torch.Tensor, a: torch.Tensor, normalized_shape: Sequence[int], rstd: torch.Tensor, weight: torch.Tensor | None,
    output_mask: Sequence[bool], weighting: str = "torch",
) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """PyTorch's fused RMS-norm backward (CUDA only). Both weightings: the kernel computes
    ``grad * weight`` and the weight's gradient in float32 (Llama's eager autograd rounds the product
    and the normalized row to the input's dtype first; ``_rms_norm_backward_on_cuda``)."""
    grad_a, grad_weight = _fused_rms_norm_backward(g, a, normalized_shape, rstd, weight, output_mask)
    wants_a, wants_weight = output_mask
    return (grad_a if wants_a else None, grad_weight if wants_weight else None)


def _rms_norm_backward_on_cuda(
    g: TensorProxy, a: TensorProxy, normalized_shape: Sequence[int], rstd: TensorProxy, weight: TensorProxy | None,
    output_mask: Sequence[bool], weighting: str = "torch", addend: TensorProxy | None = None,
) -> bool:  # fmt: skip
    """CUDA tensors of one floating dtype (the kernel's weight has the input's) and float32 statistics;
    no residual gradient to add (``_without_addend``)."""
    dtype = a.dtype.torch_dtype
    return (
        addend is None
        and a.device.type == "cuda"
        and dtype in (*_HALF, torch.float32)
        and g.dtype == a.dtype
        and (weight is None or weight.dtype == a.dtype)
        and rstd.dtype.torch_dtype == torch.float32
    )


def gelu_backward(g: torch.Tensor, a: torch.Tensor, approximate: str) -> torch.Tensor:
    return _gelu_backward(g, a, approximate=approximate)


def silu_backward(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return _silu_backward(g, a)


def relu_backward(g: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return _threshold_backward(g, out, 0)


def dropout_backward(g: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    return _native_dropout_backward(g, mask, scale)


def embedding_backward(
    g: torch.Tensor, a: torch.Tensor, num_weights: int, padding_idx: int | None, scale_grad_by_freq: bool
) -> torch.Tensor:
    padding = -1 if padding_idx is None else padding_idx
    return _embedding_dense_backward(g, a, num_weights, padding, scale_grad_by_freq)


# ---------------------------------------------------------------------------------------------
# cross entropy over class indices: the forward keeps each row's log-sum-exp instead of the
# log-probabilities; the backward is softmax minus the one-hot target, scaled per row


def cross_entropy_with_lse(
    a: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str
) -> tuple[torch.Tensor, torch.Tensor]:
    x = a.to(_computation_dtype(a.dtype))
    log_probabilities = torch.log_softmax(x, 1)  # one kernel; logsumexp would take several passes
    lse = x[:, 0] - log_probabilities[:, 0]
    kept = target != ignore_index
    picked = log_probabilities.gather(1, torch.where(kept, target, 0).unsqueeze(1)).squeeze(1)
    losses = torch.where(kept, -picked, 0.0)
    if reduction == "mean":
        loss = losses.sum() / kept.sum().to(x.dtype)
    elif reduction == "sum":
        loss = losses.sum()
    else:
        loss = losses
    return loss.to(a.dtype), lse


def cross_entropy_backward(
    g: torch.Tensor,
    a: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    ignore_index: int,
    reduction: str,
) -> torch.Tensor:
    kept = target != ignore_index
    share = g.to(lse.dtype)
    if reduction == "mean":
        share = share / kept.sum().to(lse.dtype)
    share = torch.where(kept, share, 0.0).unsqueeze(1)
    # softmax recomputed in one kernel (cheaper than reading the saved log-sum-exp in two passes)
    grad = torch.softmax(a.to(lse.dtype), 1).mul_(share)
    grad.scatter_add_(1, torch.where(kept, target, 0).unsqueeze(1), -share)
    return grad.to(a.dtype)


def triton_cross_entropy_with_lse(
    a: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str
) -> tuple[torch.Tensor, torch.Tensor]:
    from thunder.executors.triton import cross_entropy

    return cross_entropy.triton_cross_entropy_with_lse(a, target, ignore_index, reduction)


def triton_cross_entropy_backward(
    g: torch.Tensor,
    a: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    ignore_index: int,
    reduction: str,
) -> torch.Tensor:
    from thunder.executors.triton import cross_entropy

    return cross_entropy.triton_cross_entropy_backward(g, a, target, lse, ignore_index, reduction)


def _cross_entropy_on_triton(a: TensorProxy) -> bool:
    """Whether logits ``a`` go to the Triton kernels (CUDA, triton installed: only then imported)."""
    if a.device.type != "cuda" or importlib.util.find_spec("triton") is None:
        return False
    from thunder.executors.triton.cross_entropy import use_triton_cross_entropy

    return use_triton_cross_entropy(a)


def _claim_cross_entropy(executor: OperatorExecutor) -> None:
    """Each cross entropy symbol runs as the Triton kernel where ``_cross_entropy_on_triton`` says
    so, else as the torch function. One symbol has one implementation per executor, so an execution
    transform picks the operator per call. Both leave the symbol to a fusion executor listed first
    (see below); the Triton kernels serve programs without one (``executors=["torch"]``)."""
    forward = executor.register_operator("cross_entropy_with_lse", fn=cross_entropy_with_lse,
                                         like=ltorch.cross_entropy_with_lse)  # fmt: skip
    triton_forward = executor.register_operator("triton_cross_entropy_with_lse", fn=triton_cross_entropy_with_lse,
                                                like=ltorch.cross_entropy_with_lse)  # fmt: skip
    backward = executor.register_operator("cross_entropy_backward", fn=cross_entropy_backward,
                                          like=ltorch.cross_entropy_backward)  # fmt: skip
    triton_backward = executor.register_operator("triton_cross_entropy_backward", fn=triton_cross_entropy_backward,
                                                 like=ltorch.cross_entropy_backward)  # fmt: skip

    def forward_transform(a: TensorProxy, target: TensorProxy, ignore_index: int, reduction: str) -> Any:
        operator = triton_forward if _cross_entropy_on_triton(a) else forward
        return operator(a, target, ignore_index, reduction)

    def backward_transform(g: TensorProxy, a: TensorProxy, target: TensorProxy, lse: TensorProxy, ignore_index: int,
                           reduction: str) -> Any:  # fmt: skip
        operator = triton_backward if _cross_entropy_on_triton(a) else backward
        return operator(g, a, target, lse, ignore_index, reduction)

    # A fusion executor listed first still takes the decomposition: language models upcast the
    # logits first (``logits.float()``), which a fusion region reads in bf16 while the kernels would
    # get a materialized float32 copy (GPT-2 on an H100: 42.4 ms/step and 13.3 GiB with the kernels
    # after the upcast, 38.4 ms and 11.7 GiB with nvFuser's region).
    executor.register_implementation(
        ltorch.cross_entropy_with_lse, execution_transform=forward_transform, defers_to_fusion=True
    )
    executor.register_implementation(
        ltorch.cross_entropy_backward, execution_transform=backward_transform, defers_to_fusion=True
    )


def register_torch_kernels(executor: OperatorExecutor) -> None:
    def claim(
        symbol: Any,
        fn: Callable,
        checker: Callable[..., bool] | None = None,
        *,
        fusible: bool = True,
        beats_fusion: bool = False,
    ) -> None:
        operator = executor.register_operator(fn.__name__, fn=fn, like=symbol)
        executor.register_implementation(
            symbol,
            operator,
            checker=checker or (lambda *args, **kwargs: True),
            defers_to_fusion=fusible and not beats_fusion,
            beats_fusion=beats_fusion,
        )

    # flash attention beats any fusion of attention's math; the others are elementwise work and
    # reductions that a fusion executor listed first fuses with their neighbours
    claim(ltorch.attention_with_lse, attention_with_lse, _attention_checker, fusible=False)
    claim(
        ltorch.attention_backward,
        attention_backward,
        lambda g, q, *rest: _attention_checker(q, q, q),
        fusible=False,
    )
    claim(ltorch.layer_norm_with_statistics, layer_norm_with_statistics)
    claim(ltorch.layer_norm_backward, layer_norm_backward, _without_addend)
    # nvFuser takes seconds to compile an RMS norm's backward (an inner-outer persistent kernel, with
    # the residual gradient it joins); PyTorch's kernel needs none (core/transforms/rms_norms.py)
    claim(ltorch.rms_norm_backward, rms_norm_backward, _rms_norm_backward_on_cuda, beats_fusion=True)
    claim(ltorch.gelu_backward, gelu_backward)
    claim(ltorch.silu_backward, silu_backward)
    claim(ltorch.relu_backward, relu_backward)
    claim(ltorch.dropout_backward, dropout_backward)
    claim(ltorch.embedding_backward, embedding_backward, fusible=False)  # a scatter: nothing to fuse
    _claim_cross_entropy(executor)
