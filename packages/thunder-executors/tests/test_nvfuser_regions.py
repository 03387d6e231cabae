"""The regions the nvFuser executor asks for, checked on the CPU: nothing here runs nvFuser.

nvFuser 0.2.36 fails an internal assert (``predicate_elimination.cpp:1056``, "Inconsistent setting of
initialization value") on a kernel where one tensor feeds a sum and an amax; the executor keeps the
reductions of one tensor in one region only when they share axes and initial value.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import thunder
from thunder.core.executor import FusionExecutor
from thunder.core.symbol import BoundSymbol
from thunder.core.transforms.claim_executors import claim_executors, operator_callable
from thunder.executors.nvfuser.canonical_order import canonical_order, ordered_outputs
from thunder.executors.nvfuser.executor import NvFuserExecutor, ScalarStage
from thunder.executors.nvfuser.stage_groups import inputs_of
from thunder.executors.nvfuser.translate import REDUCTIONS, structure_key
from thunder.executors.torchex import executor as torch_executor


class AnyDeviceNvFuser(NvFuserExecutor):
    """nvFuser's claims and region rules without its CUDA-only check, to see regions on the CPU."""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)


def _regions(fn, *inputs: torch.Tensor) -> list[list[BoundSymbol]]:
    jitted = thunder.jit(fn, executors=["torch"])
    jitted(*inputs)
    computation = thunder.last_traces(jitted)[0]
    fused = claim_executors(computation, [AnyDeviceNvFuser("nvfuser_on_cpu"), torch_executor])
    return [list(b.subsymbols) for b in fused.bound_symbols if b.symbol.name.startswith("nvFusion")]


def _reduced_axes(region: list[BoundSymbol]) -> dict[str, set[tuple]]:
    """Per reduced tensor of the region: its reductions' kinds (sum and var share one) and axes."""
    axes: dict[str, set[tuple]] = {}
    for b in region:
        if b.symbol.name in REDUCTIONS:
            kind = "sum" if b.symbol.name == "var" else b.symbol.name
            axes.setdefault(b.args[0].name, set()).add((kind, tuple(b.args[1])))
    return axes


def reductions(x: torch.Tensor) -> torch.Tensor:  # the "reductions" case of test_nvfuser
    return x.sum(-1) + x.amax(-1) * x.mean(-1) + torch.var(x, -1) + x.sum(0).sum()


def test_one_tensor_reduced_two_ways_is_split() -> None:
    regions = _regions(reductions, torch.randn(16, 129))
    assert len(regions) >= 3, regions  # sum/mean/var over dim 1; amax over dim 1; sum over dim 0
    for region in regions:
        assert all(len(axes) == 1 for axes in _reduced_axes(region).values()), region


def test_without_the_rule_the_reductions_share_one_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule is what splits them: the core alone would fuse everything into one region."""
    monkeypatch.setattr(AnyDeviceNvFuser, "can_join", FusionExecutor.can_join)
    regions = _regions(reductions, torch.randn(16, 129))
    assert len(regions) == 1
    assert any(len(axes) >= 2 for axes in _reduced_axes(regions[0]).values())


def test_sum_and_amax_of_one_tensor_are_split() -> None:
    regions = _regions(lambda x: x.sum(-1) * x.amax(-1), torch.randn(4, 8))
    assert len(regions) == 2 and all(len(_reduced_axes(r)) == 1 for r in regions)


def test_reductions_over_the_same_axes_and_of_different_tensors_stay_together() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # mean and var of x share axes and init
        normalized = (x - x.mean(-1, keepdim=True)) / torch.sqrt(torch.var(x, -1, keepdim=True) + 1e-5)
        return torch.softmax(normalized, -1) * y.sum(0)

    assert len(_regions(fn, torch.randn(8, 16), torch.randn(4, 16))) == 1


def _runners(fn, *inputs: torch.Tensor) -> list:
    jitted = thunder.jit(fn, executors=["torch"])
    jitted(*inputs)
    fused = claim_executors(
        thunder.last_traces(jitted)[0], [AnyDeviceNvFuser("nvfuser_on_cpu"), torch_executor]
    )
    return [b.symbol.fn.runner for b in fused.bound_symbols if b.symbol.name.startswith("nvFusion")]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = ~mask  # a training step saves this low-rank value for the backward
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), -1), hidden


def test_outputs_from_low_rank_inputs_alone_get_a_stage_of_their_own() -> None:
    (runner,) = _runners(
        masked_softmax, torch.randn(2, 4, 16, 16), torch.ones(16, 16, dtype=torch.bool).tril()
    )
    first, rest = runner.stages
    assert [b.symbol.name for b in first.region] == ["bitwise_not"]
    hidden = first.region[0].output.name
    assert [p.name for p in first.outputs] == [hidden] and hidden in {p.name for p in runner.outputs}
    assert first.outputs[0].name in {p.name for p in rest.inputs}
    assert {p.name for p in rest.outputs} | {p.name for p in first.outputs} == {
        p.name for p in runner.outputs
    }
    assert sum(len(stage.region) for stage in runner.stages) == len(runner.region)


def test_regions_whose_outputs_all_come_from_wide_values_are_one_stage() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # w (rank 1) is only read inside
        return torch.softmax(x * w, -1)

    (runner,) = _runners(fn, torch.randn(4, 8), torch.randn(8))
    assert len(runner.stages) == 1


def test_the_regions_of_identical_layers_share_one_structure() -> None:
    """Layers of one shape compile one nvFuser definition between them (the key names no proxy)."""

    def two_layers(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        for w in (w1, w2):
            x = torch.softmax(torch.tanh(x @ w) * 2.0, -1)
        return x

    runners = _runners(two_layers, torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8))
    assert len(runners) == 2
    assert runners[0].stages[0].structure == runners[1].stages[0].structure
    assert runners[0].inputs[0].name != runners[1].inputs[0].name

    other = _runners(
        lambda x, w: torch.softmax(torch.tanh(x @ w) * 3.0, -1), torch.randn(4, 8), torch.randn(8, 8)
    )
    assert other[0].stages[0].structure != runners[0].stages[0].structure  # a different constant


def test_independent_parts_of_a_region_are_stages_of_their_own() -> None:
    """nvFuser segments a disconnected fusion at great compile cost; each part gets a definition."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.exp(x) * 2, torch.sin(y) + 1

    (runner,) = _runners(fn, torch.randn(4, 8), torch.randn(4, 8))
    assert len(runner.stages) == 2
    for stage in runner.stages:
        assert len(stage.inputs) == 1 and len(stage.outputs) == 1
        assert {p.name for p in stage.inputs} != {p.name for p in runner.stages[0].outputs}
    assert sum(len(stage.region) for stage in runner.stages) == len(runner.region)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    values = {runner.inputs[0].name: x, runner.inputs[1].name: y}
    assert {p.name for s in runner.stages for p in s.inputs} == set(values)


