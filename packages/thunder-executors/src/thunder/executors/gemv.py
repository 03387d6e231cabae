"""The ``triton_gemv`` executor: one-row linears (a decode step's) as Triton matrix-vector kernels.

It claims ``ltorch.linear`` and ``ltorch.linears`` (several weights of one input, grouped by
``core/transforms/group_linears.py``) when the input has one row and every tensor is a CUDA tensor
of float32, float16 or bfloat16 (or a CPU tensor under ``TRITON_INTERPRET=1``), and
``ltorch.rms_norm_linears`` (an RMS norm folded into the linears reading it, by
``core/transforms/fold_rms_norms.py``) when its norm weight is also of the input's dtype. The kernel
is ``triton/gemv.py``; why it beats cuBLAS there is written at its top. It also claims a decode
step's attention (``ltorch.attention`` of a few query rows per key/value head over the cache,
``_decode_attention_fits``), run by ``triton/decode_attention.py``: the other one-token kernel. It is a default executor on
machines with a CUDA device and Triton (``core/executor.py``), listed before torch.

At run time a weight that is not contiguous, or a group whose weights differ in dtype or device,
runs through ``torch.nn.functional.linear`` instead (after the norm in eager's ops, for a folded
norm): the checks cost less than a launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

import thunder.torch as ltorch
from thunder.core import dtypes
from thunder.core.executor import register_executor
from thunder.core.proxies import TensorProxy
from thunder.core.transforms.group_linears import MAX_GROUP
from thunder.executors.triton_operator import TritonOperatorExecutor, kernel_device_type
from thunder.torch.norm_linears import RMS_NORM_STYLES

__all__ = [
    "executor",
    "GemvExecutor",
    "linear",
    "linears",
    "rms_norm_linears",
    "decode_attention",
    "decode_sdpa",
    "gated_linears",
]

_DTYPES = (dtypes.float32, dtypes.float16, dtypes.bfloat16)


class GemvExecutor(TritonOperatorExecutor):
    pass


executor = GemvExecutor("triton_gemv")
register_executor(executor)


def _fits(x: object, weights: Sequence[object], biases: Sequence[object]) -> bool:
    """One row of a supported dtype on a device the kernel runs on, 2-D weights of its dtype."""
    if not isinstance(x, TensorProxy) or x.ndim == 0 or x.numel() != x.shape[-1] or x.dtype not in _DTYPES:
        return False
    device_type = kernel_device_type()
    tensors = [x, *weights, *(b for b in biases if b is not None)]
    if not all(
        isinstance(t, TensorProxy) and t.dtype == x.dtype and t.device.type == device_type for t in tensors
    ):
        return False
    proxies = [t for t in tensors if isinstance(t, TensorProxy)]
    if any(type(s) is not int for t in proxies for s in t.shape):
        return False  # symbolic sizes
    k = x.shape[-1]
    return k > 0 and all(
        isinstance(w, TensorProxy) and w.ndim == 2 and w.shape[1] == k and w.shape[0] > 0 for w in weights
    )


def _run(
    x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor | None]
) -> list[torch.Tensor]:
    if all(w.is_contiguous() for w in weights) and all(b is None or b.is_contiguous() for b in biases):
        from thunder.executors.triton.gemv import gemv

        return gemv(x, weights, biases)
    return [F.linear(x, w, b) for w, b in zip(weights, biases)]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return _run(x, (weight,), (bias,))[0]


def linears(
    x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor | None]
) -> tuple[torch.Tensor, ...]:
    return tuple(_run(x, weights, biases))


def rms_norm_linears(
    x: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None],
    style: str = "llama",
    addend: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    return tuple(_run_normed(x, (norm_weight, eps, style, addend), weights, biases))


def _run_normed(
    x: torch.Tensor,
    norm: tuple[torch.Tensor, float, str, torch.Tensor | None],
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None],
) -> list[torch.Tensor]:
    norm_weight, eps, style, addend = norm
    contiguous = norm_weight.is_contiguous() and all(w.is_contiguous() for w in weights)
    if contiguous and all(b is None or b.is_contiguous() for b in biases):
        from thunder.executors.triton.gemv import rms_norm_gemv

        return rms_norm_gemv(x, norm_weight, eps, weights, biases, style, addend)
    total = x if addend is None else x + addend
    normed = _rms_norm(total, norm_weight, eps, style)
    outputs = [F.linear(normed, w, b) for w, b in zip(weights, biases)]
    return outputs if addend is None else [*outputs, total]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, style: str) -> torch.Tensor:
    """Eager's ops of ``thunder/torch/norm_linears.py``'s norm."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if style == "gemma":
        return (h * (1.0 + weight.float())).to(x.dtype)
    return weight * h.to(x.dtype)


def _linear_fits(x: object, weight: object, bias: object = None) -> bool:
    return _fits(x, (weight,), (bias,))


def _linears_fit(x: object, weights: Sequence[object], biases: Sequence[object]) -> bool:
    return 1 <= len(weights) <= MAX_GROUP and len(biases) == len(weights) and _fits(x, weights, biases)


