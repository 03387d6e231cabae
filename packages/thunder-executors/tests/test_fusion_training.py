"""A GPT-style training step with a fusion executor: regions in both traces, gradients like eager.

Triton runs on the GPU, or in its interpreter on the CPU (``TRITON_INTERPRET`` is set at import,
before any kernel is decorated); nvFuser needs CUDA and nvFuser, and skips with the reason otherwise.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import copy  # noqa: E402
import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tiny_models import Block  # noqa: E402

import thunder  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
REGION_NAMES = {"triton": "TritonFusion", "nvfuser": "nvFusion"}


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _executor_or_skip(name: str) -> None:
    if name == "triton" and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install 'thunder[triton]')")
    module = importlib.import_module(f"thunder.executors.{name}.executor")
    available, reason = module.executor.is_available()
    if not available:
        print(f"skipping the {name} training step: {reason}")
        pytest.skip(f"the {name} executor is unavailable: {reason}")


@pytest.mark.parametrize("executor", ["triton", "nvfuser"])
def test_gpt_training_step_with_fusion_regions(executor: str) -> None:
    _executor_or_skip(executor)
    torch.manual_seed(0)
    model = TinyGPT().to(DEVICE)
    reference = copy.deepcopy(model)
    jmodel = thunder.jit(model, executors=[executor])
    idx = torch.randint(0, 64, (2, 16), device=DEVICE)
    targets = torch.randint(0, 64, (2, 16), device=DEVICE)
    loss = F.cross_entropy(jmodel(idx).flatten(0, 1), targets.flatten())
    loss.backward()
    expected = F.cross_entropy(reference(idx).flatten(0, 1), targets.flatten())
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for ours, eager in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours.grad, eager.grad, atol=1e-4, rtol=1e-3)
    region = REGION_NAMES[executor]
    forward, backward = str(thunder.last_traces(jmodel)[-1]), str(thunder.last_backward_traces(jmodel)[-1])
    assert f"{region}0(" in forward
    assert f"{region}0(" in backward
    assert "# t" in forward  # the fused prims print as comments under each region


@pytest.mark.parametrize("executor", ["triton", "nvfuser"])
def test_mnist_training_forward_trace_shows_fusion_regions(executor: str) -> None:
    _executor_or_skip(executor)
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for n_in, n_out in [(784, 64), (64, 28)]:
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(0.1)]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(28, 10)).to(DEVICE).train()
    jnet = thunder.jit(net, executors=[executor])
    data, targets = torch.rand(8, 784, device=DEVICE), torch.randint(0, 10, (8,), device=DEVICE)
    F.cross_entropy(jnet(data), targets).backward()
    forward = str(thunder.last_traces(jnet)[-1])
    region = REGION_NAMES[executor]
    assert f"{region}0(" in forward
    comment_lines = [line.strip() for line in forward.splitlines() if line.strip().startswith("# t")]
    assert any("prims.where" in line or "prims.gt" in line for line in comment_lines), forward
    assert all(p.grad is not None for p in net.parameters())
