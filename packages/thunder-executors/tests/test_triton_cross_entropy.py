"""The Triton cross entropy kernels (thunder/executors/triton/cross_entropy.py) against eager.

Without CUDA the kernels run in Triton's interpreter on CPU tensors: ``TRITON_INTERPRET`` must be
set before the kernels are decorated, so it is set here, at import. The references are eager
``F.cross_entropy`` on the float32 upcast of the logits, cast to the logits' dtype: the kernels
compute in float32 and round once, so half-precision results match to the rounding of their dtype.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import thunder  # noqa: E402
from thunder.core import dtypes  # noqa: E402

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed (pip install 'thunder[triton]')", allow_module_level=True)

from thunder.executors import torch_kernels  # noqa: E402
from thunder.executors.triton.cache import interpret_mode  # noqa: E402
from thunder.executors.triton.cross_entropy import (  # noqa: E402
    triton_cross_entropy_backward,
    triton_cross_entropy_with_lse,
    use_triton_cross_entropy,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and not interpret_mode():
    pytest.skip("no CUDA device and TRITON_INTERPRET is not set", allow_module_level=True)

REDUCTIONS = ["mean", "sum", "none"]
DTYPES = [torch.float32, torch.bfloat16]


def _tolerance(dtype: torch.dtype) -> dict:
    # float32: summation order; half precision: one rounding of a float32 result (assert_close's own)
    return dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else {}


def _inputs(rows: int, columns: int, dtype: torch.dtype, *, ignore_index: int = -100,
            padding: int = 0) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Logits (a slice of wider ones when ``padding``) and targets with two ignored rows."""
    generator = torch.Generator().manual_seed(rows * 1000 + columns)
    wide = (torch.randn(rows, columns + padding, generator=generator) * 4).to(DEVICE, dtype)
    target = torch.randint(0, columns, (rows,), generator=generator).to(DEVICE)
    target[1] = target[rows - 2] = ignore_index
    return wide[:, :columns], target


def _reference(a: torch.Tensor, target: torch.Tensor, g: torch.Tensor, ignore_index: int,
               reduction: str) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Eager loss and logits' gradient, computed in float32 and cast to ``a``'s dtype."""
    x = a.detach().float().requires_grad_()
    loss = F.cross_entropy(x, target, ignore_index=ignore_index, reduction=reduction)
    (grad,) = torch.autograd.grad(loss, x, g.float())
    return loss.to(a.dtype), grad.to(a.dtype)


def _check(a: torch.Tensor, target: torch.Tensor, reduction: str, *, ignore_index: int = -100,
           block: int | None = None) -> None:  # fmt: skip
    g = torch.randn(() if reduction != "none" else (2 * a.shape[0],), device=DEVICE).to(a.dtype)
    if reduction == "none":
        g = g[::2]  # a strided gradient
    expected_loss, expected_grad = _reference(a, target, g, ignore_index, reduction)
    loss, lse = triton_cross_entropy_with_lse(a, target, ignore_index, reduction, block=block)
    assert loss.dtype == a.dtype and lse.dtype == torch.float32 and lse.shape == (a.shape[0],)
    torch.testing.assert_close(loss, expected_loss, **_tolerance(a.dtype))
    torch.testing.assert_close(lse, torch.logsumexp(a.float(), 1), atol=1e-5, rtol=1e-5)
    grad = triton_cross_entropy_backward(g, a, target, lse, ignore_index, reduction, block=block)
    assert grad.dtype == a.dtype and grad.shape == a.shape
    torch.testing.assert_close(grad, expected_grad, **_tolerance(a.dtype))
    kept = target != ignore_index
    assert (grad[~kept] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_rows_longer_than_a_block(dtype: torch.dtype, reduction: str) -> None:
    """5000 classes in steps of 1024 (the last one masked), the logits a slice of wider ones."""
    a, target = _inputs(12, 5000, dtype, padding=37)
    assert not a.is_contiguous()
    _check(a, target, reduction, block=1024)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_rows_of_one_block(dtype: torch.dtype, reduction: str) -> None:
    """The default step: the row's width rounded up to a power of two."""
    a, target = _inputs(16, 300, dtype)
    _check(a, target, reduction, ignore_index=-100)