def _rms_norm_linears_fit(
    x: object,
    norm_weight: object,
    eps: object,
    weights: Sequence[object],
    biases: Sequence[object],
    style: object = "llama",
    addend: object = None,
) -> bool:
    """Also: a Python number ``eps``, a norm weight of shape ``(K,)`` and an addend of ``x``'s shape,
    both of ``x``'s dtype and device."""
    if style not in RMS_NORM_STYLES or type(eps) not in (int, float) or not _linears_fit(x, weights, biases):
        return False
    assert isinstance(x, TensorProxy)
    if addend is not None and not (
        isinstance(addend, TensorProxy)
        and addend.shape == x.shape
        and addend.dtype == x.dtype
        and addend.device == x.device
    ):
        return False
    return (
        isinstance(norm_weight, TensorProxy)
        and norm_weight.shape == (x.shape[-1],)
        and norm_weight.dtype == x.dtype
        and norm_weight.device == x.device
    )


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """``ltorch.attention`` of a decode step (``_decode_attention_fits``) with ``triton/decode_attention.py``;
    through ``F.scaled_dot_product_attention`` where a last dim is not of stride 1 (a layout the
    trace did not promise)."""
    width = q.shape[-1]
    resolved = 1.0 / math.sqrt(width) if scale is None else float(scale)
    if all(t is None or t.stride(-1) == 1 for t in (q, k, v, attn_mask)):
        from thunder.executors.triton.decode_attention import decode_attention as kernel

        return kernel(q, k, v, attn_mask, resolved)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)


def _decode_attention_fits(
    q: object,
    k: object,
    v: object,
    attn_mask: object = None,
    is_causal: object = False,
    scale: object = None,
    enable_gqa: object = False,
) -> bool:
    """A decode step's attention: a few query rows per head (``MAX_ROWS``; the query groups of one
    key/value head, ``core/transforms/query_groups.py``) over as many key/value heads, 4-D tensors of
    one supported dtype and device, a power-of-two head width from 16 to 256, not causal, and no mask or
    an additive float mask of shape ``(B or 1, 1, 1, L)``."""
    from thunder.executors.triton.decode_attention import MAX_ROWS

    if not (isinstance(q, TensorProxy) and isinstance(k, TensorProxy) and isinstance(v, TensorProxy)):
        return False
    tensors = (q, k, v)
    if any(t.ndim != 4 for t in tensors) or is_causal is not False:
        return False
    device_type = kernel_device_type()
    if any(t.dtype != q.dtype or t.device != q.device for t in tensors) or q.device.type != device_type:
        return False
    if q.dtype not in _DTYPES or any(type(n) is not int for t in tensors for n in t.shape):
        return False
    batch, heads, rows, width = q.shape
    if k.shape != (batch, heads, k.shape[2], width) or v.shape != k.shape or not 1 <= rows <= MAX_ROWS:
        return False
    if k.shape[2] < 1 or width < 16 or width > 256 or width & (width - 1):
        return False
    if scale is not None and type(scale) not in (int, float):
        return False
    if attn_mask is None:
        return True
    return (
        isinstance(attn_mask, TensorProxy)
        and attn_mask.dtype in _DTYPES
        and attn_mask.device == q.device
        and attn_mask.ndim == 4
        and attn_mask.shape[0] in (1, batch)
        and tuple(attn_mask.shape[1:]) == (1, 1, k.shape[2])
    )


def decode_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` without dropout (``_decode_sdpa_fits``): ``decode_attention``."""
    return decode_attention(query, key, value, attn_mask, is_causal, scale, enable_gqa)


def _decode_sdpa_fits(
    query: object,
    key: object,
    value: object,
    attn_mask: object = None,
    dropout_p: object = 0.0,
    is_causal: object = False,
    scale: object = None,
    enable_gqa: object = False,
) -> bool:
    return dropout_p == 0.0 and _decode_attention_fits(
        query, key, value, attn_mask, is_causal, scale, enable_gqa
    )


def gated_linears(
    x: torch.Tensor,
    gate_weight: torch.Tensor,
    up_weight: torch.Tensor,
    gate_bias: torch.Tensor | None = None,
    up_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``ltorch.gated_linears`` (``silu(linear(x, gate)) * linear(x, up)``) as one launch; eager's ops
    where a weight or bias is not contiguous."""
    tensors = (gate_weight, up_weight, gate_bias, up_bias)
    if all(t is None or t.is_contiguous() for t in tensors):
        from thunder.executors.triton.gemv import gated_gemv

        return gated_gemv(x, gate_weight, up_weight, gate_bias, up_bias)
    return F.silu(F.linear(x, gate_weight, gate_bias)) * F.linear(x, up_weight, up_bias)


def _gated_linears_fit(
    x: object, gate_weight: object, up_weight: object, gate_bias: object = None, up_bias: object = None
) -> bool:
    """Two weights of one shape, and both biases or none."""
    if (gate_bias is None) != (up_bias is None) or not _fits(
        x, (gate_weight, up_weight), (gate_bias, up_bias)
    ):
        return False
    assert isinstance(gate_weight, TensorProxy) and isinstance(up_weight, TensorProxy)
    return gate_weight.shape == up_weight.shape


executor.register_implementation(
    ltorch.gated_linears,
    executor.register_operator("gemv_gated_linears", fn=gated_linears, like=ltorch.gated_linears),
    checker=_gated_linears_fit,
)
executor.register_implementation(
    ltorch.attention,
    executor.register_operator("decode_attention", fn=decode_attention, like=ltorch.attention),
    checker=_decode_attention_fits,
)
executor.register_implementation(
    ltorch.scaled_dot_product_attention,
    executor.register_operator("decode_sdpa", fn=decode_sdpa, like=ltorch.scaled_dot_product_attention),
    checker=_decode_sdpa_fits,
)
executor.register_implementation(
    ltorch.linear,
    executor.register_operator("gemv_linear", fn=linear, like=ltorch.linear),
    checker=_linear_fits,
)
executor.register_implementation(
    ltorch.linears,
    executor.register_operator("gemv_linears", fn=linears, like=ltorch.linears),
    checker=_linears_fit,
)
executor.register_implementation(
    ltorch.rms_norm_linears,
    executor.register_operator("gemv_rms_norm_linears", fn=rms_norm_linears, like=ltorch.rms_norm_linears),
    checker=_rms_norm_linears_fit,
)
