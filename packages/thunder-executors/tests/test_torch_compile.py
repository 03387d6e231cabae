"""The torch.compile executor: fusion regions run by Inductor, checked against eager forward and backward.

Inductor compiles for the CPU too (it needs a C++ compiler there), but slowly: a few seconds per
region, so the default test is one small MLP; the GPT-like block is marked slow.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from tiny_models import Block

import thunder
from thunder.executors import torch_compile_executor
from thunder.executors.torch_compile import CompiledRegion

available, reason = torch_compile_executor.is_available()
if not available:
    print(f"skipping the torch.compile executor's tests: {reason}")
    pytest.skip(f"the torchcompile executor is unavailable: {reason}", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _regions(trace: thunder.Trace) -> list:
    return [b for b in trace.bound_symbols if b.symbol.name.startswith("TorchCompile")]


def _check_training_step(model: torch.nn.Module, *inputs: torch.Tensor) -> tuple[str, str]:
    reference = copy.deepcopy(model)
    jmodel = thunder.jit(model, executors=["torchcompile"])
    actual, expected = jmodel(*inputs), reference(*inputs)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)
    grad = torch.randn_like(expected)
    actual.backward(grad)
    expected.backward(grad)
    for (name, ours), eager in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(ours.grad, eager.grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name}: {m}")
    forward, backward = thunder.last_traces(jmodel)[-1], thunder.last_backward_traces(jmodel)[-1]
    for trace in (forward, backward):
        regions = _regions(trace)
        assert regions, str(trace)
        for region in regions:
            runner = getattr(region.symbol.fn, "runner", region.symbol.fn)  # inside the fallback wrapper
            assert isinstance(runner, CompiledRegion) and runner.compiled is not None
            assert getattr(region.symbol.fn, "error", None) is None, "the region fell back to torch"
    return str(forward), str(backward)


def test_mlp_forward_and_backward_match_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(DEVICE)
    forward, backward = _check_training_step(model, torch.randn(5, 8, device=DEVICE))
    assert "TorchCompile0(" in forward and "TorchCompile0(" in backward
    assert "# t0 = prims.linear(" in forward and "prims.erf(" in forward  # prims print as comments


def test_random_prims_stay_with_the_torch_executor() -> None:
    """Dropout's random numbers come from torch, as with the torch executor: never fused."""
    fn = lambda x: F.dropout(x, 0.5) * 2
    jitted = thunder.jit(fn, executors=["torchcompile"])
    x = torch.ones(4, 4, device=DEVICE)
    torch.manual_seed(0)
    actual = jitted(x)
    torch.manual_seed(0)
    torch.testing.assert_close(actual, fn(x))
    trace = thunder.last_traces(jitted)[-1]
    for region in _regions(trace):
        assert all("random" not in b.symbol.tags for b in region.subsymbols)
    assert "TorchCompile0(" in str(trace)


@pytest.mark.slow
def test_gpt_block_forward_and_backward_match_eager() -> None:
    torch.manual_seed(0)
    forward, backward = _check_training_step(Block(16, 2).to(DEVICE), torch.randn(2, 8, 16, device=DEVICE))
    assert "TorchCompile0(" in forward and "prims.amax(" in forward
    assert "TorchCompile0(" in backward
