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
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = ["gemv", "gemv_config"]

MAX_GROUP = 3


@triton.jit(do_not_specialize=["n0", "n1", "n2", "blocks0", "blocks01"])
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
    n0,
    n1,
    n2,
    blocks0,
    blocks01,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    HAS_BIAS: tl.constexpr,
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
    rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n
    rows = tl.where(row_ok, rows, 0)  # clamped rows read valid memory; their sums are not stored
    columns = tl.arange(0, BLOCK_K)
    row_starts = w_ptr + rows.to(tl.int64)[:, None] * K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + columns
        if EVEN_K:
            x = tl.load(x_ptr + ks)
            w = tl.load(row_starts + ks[None, :], eviction_policy="evict_first")
        else:
            k_ok = ks < K
            x = tl.load(x_ptr + ks, mask=k_ok, other=0.0)
            w = tl.load(
                row_starts + ks[None, :], mask=k_ok[None, :], other=0.0, eviction_policy="evict_first"
            )
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
    pointers = [
        x,
        *weights,
        *[weights[0]] * missing,
        *outputs,
        *[outputs[0]] * missing,
        *bias_pointers,
        *[x] * missing,
    ]
    numbers = [*sizes, *[0] * missing, blocks[0], blocks[0] + (blocks[1] if len(blocks) > 1 else 0)]
    constants = (k, len(weights), has_bias, block_n, block_k, k % block_k == 0)
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
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        EVEN_K=k % block_k == 0,
        num_warps=warps,
    )
    if x.is_cuda and getattr(kernel, "packed_metadata", None) is not None:  # not Triton's interpreter
        _compiled[key] = kernel
    return outputs