def test_parts_reading_one_input_stay_one_stage() -> None:
    (runner,) = _runners(lambda x: (torch.exp(x) * 2, torch.sin(x) + 1), torch.randn(4, 8))
    assert len(runner.stages) == 1


def rotary_of_q_and_k(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    def rotate(x: torch.Tensor) -> torch.Tensor:  # benchmarks/llama.py's apply_rotary
        half = x.shape[-1] // 2
        return (x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin).to(x.dtype)

    return rotate(q), rotate(k)


def test_resize_chains_meeting_only_at_inputs_are_stages_that_share_a_structure() -> None:
    """nvFuser segments a fusion of two rotary embeddings (seconds of compile); as two stages of one
    structure they compile once, and the region still matches eager."""
    q, k = torch.randn(2, 3, 8, 4, dtype=torch.bfloat16), torch.randn(2, 3, 8, 4, dtype=torch.bfloat16)
    cos, sin = torch.randn(8, 4), torch.randn(8, 4)
    (runner,) = _runners(rotary_of_q_and_k, q, k, cos, sin)
    assert len(runner.stages) == 2
    assert runner.stages[0].structure == runner.stages[1].structure
    assert {p.name for p in runner.stages[0].inputs} & {p.name for p in runner.stages[1].inputs}  # cos, sin


def test_a_resize_chain_is_one_stage() -> None:
    (runner,) = _runners(lambda x: torch.cat((x[:, 2:], x[:, :2]), 1) * 2 + x, torch.randn(4, 8))
    assert len(runner.stages) == 1


def repeat_kv(k: torch.Tensor) -> torch.Tensor:  # transformers' repeat_kv, then work on the result
    b, heads, s, d = k.shape
    return (k[:, :, None, :, :].expand(b, heads, 4, s, d).reshape(b, heads * 4, s, d) * 0.5).exp()


def test_a_reshape_never_shares_a_region_with_the_broadcast_it_merges() -> None:
    """nvFuser reshaped an in-fusion expansion wrongly on an H100 (``_reshapes_an_expansion``)."""
    for region in _regions(repeat_kv, torch.randn(2, 2, 8, 4)):
        expanded = {b.output.name for b in region if b.symbol.name == "broadcast_in_dim"}
        assert not any(b.symbol.name == "reshape" and b.args[0].name in expanded for b in region), region


def counter_and_update(
    step: torch.Tensor, p: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """An optimizer's update beside its step counter, as a whole training step's regions hold them."""
    new_step = step + 1
    return new_step, p - 0.1 * g / (1 - 0.9**new_step)


def test_a_stage_of_an_op_on_scalars_runs_on_torch_without_nvfuser() -> None:
    """The step counter's stage (0-dim in, 0-dim out, split from the update by the low-rank rule) is
    run with torch: on the CPU, where nvFuser is not installed, calling it works and equals eager."""
    step, p, g = torch.tensor(3.0), torch.randn(8), torch.randn(8)
    (runner,) = _runners(counter_and_update, step, p, g)
    scalar = [stage for stage in runner.stages if isinstance(stage, ScalarStage)]
    assert len(scalar) == 1 and [b.symbol.name for b in scalar[0].region] == ["add"]
    (counted,) = scalar[0]([step])
    torch.testing.assert_close(counted, step + 1)
    assert all(
        not isinstance(stage, ScalarStage) for stage in _runners(reductions, torch.randn(4, 8))[0].stages
    )


def two_counters_and_updates(
    s1: torch.Tensor, s2: torch.Tensor, p: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """A layer norm's weight and bias updated in one region: two step counters, each a part."""
    n1, n2 = s1 + 1, s2 + 1
    return n1, n2, p - 0.1 * g / (1 - 0.9**n1), p * 0.5 - g / (1 - 0.9**n2)


def test_the_step_counters_of_one_region_are_one_scalar_stage() -> None:
    """Two 0-dim counters (disconnected parts, an op each) run as one ScalarStage: one call, not two."""
    s1, s2, p, g = torch.tensor(3.0), torch.tensor(5.0), torch.randn(8), torch.randn(8)
    (runner,) = _runners(two_counters_and_updates, s1, s2, p, g)
    scalar = [stage for stage in runner.stages if isinstance(stage, ScalarStage)]
    assert len(scalar) == 1 and [b.symbol.name for b in scalar[0].region] == ["add", "add"]
    assert runner.stages.index(scalar[0]) == 0
    assert len(scalar[0].inputs) == 2  # the two counters, in either order: their sums as eager's
    assert sorted(r.item() for r in scalar[0]([s1, s2])) == [4.0, 6.0]


def _topological(region: list[BoundSymbol]) -> bool:
    made = {p.name for b in region for p in b.proxy_outputs()}
    seen: set[str] = set()
    for b in region:
        if any(p.name in made and p.name not in seen for p in b.proxy_args()):
            return False
        seen.update(p.name for p in b.proxy_outputs())
    return True


def test_one_computation_in_two_trace_orders_gets_one_structure() -> None:
    """The 4-layer Llama's rotary backward came in three orders, three definitions to compile; the
    stage's own order (``canonical_order``), inputs and outputs included, makes them one."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = x.float() * 2, (y.float() + 1).exp()
        return (a - b).to(torch.bfloat16), (b * 3).to(torch.bfloat16)

    x, y = torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16)
    (region,) = _regions(fn, x, y)
    # another valid order of the same symbols: of those whose operands are placed, the last first
    other: list[BoundSymbol] = []
    left = list(region)
    made = {p.name for b in region for p in b.proxy_outputs()}
    while left:
        placed = {p.name for b in other for p in b.proxy_outputs()}
        ready = [b for b in left if all(p.name not in made or p.name in placed for p in b.proxy_args())]
        other.append(ready[-1])
        left.remove(ready[-1])
    read = {p.name for b in region for p in b.proxy_args()}
    outputs = [b.output for b in region if b.output.name not in read]
    assert other != region and _topological(other) and len(outputs) == 2
    assert structure_key(region, inputs_of(region), outputs) != structure_key(
        other, inputs_of(other), outputs[::-1]
    )
    keys = []
    for order, order_outputs in ((region, outputs), (other, outputs[::-1])):
        ordered = canonical_order(order, order_outputs)
        assert _topological(ordered) and sorted(map(id, ordered)) == sorted(map(id, region))
        keys.append(structure_key(ordered, inputs_of(ordered), ordered_outputs(ordered, order_outputs)))
    assert keys[0] == keys[1]


class _StageOnTorch:
    """A stage's inputs, outputs and prims, run by torch (nvFuser is not installed here)."""

    def __init__(self, stage: Any):
        self.inputs, self.outputs = stage.inputs, stage.outputs
        self.run = operator_callable("stage_on_torch", stage.inputs, stage.region, stage.outputs)

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return list(self.run(*tensors))


def test_a_region_run_in_its_stage_order_returns_its_own_order() -> None:
    """One stage that orders the region's inputs and outputs otherwise than the region: the runner's
    fast path maps them, and returns the region's results in the region's order."""

    def fn(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (z.exp() * 3).sin(), x * 2 - y, y.tanh() + z

    inputs = [torch.randn(4, 8) for _ in range(3)]
    (runner,) = _runners(fn, *inputs)
    (stage,) = runner.stages  # planned on first use
    assert runner._one_stage and (runner._input_order, runner._output_order) != (None, None)
    runner._stages = [_StageOnTorch(stage)]
    region_on_torch = operator_callable("region_on_torch", runner.inputs, runner.region, runner.outputs)
    expected = region_on_torch(*inputs)
    for got, want in zip(runner(*inputs), expected, strict=True):
        torch.testing.assert_close(got, want)
