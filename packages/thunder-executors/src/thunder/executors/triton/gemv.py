"""Matrix-vector products for one-token decoding: ``x @ w.T`` for one row ``x`` and up to three weights.

A decode step multiplies one activation row by every weight matrix of the model, so its time is the
time to read the weights. cuBLAS's kernels for a one-row product reach about half of the memory
bandwidth on an H100/H200 for the shapes of a Llama layer; a kernel that streams each weight row in
wide contiguous loads, keeps float32 partial sums per row and reduces them once, does better. The
same launch can also read several weights that multiply the same row (the query, key and value
projections; the gate and up projections), which saves launches: a small model's decode step is
bound by launches, not bytes.

Each program owns ``BLOCK_N`` consecutive rows of one weight and walks the reduction dimension in
``BLOCK_K`` steps. Programs are numbered across the group: the first ``ceil(N0 / BLOCK_N)`` take
rows of the first weight, and so on. Products accumulate in float32 and are rounded once, as cuBLAS
does for 16-bit inputs.

``rms_norm_gemv`` multiplies the weights by the RMS-normalized row instead (a Llama layer's norms
feed its q/k/v and gate/up projections). Every program first reads the whole row (a few KB, from
L2 after the first program) for its sum of squares, then normalizes each tile of the row as it
loads it, rounding where Hugging Face's norm rounds (``NORM_STYLES``), so the separate norm kernel
and the normalized row's write and read are gone. The row can be a residual connection's sum
``x + a``: every program adds the two rows itself and the first also stores the sum, which the next
residual connection reads, so the add needs no kernel either.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = ["gemv", "gated_gemv", "gemv_config", "rms_norm_gemv", "NORM_STYLES"]

MAX_GROUP = 3

# How the normalized row meets the norm's weight ``g``, with ``r = x.float() * rsqrt(mean(x.float()**2) + eps)``:
# "llama": ``g * r.to(x.dtype)`` (Llama, Mistral, Qwen, Phi-3: rounded, then multiplied in x's dtype);
# "gemma": ``(r * (1 + g.float())).to(x.dtype)`` (Gemma 1-3: multiplied in float32, rounded once).
NORM_STYLES = {"llama": 1, "gemma": 2}


@triton.jit
def _row_tile(x_ptr, a_ptr, ks, K: tl.constexpr, ADD: tl.constexpr, EVEN_K: tl.constexpr):
    """A tile of the row: ``x``, or ``x + a`` rounded to x's dtype as eager's add rounds it."""
    if EVEN_K:
        x = tl.load(x_ptr + ks)
    else:
        x = tl.load(x_ptr + ks, mask=ks < K, other=0.0)
    if ADD:
        if EVEN_K:
            a = tl.load(a_ptr + ks)
        else:
            a = tl.load(a_ptr + ks, mask=ks < K, other=0.0)
        x = (x.to(tl.float32) + a.to(tl.float32)).to(x.dtype)
    return x


@triton.jit(do_not_specialize=["n0", "n1", "n2", "blocks0", "blocks01", "eps"])
def _gemv_kernel(
    x_ptr,
    w0,
    w1,
    w2,
    y0,
    y1,
    y2,
    b0,
    b1,
    b2,
    g_ptr,
    a_ptr,
    sum_ptr,
    n0,
    n1,
    n2,
    blocks0,
    blocks01,
    eps,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    NORM: tl.constexpr,
    ADD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    w_ptr = w0
    y_ptr = y0
    b_ptr = b0
    n = n0
    block = pid
    if GROUP > 1:
        if pid >= blocks0:
            w_ptr = w1
            y_ptr = y1
            b_ptr = b1
            n = n1
            block = pid - blocks0
    if GROUP > 2:
        if pid >= blocks01:
            w_ptr = w2
            y_ptr = y2
            b_ptr = b2
            n = n2
            block = pid - blocks01
    columns = tl.arange(0, BLOCK_K)
    if NORM > 0:  # the row's reciprocal RMS, in float32 as Hugging Face's norms compute it
        squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            x = _row_tile(x_ptr, a_ptr, k + columns, K, ADD, EVEN_K).to(tl.float32)
            squares += x * x
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / K + eps)
    rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n
    rows = tl.where(row_ok, rows, 0)  # clamped rows read valid memory; their sums are not stored
    row_starts = w_ptr + rows.to(tl.int64)[:, None] * K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + columns
        k_ok = ks < K
        x = _row_tile(x_ptr, a_ptr, ks, K, ADD, EVEN_K)
        if EVEN_K:
            w = tl.load(row_starts + ks[None, :], eviction_policy="evict_first")
        else:
            w = tl.load(
                row_starts + ks[None, :], mask=k_ok[None, :], other=0.0, eviction_policy="evict_first"
            )
        if ADD:  # every program computes the sum; the first one stores it (the residual reads it later)
            if pid == 0:
                tl.store(sum_ptr + ks, x, mask=k_ok)
        if NORM > 0:
            if EVEN_K:
                g = tl.load(g_ptr + ks).to(tl.float32)
            else:
                g = tl.load(g_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
            normed = x.to(tl.float32) * rstd
            if NORM == 1:  # rounded to x's dtype, times the weight in x's dtype (rounded again)
                x = (normed.to(x.dtype).to(tl.float32) * g).to(x.dtype)
            else:  # times (1 + weight) in float32, rounded once
                x = (normed * (1.0 + g)).to(x.dtype)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + rows).to(tl.float32)
    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok)


@functools.lru_cache(maxsize=256)
def gemv_config(k: int, rows: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps) for a reduction of length ``k`` over ``rows`` rows in all.

    From a sweep on an H200 over the Llama shapes of ``benchmarks/gemv.py`` (its ``--sweep``): one
    row a program except for groups of at most 4096 rows; the widest step that divides ``k`` and
    leaves at least two steps, at most 1024 for long reductions; 8 warps for 2048-wide steps.
    """
    limit = 1024 if k > 8192 else 2048
    block_k = next((b for b in (2048, 1024, 512, 256) if b <= limit and k % b == 0 and 2 * b <= k), 0)
    if block_k == 0:  # no wide step divides k: masked steps
        block_k = min(1024, triton.next_power_of_2(k))
    block_n = 2 if 1024 <= rows <= 4096 else 1
    return block_n, block_k, 8 if block_k == 2048 else 4


