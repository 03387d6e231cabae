"""The per-block kernel of the fused linear + cross entropy (``triton_cross_entropy_loss_and_gradient_``
in thunder/executors/triton/cross_entropy.py) against eager, and the fused operator on CUDA.

Without CUDA the kernel runs in Triton's interpreter on CPU tensors (``TRITON_INTERPRET`` is set
here, before triton is imported). The reference is eager ``F.cross_entropy`` on the float32 upcast
of the logits: per-row losses, and the gradient of ``scale * sum(losses)``.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed (pip install 'thunder[triton]')", allow_module_level=True)

from thunder.executors import linear_cross_entropy  # noqa: E402
from thunder.executors.triton.cache import interpret_mode  # noqa: E402
from thunder.executors.triton.cross_entropy import triton_cross_entropy_loss_and_gradient_  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and not interpret_mode():
    pytest.skip("no CUDA device and TRITON_INTERPRET is not set", allow_module_level=True)


def _reference(logits: torch.Tensor, target: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    upcast = logits.detach().float().requires_grad_()
    losses = F.cross_entropy(upcast, target, reduction="none")
    (losses.sum() * scale).backward()
    return losses.detach(), upcast.grad.to(logits.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block", [None, 16])  # one step per row, or a loop over 3 steps with a ragged end
def test_loss_and_gradient_in_place(dtype: torch.dtype, block: int | None) -> None:
    generator = torch.Generator().manual_seed(1)
    logits = (torch.randn(6, 37, generator=generator) * 4).to(DEVICE, dtype)
    target = torch.randint(0, 37, (6,), generator=generator).to(DEVICE)
    target[2] = -100
    expected_losses, expected_grad = _reference(logits, target, 0.25)
    scale = torch.tensor(0.25, device=DEVICE)
    losses = triton_cross_entropy_loss_and_gradient_(logits, target, scale, -100, block=block)
    assert losses.dtype == torch.float32
    torch.testing.assert_close(losses, expected_losses, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, expected_grad)  # overwritten by the gradient, in the logits' dtype


def test_loss_only_leaves_the_logits() -> None:
    logits = torch.randn(4, 10, device=DEVICE)
    target = torch.tensor([1, -100, 3, 9], device=DEVICE)
    before = logits.clone()
    losses = triton_cross_entropy_loss_and_gradient_(
        logits, target, torch.ones((), device=DEVICE), -100, gradient=False
    )
    torch.testing.assert_close(losses, F.cross_entropy(before, target, reduction="none"))
    assert torch.equal(logits, before)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the fused operator picks the Triton kernel on CUDA only"
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_operator_on_cuda(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linear_cross_entropy, "CHUNK_BYTES", 3 * 4 * 37)
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(14, 16, generator=generator).to("cuda", dtype).requires_grad_()
    weight = torch.randn(37, 16, generator=generator).to("cuda", dtype).requires_grad_()
    target = torch.randint(0, 37, (14,), generator=generator).cuda()
    target[5] = -100
    loss, grad_x, grad_weight, _ = linear_cross_entropy.linear_cross_entropy_with_grads(
        x.detach(), weight.detach(), None, target, -100, "mean", True, (True, True, False)
    )
    expected = F.cross_entropy(F.linear(x, weight).float(), target)
    expected.backward()
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(loss, expected, **tolerance)
    torch.testing.assert_close(grad_x, x.grad, **tolerance)
    torch.testing.assert_close(grad_weight, weight.grad, **tolerance)
