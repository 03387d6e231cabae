"""Cross entropy over class indices as two Triton kernels that read the logits in their own dtype.

The torch kernels (``torch_kernels.py``) upcast half-precision logits before ``log_softmax`` and,
in the backward, before ``softmax``: for a language model's [N, V] logits (GPT-2: 16384 x 50257)
each upcast, the log-probabilities, the probabilities and the scattered gradient are float32
temporaries of 3.3 GB. Here each program owns one row and streams it in blocks of ``BLOCK``
columns, converting every block to float32 in registers:

* the forward keeps a running maximum and a running sum of exponentials (rescaled whenever the
  maximum grows), so one read of the row gives its log-sum-exp; it also reads the target's logit
  and writes two float32 numbers per row: the loss (``lse - logit[target]``, 0 on ignored rows)
  and the log-sum-exp. The mean or sum over the [N] losses is left to torch.
* the backward reads the row once more and writes ``(exp(x - lse) - one_hot(target)) * share``
  straight into a gradient of the logits' dtype, ``share`` being the row's part of the loss's
  gradient (divided by the number of kept rows for the mean; 0 on ignored rows).

So nothing of size [N, V] exists but the logits and their gradient, and each is read or written
the fewest times possible: the forward reads the logits once, the backward reads them once and
writes the gradient once. The math is float32 whatever the logits' dtype, as in the decompositions
of ``cross_entropy_with_lse`` and ``cross_entropy_backward`` (``thunder/torch/nn.py``), whose
contract the Python functions here keep: the loss in the logits' dtype, the log-sum-exp float32.

This module imports triton; the torch executor imports it only when it meets CUDA logits.
Kernels run on CPU tensors in Triton's interpreter (``TRITON_INTERPRET=1`` set before triton is
imported), which is how the tests check them without a GPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = [
    "triton_cross_entropy_with_lse",
    "triton_cross_entropy_backward",
    "triton_cross_entropy_loss_and_gradient_",
    "use_triton_cross_entropy",
    "MAX_BLOCK",
]

MAX_BLOCK = 4096  # columns per step of a row; larger rows are looped over
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_REDUCTIONS = ("mean", "sum", "none")


@triton.jit
def _row_loss(row_ptr, target, columns, ignore_index, BLOCK: tl.constexpr):
    """A row's log-sum-exp (one pass, running maximum) and its loss at ``target`` (0 where ignored)."""
    offsets = tl.arange(0, BLOCK)
    running_max = tl.full((), float("-inf"), tl.float32)
    running_sum = tl.full((), 0.0, tl.float32)
    for start in range(0, columns, BLOCK):
        cols = start + offsets
        x = tl.load(row_ptr + cols, mask=cols < columns, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, 0))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max), 0)
        running_max = new_max
    lse = running_max + tl.log(running_sum)
    kept = target != ignore_index
    in_range = kept & (target >= 0) & (target < columns)
    picked = tl.load(row_ptr + tl.where(in_range, target, 0), mask=in_range, other=0.0).to(tl.float32)
    return lse, tl.where(kept, lse - picked, 0.0)