# Compiled kernels by everything Triton specializes them on (``_launch_key``): launched directly
# after the first call, which skips the 40-60 us of argument binding of ``kernel[grid](...)``.
_compiled: dict[tuple, Any] = {}


def _launch_key(pointers: list[torch.Tensor], constants: tuple, warps: int) -> tuple:
    """What a compiled kernel is specialized on: the device, the pointers' dtypes and 16-byte
    alignment, the constexprs and warps. The sizes are not specialized (``do_not_specialize``)."""
    return (
        pointers[0].device.index,
        tuple(p.dtype for p in pointers),
        tuple(p.data_ptr() % 16 == 0 for p in pointers),
        constants,
        warps,
    )


def gemv(
    x: torch.Tensor,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None] | None = None,
    config: tuple[int, int, int] | None = None,
) -> list[torch.Tensor]:
    """``[F.linear(x, w, b) for w, b in zip(weights, biases)]`` for ``x`` of one row (shape ``(..., K)``
    with one row in all) and contiguous weights of shape ``(N_i, K)`` (biases all given or all
    None) on ``x``'s device and of its dtype."""
    return _launch(x, weights, biases, config)


def rms_norm_gemv(
    x: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None] | None = None,
    style: str = "llama",
    addend: torch.Tensor | None = None,
    config: tuple[int, int, int] | None = None,
) -> list[torch.Tensor]:
    """``gemv(rms_norm(x), weights, biases)``, the norm as Hugging Face's ``style`` writes it
    (``NORM_STYLES``) with the weight ``norm_weight`` of shape ``(K,)`` and ``x``'s dtype, computed
    by every program of the one launch rather than by a kernel of its own.

    With ``addend`` (of ``x``'s shape and dtype), the norm reads ``x + addend`` (a residual
    connection's sum), which is returned after the products.

    Example::

        q, k, v = rms_norm_gemv(h, layer.input_layernorm.weight, 1e-6, [wq, wk, wv])
        gate, up, h = rms_norm_gemv(h, layer.post_attention_layernorm.weight, 1e-6, [wg, wu], addend=attn)
    """
    if style not in NORM_STYLES:
        raise ValueError(f"rms_norm_gemv's style is one of {sorted(NORM_STYLES)}, got {style!r}")
    if norm_weight.shape != (x.shape[-1],):
        raise ValueError(f"the norm's weight has shape {tuple(norm_weight.shape)}, not ({x.shape[-1]},)")
    if addend is not None and (addend.shape != x.shape or addend.dtype != x.dtype):
        raise ValueError("rms_norm_gemv's addend has the shape and dtype of x")
    total = None if addend is None else torch.empty_like(x, memory_format=torch.contiguous_format)
    outputs = _launch(
        x,
        weights,
        biases,
        config,
        norm=(norm_weight.contiguous(), float(eps), NORM_STYLES[style]),
        addend=None if addend is None or total is None else (addend.reshape(-1).contiguous(), total),
    )
    return outputs if total is None else [*outputs, total]


