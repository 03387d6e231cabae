"""The fused linear + cross entropy (``thunder/torch/fused_losses.py``), a block of rows at a time.

For each block of rows ``c`` (at most ``CHUNK_BYTES`` of float32 logits):

* ``logits_c = x_c @ weight.T (+ bias)`` in ``x``'s dtype (cuBLAS through torch);
* each row's loss in float32 math, and, when gradients are wanted, ``(softmax - one_hot(target)) *
  scale`` (``scale`` = 1 / kept rows for "mean", 1 for "sum", 0 on ignored rows) written over
  ``logits_c`` in ``x``'s dtype: one Triton kernel on CUDA (``triton/cross_entropy.py``), torch ops
  elsewhere;
* ``grad_x[c] = grad_logits_c @ weight``; ``grad_weight += grad_logits_c.T @ x_c``; ``grad_bias +=``
  the column sums of ``grad_logits_c``.

Precision: each block's products are computed by one matmul (float32 accumulation inside), so
``grad_x`` is rounded once, as in eager. ``grad_weight`` sums the blocks' products: half-precision
inputs sum them in a float32 accumulator (each block's product rounded once to the input's dtype,
the sum rounded once at the end), so more blocks do not mean more roundings of the running sum;
float32 inputs accumulate in place. The bias's gradient is summed in float32 too.

Memory: besides the inputs and the gradients, one block of logits (plus, for half precision without
Triton, its float32 copy) and, for half-precision ``grad_weight`` over several blocks, the float32
accumulator and one block's product.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch
import torch.nn.functional as F

import thunder.torch as ltorch
from thunder.core.executor import OperatorExecutor

__all__ = [
    "CHUNK_BYTES",
    "chunk_rows",
    "linear_cross_entropy_loss",
    "linear_cross_entropy_with_grads",
    "register_linear_cross_entropy",
]

# The most bytes of float32 logits one block of rows holds (GPT-2, V = 50304: 2668 rows a block;
# on CUDA the Triton kernel works in the logits' own dtype, so a bf16 block holds half of it).
CHUNK_BYTES = 512 * 2**20
_HALF = (torch.float16, torch.bfloat16)
# addmm with half-precision factors accumulating into float32 (CUDA kernels only; newer PyTorch)
_ADDMM_TO_FLOAT32 = "dtype_out" in torch.ops.aten.addmm.overloads()


def chunk_rows(rows: int, classes: int) -> int:
    """Rows per block: as many as fit ``CHUNK_BYTES`` of float32 logits, at least 1."""
    return max(1, min(rows, CHUNK_BYTES // (4 * max(classes, 1))))


def linear_cross_entropy_loss(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor, ignore_index: int,
    reduction: str, upcast: bool,
) -> torch.Tensor:  # fmt: skip
    return _chunked(x, weight, bias, target, ignore_index, reduction, upcast, (False, False, False))[0]


def linear_cross_entropy_with_grads(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor, ignore_index: int,
    reduction: str, upcast: bool, wanted: Sequence[bool],
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    return _chunked(x, weight, bias, target, ignore_index, reduction, upcast, wanted)


class _Gradients:
    """The gradients being accumulated over the blocks (``None`` where not wanted)."""

    def __init__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, wanted: Sequence[bool],
                 blocks: int) -> None:  # fmt: skip
        self.x = torch.empty_like(x) if wanted[0] else None
        self.weight_dtype, self.bias_dtype = weight.dtype, None if bias is None else bias.dtype
        accumulate_in_float32 = weight.dtype in _HALF and blocks > 1
        self.weight = None
        if wanted[1]:
            dtype = torch.float32 if accumulate_in_float32 else weight.dtype
            self.weight = torch.zeros(weight.shape, dtype=dtype, device=weight.device)
        self.bias = (
            torch.zeros(bias.shape, dtype=torch.float32, device=bias.device)
            if bias is not None and wanted[2]
            else None
        )

    def add(self, grad_logits: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rows: slice) -> None:
        if self.x is not None:
            torch.mm(grad_logits, weight, out=self.x[rows])
        if self.weight is not None:
            if self.weight.dtype == grad_logits.dtype:
                self.weight.addmm_(grad_logits.T, x)
            elif grad_logits.is_cuda and _ADDMM_TO_FLOAT32:  # half inputs, float32 sum: one cuBLAS call
                torch.ops.aten.addmm.dtype_out(self.weight, grad_logits.T, x, torch.float32, out=self.weight)
            else:
                self.weight.add_(grad_logits.T @ x)
        if self.bias is not None:
            self.bias.add_(grad_logits.sum(0, dtype=torch.float32))

    def results(
        self, x_shape: torch.Size
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        grad_x = None if self.x is None else self.x.reshape(x_shape)
        grad_weight = None if self.weight is None else self.weight.to(self.weight_dtype)
        grad_bias = None if self.bias is None else self.bias.to(self.bias_dtype)
        return grad_x, grad_weight, grad_bias


def _chunked(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor, ignore_index: int,
    reduction: str, upcast: bool, wanted: Sequence[bool],
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    rows = x.reshape(-1, x.shape[-1])
    count, classes = rows.shape[0], weight.shape[0]
    kept = target != ignore_index
    # the kept rows' count stays on the device: no synchronization before the blocks
    scale = 1.0 / kept.sum().to(torch.float32) if reduction == "mean" else torch.ones((), device=x.device)
    gradient = any(wanted)
    step = chunk_rows(count, classes)
    grads = _Gradients(rows, weight, bias, wanted, -(-count // step))
    total = torch.zeros(
        (), dtype=torch.float64 if x.dtype == torch.float64 else torch.float32, device=x.device
    )
    for start in range(0, count, step):
        block = slice(start, start + step)
        logits = F.linear(rows[block], weight, bias)
        losses = _loss_and_gradient_(logits, target[block], scale, ignore_index, gradient)
        total += losses.sum(dtype=total.dtype)
        if gradient:
            grads.add(logits, rows[block], weight, block)
        del logits  # the next block's logits take its memory
    loss = total * scale if reduction == "mean" else total
    return (loss.to(torch.float32 if upcast else x.dtype), *grads.results(x.shape))


def _loss_and_gradient_(logits: torch.Tensor, target: torch.Tensor, scale: torch.Tensor, ignore_index: int,
                        gradient: bool) -> torch.Tensor:  # fmt: skip
    """Each row's loss (float32, float64 for float64 logits); with ``gradient``, ``logits`` overwritten by ``scale`` times the
    gradient of the rows' summed loss."""
    if (
        logits.is_cuda
        and logits.dtype in (torch.float32, *_HALF)
        and importlib.util.find_spec("triton") is not None
    ):
        from thunder.executors.triton.cross_entropy import triton_cross_entropy_loss_and_gradient_

        return triton_cross_entropy_loss_and_gradient_(logits, target, scale, ignore_index, gradient=gradient)
    return _torch_loss_and_gradient_(logits, target, scale, ignore_index, gradient)


