"""Common-subexpression elimination (``core/transforms/cse.py``) against eager PyTorch."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import thunder


def _trace(jitted) -> str:
    return str(thunder.last_traces(jitted)[-1])


def test_repeated_computations_run_once_and_match_eager() -> None:
    def fn(x, n: int):
        positions = [torch.arange(n) + x.shape[0] for _ in range(4)]  # one per layer, as HF's caches
        scaled = [x.float() * 2 for _ in range(3)]
        return sum(p.sum() for p in positions) + sum(s.sum() for s in scaled)

    jitted = thunder.jit(fn)
    for n in (3, 5):
        x = torch.randn(6, 2)
        torch.testing.assert_close(jitted(x, n), fn(x, n))
    trace = _trace(jitted)
    assert trace.count("torch.arange(") == 1
    assert trace.count("torch.mul(") == 1


def test_random_ops_are_not_shared() -> None:
    def fn(x):
        return F.dropout(x, 0.5) - F.dropout(x, 0.5), torch.rand(3) - torch.rand(3)

    a, b = thunder.jit(fn)(torch.ones(1000))
    assert a.abs().sum() > 0 and b.abs().sum() > 0  # two draws each, as in eager


def test_values_that_compare_equal_but_differ_are_not_shared() -> None:
    def fn(x):
        return x + 0.0, x + -0.0, x.pow(True), x.pow(1), x.new_full((2,), 1), x.new_full((2,), 1.0)

    jitted = thunder.jit(fn)
    x = torch.tensor([-0.0, 1.5])
    for actual, expected in zip(jitted(x), fn(x)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert actual.dtype == expected.dtype
        assert torch.equal(torch.signbit(actual), torch.signbit(expected))


def test_in_place_updates_between_equal_expressions() -> None:
    def fn(x):
        a = x + 1
        x.mul_(3)
        b = x + 1  # the same expression of a new value
        x.add_(1)
        c = x + 1
        return a, b, c

    jitted = thunder.jit(fn)
    for _ in range(2):
        x, expected_x = torch.randn(4), None
        expected_x = x.clone()
        for actual, expected in zip(jitted(x), fn(expected_x)):
            torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x, expected_x)


def test_gradients_through_shared_subexpressions() -> None:
    def fn(x, w):
        return (torch.tanh(x @ w) * torch.tanh(x @ w)).sum() + (x @ w).exp().sum()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    actual = torch.autograd.grad(thunder.jit(fn)(x, w), (x, w))
    expected = torch.autograd.grad(fn(x, w), (x, w))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_fills_are_not_shared_and_match_eager() -> None:
    def fn(x):
        first, second = torch.zeros_like(x), torch.zeros_like(x)
        return first + x, second * 2, torch.full((2,), 3.0) + torch.full((2,), 3.0)

    jitted = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(4)
        for actual, expected in zip(jitted(x), fn(x)):
            torch.testing.assert_close(actual, expected)
    trace = _trace(jitted)
    assert trace.count("torch.zeros_like(") == 2
    assert trace.count("torch.full(") == 2


def _fusion_structures(trace) -> set:
    """The (structure, input shapes) of nvFuser's stages in ``trace``: the definitions nvFuser compiles."""
    from thunder.executors.nvfuser.executor import FusionStage, _stages

    structures = set()
    for bound in trace.bound_symbols:
        if bound.symbol.name.startswith("nvFusion"):
            runner = getattr(bound.symbol.fn, "runner", bound.symbol.fn)  # under its FusionFallback
            stages = getattr(runner, "stages", None)  # nvFuser's own regions (CUDA); the CPU's claims:
            if stages is None:
                outputs = list(bound.output) if isinstance(bound.output, tuple) else [bound.output]
                stages, _ = _stages(list(bound.subsymbols), list(bound.args), outputs)
            for stage in stages:
                if not isinstance(stage, FusionStage):  # a ScalarStage compiles nothing
                    continue
                structures.add((stage.structure, tuple((tuple(p.shape), str(p.dtype)) for p in stage.inputs)))
    return structures


def test_the_step_that_creates_adams_state_fuses_as_later_steps() -> None:
    """The whole training step's first call creates the optimizer's state; shared fills made its
    updates' fusion regions differ from later steps' (nvFuser compiled each twice: 29 definitions
    instead of 16 for a 4-layer GPT). Built with nvFuser's claims on the CPU (``test_hf_regions``)."""
    from test_hf_regions import NvFuserClaimsOnCpu

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4)
    )
    reference = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2)

    def step(net, opt, x):
        opt.zero_grad(set_to_none=True)
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    jitted = thunder.jit(step, executors=[NvFuserClaimsOnCpu(), "torch"], disk_cache=False)
    structures = []
    for _ in range(3):
        x = torch.randn(5, 8)
        torch.testing.assert_close(jitted(model, optimizer, x), step(reference, reference_optimizer, x))
        structures.append(_fusion_structures(thunder.last_traces(jitted)[-1]))
    for actual, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(actual, expected)
    assert thunder.cache_misses(jitted) == 2  # the state-creating step, then the steady one
    assert structures[0] and structures[0] <= structures[1]
