"""Parts of fusion regions moved to the regions they share tensors with (core/transforms/region_moves.py).

Checked on the CPU with nvFuser's claims and region rules (its executor without the CUDA check; the
regions run as torch there): the tiny Llama and GPT of benchmarks/ train as eager, and the backward's
regions launch as one stage each where they used to launch several.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest
import torch

import thunder
from thunder.core.executor import register_executor
from thunder.core.fusion_fallback import ExecutorFallbackWarning
from thunder.core.symbol import BoundSymbol
from thunder.executors.nvfuser.executor import NvFuserExecutor

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
claim_executors = importlib.import_module("thunder.core.transforms.claim_executors")


class NvFuserClaimsOnCpu(NvFuserExecutor):
    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)


CLAIMS = register_executor(NvFuserClaimsOnCpu("nvfuser_claims_for_region_moves"))


def _benchmark_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _model(workload: str, monkeypatch: pytest.MonkeyPatch) -> tuple[torch.nn.Module, tuple]:
    if workload == "gpt":
        module = _benchmark_module("training", monkeypatch)
        config, make = dict(module.GPT_SIZES["tiny"]), module.GPT
    else:
        module = _benchmark_module("llama", monkeypatch)
        config, make = dict(module.LLAMA_SIZES["tiny"]), module.Llama
    batch = config.pop("batch")
    torch.manual_seed(0)
    model = make(**config)
    idx = torch.randint(0, config["vocab"], (batch, config["seq"]))
    return model, (idx, torch.randint(0, config["vocab"], (batch, config["seq"])))


def _train(model: torch.nn.Module, inputs: tuple) -> tuple[torch.Tensor, list, list]:
    """Loss and gradients of one step with nvFuser's regions (run as torch), and the backward's runners."""
    jitted = thunder.jit(model, executors=[CLAIMS, "torch"], disk_cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExecutorFallbackWarning)
        loss = jitted(*inputs)
        loss.backward()
    backward = thunder.last_backward_traces(jitted)[-1]
    runners = [b.symbol.fn.runner for b in backward.bound_symbols if b.symbol.name.startswith("nvFusion")]
    return loss, [p.grad for p in model.parameters()], runners


@pytest.mark.parametrize("workload", ["llama", "gpt"])
def test_training_with_moved_parts_matches_eager(workload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, inputs = _model(workload, monkeypatch)
    reference = copy.deepcopy(model)
    loss, grads, _ = _train(model, inputs)
    expected = reference(*inputs)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for grad, reference_parameter in zip(grads, reference.parameters()):
        torch.testing.assert_close(grad, reference_parameter.grad, rtol=1e-4, atol=1e-5)


def test_llama_backward_regions_launch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the moves, the SwiGLU product recomputed for the weight gradients sat in a region it
    shares no tensor with (a launch per layer), and the rotary backwards of q and k were two regions;
    with them, only the output head's weight gradient (a rank-2 output beside rank-3 work, nvFuser's
    low-rank rule) is a stage of its own. (The RMSNorms recomputed likewise made a third launch per
    layer until each became one symbol whose backward reads the saved statistics:
    core/transforms/rms_norms.py.)"""
    model, inputs = _model("llama", monkeypatch)
    _, _, runners = _train(copy.deepcopy(model), inputs)
    assert sum(len(r.stages) for r in runners) == len(runners) + 1

    monkeypatch.setattr(claim_executors, "move_parts_between_regions", lambda *args: None)
    _, _, unmoved = _train(copy.deepcopy(model), inputs)
    assert len(unmoved) > len(runners)
    assert sum(len(r.stages) for r in unmoved) >= sum(len(r.stages) for r in runners) + 2 * 2


@pytest.mark.parametrize("workload", ["llama", "gpt"])
def test_whole_training_step_with_moved_parts_matches_eager(
    workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/run.py's thunder-step (zero_grad, loss, backward, AdamW in one program) with nvFuser's
    regions: the moves meet copy-backs of parameters and optimizer state (side effects that follow
    every node begun before them); loss, parameters and state as eager's over three steps."""
    model, inputs = _model(workload, monkeypatch)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)

    def step_of(net: torch.nn.Module, optimizer: torch.optim.Optimizer):
        def step(idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = net(idx, targets)
            loss.backward()
            optimizer.step()
            return loss

        return step

    jitted = thunder.jit(step_of(model, optimizer), executors=[CLAIMS, "torch"], disk_cache=False)
    eager = step_of(reference, reference_optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExecutorFallbackWarning)
        for _ in range(3):
            torch.testing.assert_close(jitted(*inputs), eager(*inputs).detach())
    regions = [
        b for b in thunder.last_traces(jitted)[-1].bound_symbols if b.symbol.name.startswith("nvFusion")
    ]
    assert regions
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        # the key bias's gradient is rounding noise that Adam scales to up to lr a step (see
        # test_backward_inside_jit's whole-step test): compared within that
        torch.testing.assert_close(
            p, q, atol=3e-3 if name.endswith("c_attn.bias") else 1e-5, rtol=1e-4, msg=name
        )
        for key, expected in reference_optimizer.state[q].items():
            tolerance = dict(atol=1e-5, rtol=1e-4) if key != "exp_avg_sq" else dict(atol=1e-9, rtol=1e-3)
            torch.testing.assert_close(optimizer.state[p][key], expected, **tolerance, msg=f"{name} {key}")


def test_moves_that_close_a_cycle_together_are_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the per-move cycle check blinded, a round accepts moves that close cycles (GPT's forward
    regions share the residual stream across attention): verifying the round finds the cycle, undoes
    the round and makes its moves again one at a time, keeping those without a cycle."""
    region_moves = importlib.import_module("thunder.core.transforms.region_moves")
    monkeypatch.setattr(region_moves._Graph, "closes_cycle", lambda self, part, target, readers: False)
    verified = []
    original_verify = region_moves._Moves.verify

    def verify(self, moves: list) -> None:
        verified.append(len(moves))
        original_verify(self, moves)

    monkeypatch.setattr(region_moves._Moves, "verify", verify)
    model, inputs = _model("gpt", monkeypatch)
    reference = copy.deepcopy(model)
    loss, grads, _ = _train(model, inputs)
    expected = reference(*inputs)
    expected.backward()
    assert sum(verified) > 1  # rounds with moves the blinded check let through
    torch.testing.assert_close(loss, expected)
    for grad, reference_parameter in zip(grads, reference.parameters()):
        torch.testing.assert_close(grad, reference_parameter.grad, rtol=1e-4, atol=1e-5)
