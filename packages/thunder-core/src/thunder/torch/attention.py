"""``F.scaled_dot_product_attention`` as its math: scores, mask, softmax, (dropout,) weighted sum.

Without a mask or dropout, training goes through ``attention_with_lse`` (grouped heads too: key
and value may have fewer heads, as with ``enable_gqa``, and cuDNN's kernels read them as they are;
the decompositions and the flash kernels repeat them per group): the output
and the log-sum-exp of each row of scores, the two things a flash-attention backward needs
(``attention_backward`` recomputes the probabilities blockwise from them, never storing the scores).
Executors run the pair as PyTorch's flash-attention kernels; the decompositions are the math.
Other cases without dropout go through ``attention``, a symbol with its own gradient rule that
recomputes the probabilities from the saved query and key instead of saving them. With dropout the
gradient comes from the decomposition, which keeps the random mask it drew.
"""

from __future__ import annotations

import math
from typing import Any

import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions, shape
from thunder.torch.nn import softmax
from thunder.torch.nn_common import computation_dtype
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype


def _check(q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: TensorProxy | None, is_causal: bool,
           enable_gqa: bool) -> None:  # fmt: skip
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError(
            "scaled_dot_product_attention: query, key and value must be at least 2-dimensional"
        )
    if not (q.dtype is k.dtype is v.dtype):
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got query.dtype: {q.dtype} key.dtype: {k.dtype} and value.dtype: {v.dtype} instead."
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise RuntimeError(
            f"scaled_dot_product_attention: shapes query {q.shape}, key {k.shape} and value {v.shape} do not fit"
        )
    if is_causal and attn_mask is not None:
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
        )
    if attn_mask is not None and not (attn_mask.dtype is dtypes.bool8 or attn_mask.dtype is q.dtype):
        raise RuntimeError(
            f"Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {attn_mask.dtype} and query.dtype: {q.dtype} instead."
        )
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] % k.shape[-3]:
        raise RuntimeError(
            "scaled_dot_product_attention: the number of query heads must be a multiple of key/value heads"
        )


def _repeat_heads(t: TensorProxy, heads: int) -> TensorProxy:
    """Grouped-query attention: each key/value head serves ``heads // t.shape[-3]`` query heads."""
    kv_heads = t.shape[-3]
    if kv_heads == heads:
        return t
    groups = heads // kv_heads
    batch = t.shape[:-3]
    spread = prims.broadcast_in_dim(
        t,
        (*batch, kv_heads, groups, *t.shape[-2:]),
        tuple(range(len(batch) + 1)) + (len(batch) + 2, len(batch) + 3),
    )
    return prims.reshape(spread, (*batch, heads, *t.shape[-2:]))


def _scores(
    q: TensorProxy, k: TensorProxy, attn_mask: TensorProxy | None, is_causal: bool, scale: float
) -> TensorProxy:
    """Scaled, masked attention scores in the computation dtype."""
    compute = computation_dtype(q.dtype)
    # both operands scaled by sqrt(scale) before their product, as eager's math reference does
    root = math.sqrt(scale)
    q, k = ew.mul(to_dtype(q, compute), root), ew.mul(to_dtype(k, compute), root)
    scores = prims.matmul(q, shape.transpose(k, -2, -1))
    length, source = q.shape[-2], k.shape[-2]
    if is_causal:
        rows = prims.reshape(
            prims.iota(length, start=0, step=1, device=q.device, dtype=dtypes.int64), (length, 1)
        )
        columns = prims.reshape(
            prims.iota(source, start=0, step=1, device=q.device, dtype=dtypes.int64), (1, source)
        )
        attn_mask = ew.le(columns, rows)
    if attn_mask is None:
        return scores
    if attn_mask.dtype is dtypes.bool8:
        return ew.where(attn_mask, scores, -math.inf)
    return ew.add(scores, to_dtype(attn_mask, compute))


def _safe_softmax(scores: TensorProxy, dim: int) -> TensorProxy:
    """softmax that gives 0, not NaN, on a row whose scores are all masked (-inf), as eager does."""
    probabilities = softmax(scores, dim)
    masked_row = ew.eq(reductions.amax(scores, dim, keepdim=True), -math.inf) if scores.numel() else None
    return probabilities if masked_row is None else ew.where(masked_row, 0.0, probabilities)