@triton.jit
def _forward_kernel(
    a_ptr, a_row_stride, target_ptr, loss_ptr, lse_ptr, columns, ignore_index,
    BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    lse, loss = _row_loss(a_ptr + row * a_row_stride, tl.load(target_ptr + row), columns, ignore_index, BLOCK)
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


@triton.jit
def _backward_kernel(
    g_ptr, g_stride, count_ptr, a_ptr, a_row_stride, target_ptr, lse_ptr, grad_ptr, grad_row_stride,
    columns, ignore_index, MEAN: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(target_ptr + row)
    kept = target != ignore_index
    share = tl.load(g_ptr + row * g_stride).to(tl.float32)
    if MEAN:
        share = share / tl.load(count_ptr)
    share = tl.where(kept, share, 0.0)
    lse = tl.load(lse_ptr + row)
    row_ptr = a_ptr + row * a_row_stride
    grad_row_ptr = grad_ptr + row * grad_row_stride
    offsets = tl.arange(0, BLOCK)
    for start in range(0, columns, BLOCK):
        cols = start + offsets
        mask = cols < columns
        x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        probabilities = tl.exp(x - lse)
        one_hot = tl.where(cols == target, 1.0, 0.0)
        grad = tl.where(kept, (probabilities - one_hot) * share, 0.0)
        tl.store(grad_row_ptr + cols, grad.to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _loss_and_gradient_kernel(
    a_ptr, a_row_stride, target_ptr, loss_ptr, scale_ptr, columns, ignore_index,
    GRADIENT: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The forward's loss and, in the same program, the gradient written over the row it read
    (each block is read before it is overwritten, by the same program)."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = a_ptr + row * a_row_stride
    target = tl.load(target_ptr + row)
    lse, loss = _row_loss(row_ptr, target, columns, ignore_index, BLOCK)
    tl.store(loss_ptr + row, loss)
    kept = target != ignore_index
    offsets = tl.arange(0, BLOCK)
    if GRADIENT:
        share = tl.where(kept, tl.load(scale_ptr).to(tl.float32), 0.0)
        for start in range(0, columns, BLOCK):
            cols = start + offsets
            mask = cols < columns
            x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            grad = (tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)) * share
            tl.store(row_ptr + cols, grad.to(a_ptr.dtype.element_ty), mask=mask)


def _block(columns: int, block: int | None) -> int:
    """Columns per step: the row's width rounded up to a power of two, at most ``MAX_BLOCK``."""
    if block is not None:
        return block
    return min(triton.next_power_of_2(columns), MAX_BLOCK)


def _num_warps(block: int) -> int:
    return 8 if block >= 2048 else 4 if block >= 512 else 1


def _unit_column_stride(a: torch.Tensor) -> torch.Tensor:
    """``a`` if its rows are contiguous (any row stride, e.g. a slice of wider logits), else a copy."""
    return a if a.stride(1) == 1 or a.shape[1] == 1 else a.contiguous()


def _check_arguments(a: torch.Tensor, target: torch.Tensor, reduction: str) -> None:
    if a.ndim != 2 or target.shape != (a.shape[0],):
        raise ValueError(
            f"expected logits [N, C] and targets [N], got {tuple(a.shape)} and {tuple(target.shape)}"
        )
    if a.dtype not in _DTYPES:
        raise ValueError(f"logits of dtype {a.dtype} are not supported (expected one of {_DTYPES})")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _on_device(a: torch.Tensor) -> Any:
    """A context making ``a``'s GPU the current one (Triton launches on the current device)."""
    return torch.cuda.device(a.device) if a.is_cuda else contextlib.nullcontext()


def triton_cross_entropy_with_lse(
    a: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str, *, block: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss (in ``a``'s dtype) and each row's log-sum-exp (float32) of logits ``a`` [N, C].

    ``block`` overrides the columns per step (a power of two), for tests of the loop over a row.
    """
    _check_arguments(a, target, reduction)
    a = _unit_column_stride(a)
    target = target.contiguous()
    rows, columns = a.shape
    losses = torch.empty(rows, dtype=torch.float32, device=a.device)
    lse = torch.empty(rows, dtype=torch.float32, device=a.device)
    step = _block(columns, block)
    if rows:
        with _on_device(a):
            _forward_kernel[(rows,)](
                a,
                a.stride(0),
                target,
                losses,
                lse,
                columns,
                ignore_index,
                BLOCK=step,
                num_warps=_num_warps(step),
            )
    if reduction == "none":
        return losses.to(a.dtype), lse
    loss = losses.sum()
    if reduction == "mean":
        loss = loss / (target != ignore_index).sum().to(torch.float32)
    return loss.to(a.dtype), lse


def triton_cross_entropy_backward(
    g: torch.Tensor, a: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, ignore_index: int, reduction: str,
    *, block: int | None = None,
) -> torch.Tensor:  # fmt: skip
    """The gradient of the logits ``a`` (in their dtype) given the loss's gradient ``g``.

    ``g`` is a scalar for "mean" and "sum", [N] for "none"; ``lse`` is the forward's float32
    log-sum-exp. ``block`` as for the forward.
    """
    _check_arguments(a, target, reduction)
    a = _unit_column_stride(a)
    target = target.contiguous()
    lse = lse.to(torch.float32).contiguous()
    rows, columns = a.shape
    grad = torch.empty((rows, columns), dtype=a.dtype, device=a.device)
    g = g.to(a.device)
    g_stride = 0 if g.ndim == 0 else g.stride(0)
    mean = reduction == "mean"
    # the number of kept rows, read by the kernel (no synchronization with the host)
    count = (target != ignore_index).sum().to(torch.float32) if mean else lse
    step = _block(columns, block)
    if rows:
        with _on_device(a):
            _backward_kernel[(rows,)](
                g, g_stride, count, a, a.stride(0), target, lse, grad, grad.stride(0), columns, ignore_index,
                MEAN=mean, BLOCK=step, num_warps=_num_warps(step),
            )  # fmt: skip
    return grad


def triton_cross_entropy_loss_and_gradient_(
    a: torch.Tensor, target: torch.Tensor, scale: torch.Tensor, ignore_index: int, *, gradient: bool = True,
    block: int | None = None,
) -> torch.Tensor:  # fmt: skip
    """Each row's float32 loss of logits ``a`` [N, C]; with ``gradient``, ``a`` is overwritten by
    the gradient of ``scale * sum(losses)`` (``scale`` a 0-dim tensor, read on the device: no
    synchronization). The fused linear + cross entropy calls it on each block of logits
    (``executors/linear_cross_entropy.py``); ``block`` as for the forward.
    """
    _check_arguments(a, target, "sum")
    if a.shape[1] > 1 and a.stride(1) != 1:
        raise ValueError("the logits are overwritten by their gradient: their rows must be contiguous")
    target = target.contiguous()
    rows, columns = a.shape
    losses = torch.empty(rows, dtype=torch.float32, device=a.device)
    step = _block(columns, block)
    if rows:
        with _on_device(a):
            _loss_and_gradient_kernel[(rows,)](
                a, a.stride(0), target, losses, scale, columns, ignore_index, GRADIENT=gradient, BLOCK=step,
                num_warps=_num_warps(step),
            )  # fmt: skip
    return losses


def use_triton_cross_entropy(a: Any, target: Any = None, *args: Any, **kwargs: Any) -> bool:
    """Whether the kernels here take a call with logits ``a`` (a proxy): 2-D CUDA logits of
    float32, bfloat16 or float16, with triton installed."""
    return (
        a.device.type == "cuda"
        and a.ndim == 2
        and a.dtype.torch_dtype in _DTYPES
        and importlib.util.find_spec("triton") is not None
    )