def test_other_ignore_index_and_float16() -> None:
    a, target = _inputs(8, 33, torch.float16, ignore_index=5)
    _check(a, target, "mean", ignore_index=5)


def test_strided_columns_are_copied() -> None:
    a, target = _inputs(8, 40, torch.float32)
    _check(a.t().contiguous().t(), target, "sum", block=16)


def test_all_ignored_mean_is_nan_like_eager() -> None:
    a = torch.randn(3, 5, device=DEVICE)
    target = torch.full((3,), -100, device=DEVICE)
    loss, _ = triton_cross_entropy_with_lse(a, target, -100, "mean")
    assert loss.isnan() and F.cross_entropy(a, target).isnan()


def test_checker() -> None:
    def proxy(device: str, ndim: int, dtype: dtypes.dtype) -> SimpleNamespace:
        return SimpleNamespace(device=SimpleNamespace(type=device), ndim=ndim, dtype=dtype)

    assert use_triton_cross_entropy(proxy("cuda", 2, dtypes.bfloat16))
    assert use_triton_cross_entropy(proxy("cuda", 2, dtypes.float32))
    assert not use_triton_cross_entropy(proxy("cuda", 2, dtypes.float64))
    assert not use_triton_cross_entropy(proxy("cuda", 3, dtypes.float16))
    assert not use_triton_cross_entropy(proxy("cpu", 2, dtypes.bfloat16))


def _training_step(monkeypatch: pytest.MonkeyPatch, executors: list[str]) -> None:
    """A jitted bf16 cross entropy and its gradient run as the Triton kernels and match eager."""
    if DEVICE == "cpu":  # the interpreter runs the kernels on CPU tensors; let the claim take them
        monkeypatch.setattr(torch_kernels, "_cross_entropy_on_triton", lambda a: a.ndim == 2)
    logits = (torch.randn(32, 1000, device=DEVICE) * 3).to(torch.bfloat16).requires_grad_()
    target = torch.randint(0, 1000, (32,), device=DEVICE)
    target[4] = -100
    jitted = thunder.jit(F.cross_entropy, executors=executors)
    loss = jitted(logits, target)
    (grad,) = torch.autograd.grad(loss, logits)
    expected_loss, expected_grad = _reference(logits, target, torch.ones((), device=DEVICE), -100, "mean")
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(grad, expected_grad)
    forward, backward = str(thunder.last_traces(jitted)[-1]), str(thunder.last_backward_traces(jitted)[-1])
    assert "= triton_cross_entropy_with_lse(" in forward, forward
    assert "= triton_cross_entropy_backward(" in backward, backward


def test_jitted_training_step_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    if DEVICE != "cuda":
        print("skipped: needs a CUDA device")
        pytest.skip("needs a CUDA device")
    _training_step(monkeypatch, ["torch"])  # a fusion executor listed first takes the decomposition


def test_jitted_training_step_in_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim end to end on the CPU (the torch executor alone: a fusion executor listed first
    would take the decomposition, as test_a_fusion_executor_listed_first_takes_it checks)."""
    if DEVICE != "cpu":
        pytest.skip("the CUDA test covers it")
    _training_step(monkeypatch, ["torch"])


def test_a_fusion_executor_listed_first_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    if DEVICE == "cpu":
        monkeypatch.setattr(torch_kernels, "_cross_entropy_on_triton", lambda a: a.ndim == 2)
    logits = torch.randn(8, 100, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, 100, (8,), device=DEVICE)
    jitted = thunder.jit(F.cross_entropy, executors=["triton", "torch"])
    torch.testing.assert_close(jitted(logits, target), F.cross_entropy(logits, target))
    forward = str(thunder.last_traces(jitted)[-1])
    assert "TritonFusion0(" in forward and "triton_cross_entropy_with_lse" not in forward, forward
