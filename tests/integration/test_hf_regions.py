"""nvFuser's fusion regions on the traces of every Hugging Face architecture, built and run on the CPU.

The CPU has no fusion executor, so the HF tests elsewhere never build a region; on the GPU,
nvFuser's regions of HF Llama's bf16 training step once formed a cycle. Here a fusion executor
claims exactly what nvFuser claims (``NvFuserExecutor.fuses_on_any_device``: its prims, dtypes and
join rules, the device aside) and runs each region's prims with torch, so region building, the
passes after it and the placement of regions meet the real programs: forward and backward, at
depth, in float32 (compared with eager tightly) and bfloat16 (the GPU's dtype; compared loosely).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

import pytest
import torch

import thunder
from thunder.core.symbol import BoundSymbol
from thunder.core.transforms.claim_executors import operator_callable
from thunder.executors.nvfuser.executor import NvFuserExecutor

pytest.importorskip("transformers", reason="transformers is not installed (the `test` extra has it)")

from hf_models import MODELS, HFModel  # noqa: E402  (a helper module of this folder)

LAYERS = 6  # the slow variant runs TinyLlama's depth, 22


class NvFuserClaimsOnCpu(NvFuserExecutor):
    """nvFuser's claims and regions; each region runs its prims on torch (nvFuser needs CUDA)."""

    def __init__(self) -> None:
        super().__init__("nvfuser_claims_on_cpu")
        self.regions = 0

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        fused = super().fuse(region, index, outputs)
        self.regions += 1
        program = operator_callable(
            f"{fused.symbol.name}_on_torch", fused.args, fused.subsymbols, fused.output
        )
        return dataclasses.replace(fused, symbol=dataclasses.replace(fused.symbol, fn=program))


def _loss_and_grads(
    model: torch.nn.Module, inputs: dict[str, Any]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def check_regions(spec: HFModel, layers: int, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = spec.build(layers).eval().to(dtype)
    eager_model = copy.deepcopy(model)
    inputs = spec.inputs(torch.Generator().manual_seed(1))
    if spec.kind == "causal":
        del inputs["use_cache"]  # as users train: ``model(input_ids=ids, labels=ids)``
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
    fuser = NvFuserClaimsOnCpu()
    jitted = thunder.jit(model, executors=[fuser, "torch"])

    loss, grads = _loss_and_grads(jitted, inputs)
    expected_loss, expected_grads = _loss_and_grads(eager_model, inputs)

    assert fuser.regions > 0, "no region was built: the test would not exercise region building"
    assert thunder.last_backward_traces(jitted), "no backward was compiled"
    tolerance = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 0.1, "rtol": 0.05}
    torch.testing.assert_close(loss, expected_loss, **tolerance)
    assert grads.keys() == expected_grads.keys()
    if dtype == torch.float32:
        for name, grad in expected_grads.items():
            torch.testing.assert_close(grads[name], grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("spec", [pytest.param(m, id=m.name, marks=m.marks) for m in MODELS])
def test_nvfuser_regions_of_hf_models_run_forward_and_backward(spec: HFModel, dtype: torch.dtype) -> None:
    check_regions(spec, LAYERS, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [pytest.param(m, id=m.name) for m in MODELS])
def test_nvfuser_regions_of_hf_models_at_tinyllama_depth(spec: HFModel) -> None:
    check_regions(spec, 22, torch.bfloat16)