def _launch(
    x: torch.Tensor,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None] | None,
    config: tuple[int, int, int] | None,
    norm: tuple[torch.Tensor, float, int] | None = None,
    addend: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    if not 1 <= len(weights) <= MAX_GROUP:
        raise ValueError(f"gemv takes 1 to {MAX_GROUP} weights, got {len(weights)}")
    biases = biases or (None,) * len(weights)
    has_bias = biases[0] is not None
    if any((b is not None) != has_bias for b in biases):
        raise ValueError("gemv takes a bias for every weight or for none")
    k = x.shape[-1]
    lead = x.shape[:-1]
    x = x.reshape(k).contiguous()
    outputs = [torch.empty((*lead, w.shape[0]), device=x.device, dtype=x.dtype) for w in weights]
    sizes = [w.shape[0] for w in weights]
    block_n, block_k, warps = config or gemv_config(k, sum(sizes))
    blocks = [-(-n // block_n) for n in sizes]
    missing = MAX_GROUP - len(weights)
    bias_pointers = [x if b is None else b for b in biases]  # no bias: any pointer, never read
    norm_weight, eps, style = norm or (x, 0.0, 0)  # no norm: never read
    added, total = addend or (x, x)  # no addend: never read or written
    pointers = [
        x,
        *weights,
        *[weights[0]] * missing,
        *outputs,
        *[outputs[0]] * missing,
        *bias_pointers,
        *[x] * missing,
        norm_weight,
        added,
        total,
    ]
    numbers = [*sizes, *[0] * missing, blocks[0], blocks[0] + (blocks[1] if len(blocks) > 1 else 0), eps]
    constants = (k, len(weights), has_bias, style, addend is not None, block_n, block_k, k % block_k == 0)
    grid = sum(blocks)
    key = _launch_key(pointers, constants, warps)
    kernel = _compiled.get(key)
    if kernel is not None:
        stream = torch._C._cuda_getCurrentRawStream(x.device.index)
        kernel.run(
            grid,
            1,
            1,
            stream,
            kernel.function,
            kernel.packed_metadata,
            None,
            None,
            None,
            *pointers,
            *numbers,
            *constants,
        )
        return outputs
    kernel = _gemv_kernel[(grid,)](
        *pointers,
        *numbers,
        K=k,
        GROUP=len(weights),
        HAS_BIAS=has_bias,
        NORM=style,
        ADD=addend is not None,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        EVEN_K=k % block_k == 0,
        num_warps=warps,
    )
    if x.is_cuda and getattr(kernel, "packed_metadata", None) is not None:  # not Triton's interpreter
        _compiled[key] = kernel
    return outputs


@triton.jit(do_not_specialize=["n"])
def _gated_gemv_kernel(
    x_ptr,
    wg_ptr,
    wu_ptr,
    y_ptr,
    bg_ptr,
    bu_ptr,
    n,
    K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """``silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for one row ``x``: each program owns ``BLOCK_N`` rows of
    both weights, so the product of a gate row and its up row leaves the kernel as one value, rounded
    where eager rounds: each linear's result, the silu, the product."""
    pid = tl.program_id(0)
    columns = tl.arange(0, BLOCK_K)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n
    rows = tl.where(row_ok, rows, 0)
    offsets = rows.to(tl.int64)[:, None] * K
    acc_g = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + columns
        if EVEN_K:
            x = tl.load(x_ptr + ks).to(tl.float32)
            wg = tl.load(wg_ptr + offsets + ks[None, :], eviction_policy="evict_first")
            wu = tl.load(wu_ptr + offsets + ks[None, :], eviction_policy="evict_first")
        else:
            k_ok = ks < K
            x = tl.load(x_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
            wg = tl.load(
                wg_ptr + offsets + ks[None, :], mask=k_ok[None, :], other=0.0, eviction_policy="evict_first"
            )
            wu = tl.load(
                wu_ptr + offsets + ks[None, :], mask=k_ok[None, :], other=0.0, eviction_policy="evict_first"
            )
        acc_g += wg.to(tl.float32) * x[None, :]
        acc_u += wu.to(tl.float32) * x[None, :]
    g = tl.sum(acc_g, axis=1)
    u = tl.sum(acc_u, axis=1)
    if HAS_BIAS:
        g += tl.load(bg_ptr + rows).to(tl.float32)
        u += tl.load(bu_ptr + rows).to(tl.float32)
    dtype = y_ptr.dtype.element_ty
    g = g.to(dtype).to(tl.float32)
    u = u.to(dtype).to(tl.float32)
    activated = (g / (1.0 + tl.exp(-g))).to(dtype).to(tl.float32)
    tl.store(y_ptr + rows, (activated * u).to(dtype), mask=row_ok)


def gated_gemv(
    x: torch.Tensor,
    gate_weight: torch.Tensor,
    up_weight: torch.Tensor,
    gate_bias: torch.Tensor | None = None,
    up_bias: torch.Tensor | None = None,
    config: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """``F.silu(F.linear(x, gate_weight, gate_bias)) * F.linear(x, up_weight, up_bias)`` for ``x`` of one
    row and contiguous weights of shape ``(N, K)`` of its dtype and device (a Llama MLP's gate and up
    projections in a decode step), in one launch: the gate and up rows and the separate kernel of
    the product never reach memory."""
    k = x.shape[-1]
    n = gate_weight.shape[0]
    if gate_weight.shape != (n, k) or up_weight.shape != (n, k) or (gate_bias is None) != (up_bias is None):
        raise ValueError("gated_gemv takes two weights of shape (N, K) and both biases or none")
    out = torch.empty((*x.shape[:-1], n), device=x.device, dtype=x.dtype)
    block_n, block_k, warps = config or gemv_config(k, n)
    has_bias = gate_bias is not None
    row = x.reshape(k).contiguous()
    biases = [row, row] if gate_bias is None or up_bias is None else [gate_bias, up_bias]  # none: never read
    pointers = [row, gate_weight, up_weight, out, *biases]
    constants = (k, has_bias, block_n, block_k, k % block_k == 0)
    grid = -(-n // block_n)
    key = ("gated", *_launch_key(pointers, constants, warps))
    kernel = _compiled.get(key)
    if kernel is not None:
        stream = torch._C._cuda_getCurrentRawStream(x.device.index)
        kernel.run(grid, 1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None,
                   *pointers, n, *constants)  # fmt: skip
        return out
    kernel = _gated_gemv_kernel[(grid,)](
        *pointers, n, K=k, HAS_BIAS=has_bias, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=k % block_k == 0,
        num_warps=warps,
    )  # fmt: skip
    if x.is_cuda and getattr(kernel, "packed_metadata", None) is not None:  # not Triton's interpreter
        _compiled[key] = kernel
    return out