def _resolved(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, enable_gqa: bool, scale: float | None
) -> tuple[TensorProxy, TensorProxy, float]:
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3:
        k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    return k, v, (1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale))


def _attention(q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: TensorProxy | None, is_causal: bool,
               scale: float | None, enable_gqa: bool) -> TensorProxy:  # fmt: skip
    k, v, scale_value = _resolved(q, k, v, enable_gqa, scale)
    probabilities = _safe_softmax(_scores(q, k, attn_mask, is_causal, scale_value), -1)
    return to_dtype(prims.matmul(probabilities, to_dtype(v, probabilities.dtype)), q.dtype)


attention = make_composite("attention", _attention)


@register_vjp(attention)
def _attention_vjp(g: Any, q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: TensorProxy | None,
                   is_causal: bool, scale: float | None, enable_gqa: bool, *, out: TensorProxy) -> tuple:  # fmt: skip
    if g is None:
        return (None,) * 7
    full_k, full_v, scale_value = _resolved(q, k, v, enable_gqa, scale)
    probabilities = _safe_softmax(_scores(q, full_k, attn_mask, is_causal, scale_value), -1)
    compute = probabilities.dtype
    g = to_dtype(g, compute)
    grad_v = prims.matmul(shape.transpose(probabilities, -2, -1), g)
    grad_p = prims.matmul(g, shape.transpose(to_dtype(full_v, compute), -2, -1))
    grad_scores = ew.mul(
        probabilities, ew.sub(grad_p, reductions.sum(ew.mul(grad_p, probabilities), -1, keepdim=True))
    )
    grad_s = ew.mul(grad_scores, scale_value)
    grad_q = prims.matmul(grad_s, to_dtype(full_k, compute))
    grad_k = prims.matmul(shape.transpose(grad_s, -2, -1), to_dtype(q, compute))
    grad_mask = None
    if attn_mask is not None and attn_mask.requires_grad and attn_mask.dtype.is_floating_point:
        grad_mask = to_dtype(_sum_to(grad_scores, attn_mask.shape), attn_mask.dtype)
    grads = [_sum_to(grad_q, q.shape), _sum_to(grad_k, full_k.shape), _sum_to(grad_v, full_v.shape)]
    if full_k is not k:
        grads[1], grads[2] = _sum_heads(grads[1], k), _sum_heads(grads[2], v)
    grad_q, grad_k, grad_v = (to_dtype(t, x.dtype) for t, x in zip(grads, (q, k, v)))
    return (grad_q, grad_k, grad_v, grad_mask, None, None, None)


def _attention_with_lse(q: TensorProxy, k: TensorProxy, v: TensorProxy, is_causal: bool,
                        scale: float | None) -> tuple[TensorProxy, TensorProxy]:  # fmt: skip
    """The attention output and, per query row, the log-sum-exp of its scaled scores (in the
    computation dtype: float32 for half precision)."""
    scale_value = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])  # grouped heads
    scores = _scores(q, k, None, is_causal, scale_value)
    lse = reductions.logsumexp(scores, -1)
    probabilities = ew.exp(ew.sub(scores, shape.unsqueeze(lse, -1)))
    out = to_dtype(prims.matmul(probabilities, to_dtype(v, probabilities.dtype)), q.dtype)
    return out, lse


attention_with_lse = make_composite("attention_with_lse", _attention_with_lse)


def _attention_backward(g: TensorProxy, q: TensorProxy, k: TensorProxy, v: TensorProxy, out: TensorProxy,
                        lse: TensorProxy, is_causal: bool,
                        scale: float | None) -> tuple[TensorProxy, TensorProxy, TensorProxy]:  # fmt: skip
    """Gradients of query, key and value from the saved output and log-sum-exp (flash attention's).

    Grouped heads (fewer key/value heads than query heads) get each group's gradients summed."""
    scale_value = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    grouped_k, grouped_v = k, v
    k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    scores = _scores(q, k, None, is_causal, scale_value)
    compute = scores.dtype
    probabilities = ew.exp(ew.sub(scores, shape.unsqueeze(to_dtype(lse, compute), -1)))
    g = to_dtype(g, compute)
    grad_v = prims.matmul(shape.transpose(probabilities, -2, -1), g)
    grad_p = prims.matmul(g, shape.transpose(to_dtype(v, compute), -2, -1))
    row_dot = reductions.sum(ew.mul(g, to_dtype(out, compute)), -1, keepdim=True)
    grad_s = ew.mul(ew.mul(probabilities, ew.sub(grad_p, row_dot)), scale_value)
    grad_q = prims.matmul(grad_s, to_dtype(k, compute))
    grad_k = prims.matmul(shape.transpose(grad_s, -2, -1), to_dtype(q, compute))
    if k is not grouped_k:
        grad_k, grad_v = _sum_heads(grad_k, grouped_k), _sum_heads(grad_v, grouped_v)
    return to_dtype(grad_q, q.dtype), to_dtype(grad_k, k.dtype), to_dtype(grad_v, v.dtype)


