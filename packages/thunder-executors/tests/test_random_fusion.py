"""Random ops next to a fusion executor's regions: run by PyTorch, in program order, seeded.

Fusion executors claim no random prim, so the draws stay PyTorch's own and keep their order even
where regions are placed early; the numbers are then eager's wherever the symbol runs whole (a
composite such as ``bernoulli`` may be decomposed around a region and draw differently, yet the same
for a seed). Triton runs in its interpreter on the CPU.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import thunder  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _executor(name: str) -> str:
    if name == "triton" and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install 'thunder[triton]')")
    if name == "nvfuser" and (
        not torch.cuda.is_available() or importlib.util.find_spec("nvfuser_direct") is None
    ):
        pytest.skip("nvFuser needs CUDA and nvfuser_direct")
    return name


def _seed_between_regions(x: torch.Tensor) -> torch.Tensor:
    a = F.dropout(x.sin(), 0.5)  # reads a region's output
    torch.manual_seed(4)
    b = torch.rand(x.shape, device=x.device)
    return a + (b.cos() * x.sin()).exp()  # joins the first region: it depends on the draw after the seed


@pytest.mark.parametrize("executor", ["triton", "nvfuser"])
def test_draws_keep_their_order_around_regions_and_match_eager(executor: str) -> None:
    jfn = thunder.jit(_seed_between_regions, executors=[_executor(executor)])
    x = torch.randn(64, device=DEVICE)
    for seed in (0, 1):
        torch.manual_seed(seed)
        expected = _seed_between_regions(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(jfn(x), expected)
    lines = str(thunder.last_traces(jfn)[-1]).splitlines()
    first = {
        key: next(i for i, line in enumerate(lines) if key in line) for key in ("dropout(", "seed(", "rand(")
    }
    assert first["dropout("] < first["seed("] < first["rand("]


@pytest.mark.parametrize("executor", ["triton", "nvfuser"])
def test_training_with_dropout_is_deterministic_for_a_seed(executor: str) -> None:
    def fn(x, w):
        return torch.bernoulli(torch.sigmoid(x)) * F.dropout(torch.tanh(x @ w), 0.3).exp()

    jfn = thunder.jit(fn, executors=[_executor(executor)])
    x = torch.randn(8, 16, device=DEVICE)
    w = torch.randn(16, 16, device=DEVICE, requires_grad=True)
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        first = jfn(x, w)
        (grad,) = torch.autograd.grad(first.sum(), w)
        second = jfn(x, w)  # the next call draws anew
        runs.append((first.detach(), grad, second.detach()))
        assert not torch.equal(first, second)
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b)
