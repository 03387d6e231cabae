"""Layer-norm and RMS-norm backwards as one Triton kernel: the ``triton_norms`` executor's kernel.

nvFuser compiles a norm's backward into an inner-outer persistent kernel (row statistics for the
input's gradient, column sums for the weight's and bias's), 1.6 to 3.2 s of compile per structure
on an H200: most of a GPT-2 training step's first-call compile. Triton compiles this kernel once per
dtype and width (the layers of a model share it) and keeps it in its on-disk cache.

Each program owns ``ROWS`` consecutive rows of the ``[rows, cols]`` input (the normalized dims are
the last one); a row fits one block of columns. Per row it reads the output's gradient ``g``, the
input ``x`` and the saved statistics, and writes the input's gradient::

    x_hat = (x - mean) * rstd                      (x * rstd for an RMS norm)
    dy    = g * weight                             (g without a weight)
    dx    = (dy - x_hat * mean(dy * x_hat) - mean(dy)) * rstd   (no mean(dy) term for an RMS norm)

plus, when given, a residual connection's other gradient (``addend``: the add that follows the norm's
backward, folded into it by thunder-core's ``transforms/norm_backward_adds.py``), while it sums
``g * x_hat`` (the weight's gradient) and ``g`` (the bias's) over its rows in float32
registers; one partial row per program is written, and torch sums the ``[programs, cols]`` partials.
All math is float32; results are rounded once to their tensor's dtype (eager's CUDA kernels do the
same; Hugging Face's Llama norm, differentiated op by op in eager, rounds ``g * weight`` first).

Kernels run on CPU tensors in Triton's interpreter (``TRITON_INTERPRET=1``), which is how the tests
check them without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

__all__ = ["MAX_WIDTH", "layer_norm_backward", "rms_norm_backward", "norm_backward"]

MAX_WIDTH = 16384  # columns of one row block; wider rows are left to other executors
_TARGET_PROGRAMS = 4 * 132  # about four programs per SM of an H100/H200


@triton.jit
def _norm_backward_kernel(
    g_ptr, x_ptr, weight_ptr, mean_ptr, rstd_ptr, addend_ptr, dx_ptr, dweight_ptr, dbias_ptr,
    rows, cols, rows_per_program,
    HAS_MEAN: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_ADDEND: tl.constexpr, WANTS_DX: tl.constexpr,
    WANTS_DWEIGHT: tl.constexpr, WANTS_DBIAS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    program = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    in_row = columns < cols
    if HAS_WEIGHT:
        weight = tl.load(weight_ptr + columns, mask=in_row, other=0.0).to(tl.float32)
    dweight = tl.zeros([BLOCK], dtype=tl.float32)
    dbias = tl.zeros([BLOCK], dtype=tl.float32)
    first = program * rows_per_program
    for step in range(0, rows_per_program):
        row = first + step
        valid = row < rows
        mask = in_row & valid
        offset = row.to(tl.int64) * cols
        g = tl.load(g_ptr + offset + columns, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offset + columns, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row, mask=valid, other=0.0)
        if HAS_MEAN:
            x_hat = (x - tl.load(mean_ptr + row, mask=valid, other=0.0)) * rstd
        else:
            x_hat = x * rstd
        x_hat = tl.where(mask, x_hat, 0.0)
        if WANTS_DX:
            if HAS_WEIGHT:
                dy = g * weight
            else:
                dy = g
            correction = x_hat * (tl.sum(dy * x_hat, axis=0) / cols)
            if HAS_MEAN:
                correction += tl.sum(dy, axis=0) / cols
            dx = (dy - correction) * rstd
            if HAS_ADDEND:
                dx += tl.load(addend_ptr + offset + columns, mask=mask, other=0.0).to(tl.float32)
            tl.store(dx_ptr + offset + columns, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if WANTS_DWEIGHT:
            dweight += g * x_hat
        if WANTS_DBIAS:
            dbias += g
    if WANTS_DWEIGHT:
        tl.store(dweight_ptr + program * cols + columns, dweight, mask=in_row)
    if WANTS_DBIAS:
        tl.store(dbias_ptr + program * cols + columns, dbias, mask=in_row)


def norm_backward(
    g: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    wants: tuple[bool, bool, bool],
    addend: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The gradients of a norm over ``x``'s last dim: input, weight and bias (None where not wanted;
    a layer norm has ``mean``, an RMS norm none). Weight and bias gradients are float32 here.
    ``addend`` (of ``x``'s shape) is added to the input's gradient before its one rounding."""
    cols = x.shape[-1]
    rows = x.numel() // cols if cols else 0
    wants_dx, wants_dweight, wants_dbias = wants
    wants_dweight = wants_dweight and weight is not None
    if rows == 0 or cols == 0:
        return _empty_gradients(x, wants_dx, wants_dweight, wants_dbias)
    g, x = g.contiguous(), x.contiguous()
    addend = addend.contiguous() if addend is not None and wants_dx else None
    rows_per_program = max(1, -(-rows // _TARGET_PROGRAMS))
    programs = -(-rows // rows_per_program)
    dx = torch.empty_like(x) if wants_dx else x  # a pointer the kernel does not write
    dweight = torch.empty(programs, cols, device=x.device, dtype=torch.float32) if wants_dweight else rstd
    dbias = torch.empty(programs, cols, device=x.device, dtype=torch.float32) if wants_dbias else rstd
    block = triton.next_power_of_2(cols)
    _norm_backward_kernel[(programs,)](
        g, x, weight if weight is not None else rstd, mean if mean is not None else rstd,
        rstd.reshape(-1).contiguous(), addend if addend is not None else rstd, dx, dweight, dbias, rows, cols,
        rows_per_program, HAS_MEAN=mean is not None, HAS_WEIGHT=weight is not None,
        HAS_ADDEND=addend is not None, WANTS_DX=wants_dx,
        WANTS_DWEIGHT=wants_dweight, WANTS_DBIAS=wants_dbias, BLOCK=block, num_warps=_warps(block),
    )  # fmt: skip
    return (
        dx if wants_dx else None,
        dweight.sum(0) if wants_dweight else None,
        dbias.sum(0) if wants_dbias else None,
    )


def _warps(block: int) -> int:
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


def _empty_gradients(
    x: torch.Tensor, wants_dx: bool, wants_dweight: bool, wants_dbias: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """No rows (or no columns): the input's gradient is empty, the parameters' are zeros."""
    zeros = torch.zeros(x.shape[-1], device=x.device, dtype=torch.float32)
    return (
        torch.empty_like(x) if wants_dx else None,
        zeros if wants_dweight else None,
        zeros.clone() if wants_dbias else None,
    )


def _rounded(t: torch.Tensor | None, like: torch.Tensor | None) -> torch.Tensor | None:
    if t is None or like is None:
        return None
    return t.to(like.dtype).reshape(like.shape)


def layer_norm_backward(
    g: torch.Tensor, a: torch.Tensor, normalized_shape: Sequence[int], mean: torch.Tensor, rstd: torch.Tensor,
    weight: torch.Tensor | None, bias: torch.Tensor | None, output_mask: Sequence[bool],
    addend: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """``ltorch.layer_norm_backward``'s contract (gradients in their tensors' dtypes)."""
    wants = (bool(output_mask[0]), bool(output_mask[1]), bool(output_mask[2]) and bias is not None)
    mean = mean.reshape(-1).to(torch.float32).contiguous()
    grad_a, grad_weight, grad_bias = norm_backward(g, a, mean, rstd.to(torch.float32), weight, wants, addend)
    return grad_a, _rounded(grad_weight, weight), _rounded(grad_bias, bias)


def rms_norm_backward(
    g: torch.Tensor, a: torch.Tensor, normalized_shape: Sequence[int], rstd: torch.Tensor,
    weight: torch.Tensor | None, output_mask: Sequence[bool], weighting: str = "torch",
    addend: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """``ltorch.rms_norm_backward``'s contract (gradients in their tensors' dtypes)."""
    wants = (bool(output_mask[0]), bool(output_mask[1]), False)
    grad_a, grad_weight, _ = norm_backward(g, a, None, rstd.to(torch.float32), weight, wants, addend)
    return grad_a, _rounded(grad_weight, weight)