def _torch_loss_and_gradient_(logits: torch.Tensor, target: torch.Tensor, scale: torch.Tensor, ignore_index: int,
                              gradient: bool) -> torch.Tensor:  # fmt: skip
    compute = logits.to(torch.float32) if logits.dtype in _HALF else logits  # float32 logits: in place
    lse = torch.logsumexp(compute, 1)
    kept = target != ignore_index
    safe_target = torch.where(kept, target, 0).unsqueeze(1)
    losses = torch.where(kept, lse - compute.gather(1, safe_target).squeeze(1), 0.0)
    if gradient:
        share = torch.where(kept, scale.to(compute.dtype), 0.0).unsqueeze(1)
        compute.sub_(lse.unsqueeze(1)).exp_().mul_(share)
        compute.scatter_add_(1, safe_target, -share)
        if compute is not logits:
            logits.copy_(compute)
    return losses


def register_linear_cross_entropy(executor: OperatorExecutor) -> None:
    """Claim both fused symbols. Never left to a fusion executor: its regions would take the
    decomposition, which materializes the logits the symbol exists to avoid."""
    for symbol, fn in (
        (ltorch.linear_cross_entropy_loss, linear_cross_entropy_loss),
        (ltorch.linear_cross_entropy_with_grads, linear_cross_entropy_with_grads),
    ):
        operator = executor.register_operator(fn.__name__, fn=fn, like=symbol)
        executor.register_implementation(symbol, operator, defers_to_fusion=False)
