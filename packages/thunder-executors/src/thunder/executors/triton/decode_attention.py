"""Attention of a few query rows over a long key/value cache: a decode step's, as Triton kernels.

A decode step attends one new token per sequence. After ``core/transforms/query_groups.py`` the query
heads that share a key/value head are rows of one query matrix: ``q`` is ``(B, H, rows, D)`` over ``k``
and ``v`` of ``(B, H, L, D)``, with an additive mask ``(B or 1, 1, 1, L)`` hiding the cache positions
not written yet. The work is reading ``k`` and ``v`` once. cuDNN's fused attention (what
``F.scaled_dot_product_attention`` picks on an H100 for this call) spends about 9-10 us per call
at a 192-token cache, plus a memset and a copy node per call, and 44 us at 2,048 tokens; these
kernels took 4.5-5.4 us and 14 us (H100, 32 calls replayed in one CUDA graph, TinyLlama's and
Llama-3-8B's head shapes).

``_partial_attention``: program ``(b * H + h, s)`` reads chunk ``s`` of ``L`` (``chunk`` positions,
``BLOCK_N`` at a time) for every row of head ``h`` and keeps the online softmax's running maximum,
sum and weighted values in float32 (rows padded to 16, the least ``tl.dot`` takes). With one chunk
(caches up to ``CHUNK`` positions) it writes the output itself; with several, each writes its three
partials and ``_combine`` (one program per head) rescales them to the largest maximum and adds them
up: more programs read the cache at once, which is what a long cache needs. A row whose positions
are all masked gives 0, as eager's attention does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["decode_attention", "CHUNK", "MAX_ROWS"]

CHUNK = 256  # cache positions per program when the cache is split
MAX_ROWS = 64
_BLOCK_N = 64


@triton.jit
def _partial_attention(
    q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, max_ptr, sum_ptr, partial_ptr, scale, L, chunk,
    sqb, sqh, sqr, skb, skh, skl, svb, svh, svl, sob, soh, sor, smb,
    H: tl.constexpr, ROWS: tl.constexpr, RP: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_MASK: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    b = bh // H
    h = bh % H
    r = tl.arange(0, RP)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + r[:, None] * sqr + d[None, :], mask=r[:, None] < ROWS, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([RP], float("-inf"), tl.float32)
    l_i = tl.zeros([RP], tl.float32)
    acc = tl.zeros([RP, D], tl.float32)
    start = split * chunk
    end = tl.minimum(start + chunk, L)
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        valid = n < end
        k = tl.load(k_ptr + b * skb + h * skh + n[:, None] * skl + d[None, :], mask=valid[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
        if HAS_MASK:
            s += tl.load(mask_ptr + b * smb + n, mask=valid, other=0.0).to(tl.float32)[None, :]
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all masked so far: no NaN from -inf - -inf
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + b * svb + h * svh + n[:, None] * svl + d[None, :], mask=valid[:, None], other=0.0)
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    if SPLIT:
        base = (bh * splits + split) * RP
        tl.store(max_ptr + base + r, m_i)
        tl.store(sum_ptr + base + r, l_i)
        tl.store(partial_ptr + (base + r[:, None]) * D + d[None, :], acc)
    else:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(out_ptr + b * sob + h * soh + r[:, None] * sor + d[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=r[:, None] < ROWS)  # fmt: skip


@triton.jit
def _combine(
    max_ptr, sum_ptr, partial_ptr, out_ptr, sob, soh, sor,
    H: tl.constexpr, SPLITS: tl.constexpr, ROWS: tl.constexpr, RP: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    s = tl.arange(0, SPLITS)
    r = tl.arange(0, RP)
    d = tl.arange(0, D)
    base = (bh * SPLITS + s[:, None]) * RP + r[None, :]  # [SPLITS, RP]
    m = tl.load(max_ptr + base)
    largest = tl.max(m, 0)
    largest = tl.where(largest == float("-inf"), 0.0, largest)
    weight = tl.exp(m - largest[None, :])
    total = tl.sum(weight * tl.load(sum_ptr + base), 0)
    values = tl.load(partial_ptr + base[:, :, None] * D + d[None, None, :])  # [SPLITS, RP, D]
    out = tl.sum(values * weight[:, :, None], 0) / tl.where(total == 0.0, 1.0, total)[:, None]
    tl.store(out_ptr + b * sob + h * soh + r[:, None] * sor + d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=r[:, None] < ROWS)  # fmt: skip


def decode_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` for ``q`` ``(B, H, rows, D)``, ``k``/``v`` ``(B, H, L, D)``
    and ``mask`` ``(B or 1, 1, 1, L)`` (or None); every last dim of stride 1, ``D`` a power of two."""
    batch, heads, rows, width = q.shape
    length = k.shape[2]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    padded = max(16, triton.next_power_of_2(rows))
    splits = 1 if length <= CHUNK else triton.next_power_of_2(triton.cdiv(length, CHUNK))
    chunk = length if splits == 1 else triton.cdiv(triton.cdiv(length, splits), _BLOCK_N) * _BLOCK_N
    mask_rows = mask.reshape(mask.shape[0], length) if mask is not None else q
    mask_stride = mask_rows.stride(0) if mask is not None and mask.shape[0] > 1 else 0
    if splits > 1:
        maxima = torch.empty(batch * heads * splits * padded, device=q.device, dtype=torch.float32)
        sums = torch.empty_like(maxima)
        partial = torch.empty(maxima.numel() * width, device=q.device, dtype=torch.float32)
    else:
        maxima = sums = partial = out
    precision = "ieee" if q.dtype == torch.float32 else "tf32"  # float32 as eager: no TF32 rounding
    from thunder.executors.triton.cache import interpret_mode

    # Triton's interpreter multiplies 16-bit floats wrongly in tl.dot: it gets float32 tiles instead
    upcast = interpret_mode() and q.dtype != torch.float32
    _partial_attention[(batch * heads, splits)](
        q, k, v, mask_rows, out, maxima, sums, partial, scale, length, chunk,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1), out.stride(2), mask_stride,
        H=heads, ROWS=rows, RP=padded, D=width, BLOCK_N=_BLOCK_N, HAS_MASK=mask is not None,
        SPLIT=splits > 1, PRECISION=precision, UPCAST=upcast, num_warps=4,
    )  # fmt: skip
    if splits > 1:
        _combine[(batch * heads,)](
            maxima, sums, partial, out, out.stride(0), out.stride(1), out.stride(2),
            H=heads, SPLITS=splits, ROWS=rows, RP=padded, D=width, num_warps=4,
        )  # fmt: skip
    return out