attention_backward = make_composite("attention_backward", _attention_backward)


@register_vjp(attention_with_lse)
def _attention_with_lse_vjp(g: Any, q: TensorProxy, k: TensorProxy, v: TensorProxy, is_causal: bool,
                            scale: float | None, *, out: tuple) -> tuple:  # fmt: skip
    g_out = g[0]
    if g_out is None:  # the log-sum-exp is an internal output: nothing but the backward reads it
        return (None,) * 5
    output, lse = out
    grad_q, grad_k, grad_v = attention_backward(g_out, q, k, v, output, lse, is_causal, scale)
    return (grad_q, grad_k, grad_v, None, None)


def _flash_eligible(q: TensorProxy, k: TensorProxy, v: TensorProxy, attn_mask: TensorProxy | None,
                    enable_gqa: bool) -> bool:  # fmt: skip
    same_layout = q.ndim == k.ndim == v.ndim == 4 and k.shape == v.shape and q.shape[0] == k.shape[0]
    heads_fit = q.ndim == 4 and (q.shape[1] == k.shape[1] or (enable_gqa and q.shape[1] % k.shape[1] == 0))
    causal_square = (
        q.ndim < 2 or q.shape[-2] == k.shape[-2]
    )  # flash kernels align the causal mask differently otherwise
    return (
        attn_mask is None
        and same_layout
        and heads_fit
        and q.shape[-1] == v.shape[-1]
        and q.numel() > 0
        and k.numel() > 0
        and causal_square
    )


def _sum_to(t: TensorProxy, target: tuple[int, ...]) -> TensorProxy:
    """``t`` summed over the dims it was broadcast along to reach its shape from ``target``."""
    if t.shape == target:
        return t
    leading = t.ndim - len(target)
    dims = list(range(leading)) + [
        leading + d for d, size in enumerate(target) if size == 1 and t.shape[leading + d] != 1
    ]
    summed = reductions.sum(t, dims, keepdim=True)
    return prims.reshape(summed, target)


def _sum_heads(t: TensorProxy, like: TensorProxy) -> TensorProxy:
    kv_heads = like.shape[-3]
    grouped = prims.reshape(t, (*t.shape[:-3], kv_heads, t.shape[-3] // kv_heads, *t.shape[-2:]))
    return reductions.sum(grouped, t.ndim - 2)


@torchsymbol(F.scaled_dot_product_attention)
def scaled_dot_product_attention(query: TensorProxy, key: TensorProxy, value: TensorProxy,
                                 attn_mask: TensorProxy | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> TensorProxy:  # fmt: skip
    _check(query, key, value, attn_mask, is_causal, enable_gqa)
    if dropout_p == 0.0 and _flash_eligible(query, key, value, attn_mask, enable_gqa):
        return attention_with_lse(query, key, value, is_causal, scale)[0]
    if dropout_p == 0.0:
        return attention(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    if not 0.0 < dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    k, v, scale_value = _resolved(query, key, value, enable_gqa, scale)
    probabilities = _safe_softmax(_scores(query, k, attn_mask, is_causal, scale_value), -1)
    random = prims.uniform(probabilities.shape, 0.0, 1.0, device=query.device, dtype=probabilities.dtype)
    keep = to_dtype(ew.lt(random, 1.0 - dropout_p), probabilities.dtype)
    dropped = ew.mul(ew.mul(probabilities, keep), 1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0)
    return to_dtype(prims.matmul(dropped, to_dtype(v, dropped.dtype)), query.dtype)
