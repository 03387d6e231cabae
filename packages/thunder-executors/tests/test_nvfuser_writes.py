"""Copy-backs taken into nvFuser regions (``transforms/fusion_copy_backs.py``): the region that makes an
input's new value writes it there, through an output aliased to the input.

On a CUDA machine with nvFuser these run nvFuser's kernels. On the CPU the regions are built by the
same rules (nvFuser's claims without its device check) and, nvFuser being absent, run on the torch
fallback, which runs the copies among the region's subsymbols: the plans are checked, and the values
against eager's either way.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import pytest
import torch

import thunder
from thunder.core.cuda_graphs import mutated_inputs
from thunder.core.fusion_fallback import ExecutorFallbackWarning
from thunder.core.symbol import BoundSymbol
from thunder.executors.nvfuser.executor import FusionRunner, FusionStage, NvFuserExecutor


class AnyDeviceNvFuser(NvFuserExecutor):
    """nvFuser's claims without its CUDA-only check; its regions fall back to torch on the CPU."""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)

    def is_available(self) -> tuple[bool, str]:
        return True, ""


ON_GPU = torch.cuda.is_available() and NvFuserExecutor("probe").is_available()[0]
DEVICE = "cuda" if ON_GPU else "cpu"


def _jit(fn: Callable) -> Callable:
    fuser = "nvfuser" if ON_GPU else AnyDeviceNvFuser("nvfuser_on_cpu")
    return thunder.jit(fn, executors=[fuser, "torch"])


def _call(jitted: Callable, *args: object) -> object:
    with warnings.catch_warnings():  # on the CPU every region falls back, as expected there
        warnings.simplefilter("ignore", ExecutorFallbackWarning)
        return jitted(*args)


def _runners(jitted: Callable) -> list[tuple[BoundSymbol, FusionRunner]]:
    trace = thunder.last_traces(jitted)[-1]
    found = []
    for b in trace.bound_symbols:
        runner = getattr(b.symbol.fn, "runner", b.symbol.fn)
        if isinstance(runner, FusionRunner):
            found.append((b, runner))
    return found


def _top_level_copies(jitted: Callable) -> list[BoundSymbol]:
    return [b for b in thunder.last_traces(jitted)[-1].bound_symbols if b.symbol.id == "inplace.copy_"]


def _training_step(net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable:
    def step(x: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = net(x).square().mean()
        loss.backward()
        optimizer.step()
        return loss

    return step


def _fused_adam_steps_against_eager(
    net: torch.nn.Module, make: Callable[..., torch.optim.Optimizer], steps: int, batch: tuple[int, int]
) -> Callable:
    """``steps`` whole steps of ``net`` with a fused Adam(W) (lr 1e-2, weight decay 0.1), jitted and on
    a copy in eager: the losses, the parameters and the optimizer state must agree; the jitted step."""
    reference = copy.deepcopy(net)
    options = {"lr": 1e-2, "weight_decay": 0.1, "fused": True}
    optimizer_of_jitted, optimizer_of_eager = (
        make(net.parameters(), **options),
        make(reference.parameters(), **options),
    )
    jitted = _jit(_training_step(net, optimizer_of_jitted))
    eager = _training_step(reference, optimizer_of_eager)
    for _ in range(steps):
        x = torch.randn(*batch, device=DEVICE)
        torch.testing.assert_close(_call(jitted, x), eager(x))
    for p, q in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(optimizer_of_jitted.state[p][key], optimizer_of_eager.state[q][key])
    return jitted


@pytest.mark.parametrize("optimizer", ["AdamW", "SGD"])
def test_the_whole_steps_updates_are_written_by_their_regions(optimizer: str) -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(DEVICE)
    reference = copy.deepcopy(net)
    options = {"lr": 1e-2, "momentum": 0.9} if optimizer == "SGD" else {"lr": 1e-2}
    make = getattr(torch.optim, optimizer)
    jitted = _jit(_training_step(net, make(net.parameters(), **options)))
    eager = _training_step(reference, make(reference.parameters(), **options))
    for _ in range(4):
        x = torch.randn(4, 8, device=DEVICE)
        torch.testing.assert_close(_call(jitted, x), eager(x))
    for p, q in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
    trace = thunder.last_traces(jitted)[-1]
    made_by_regions = {p.name for b, _ in _runners(jitted) for p in b.proxy_outputs()}
    made_by_regions |= {p.name for b, _ in _runners(jitted) for s in b.subsymbols for p in s.proxy_outputs()}
    # SGD's parameter update reads the learning rate as a number, which no nvFuser region takes
    assert not any(c.args[1].name in made_by_regions for c in _top_level_copies(jitted))
    if optimizer == "AdamW":
        assert not _top_level_copies(jitted)
    written = {trace.args[i].name for i in mutated_inputs(trace)}
    parameters = {a.name for a in trace.args if a.name.startswith("param") and a.name.count("_") == 1}
    assert parameters and parameters <= written, "cuda_graphs would not capture the parameters in place"
    # a stage writes its inputs itself only where it is one pointwise kernel without a broadcast
    # (an Adam update broadcasts its bias corrections: nvFuser would copy in a kernel of its own)
    stages = [s for _, r in _runners(jitted) for s in r.stages if isinstance(s, FusionStage)]
    writing = [s for s in stages if s.writes]
    assert all(b.symbol.name != "broadcast_in_dim" for s in writing for b in s.region)
    if optimizer == "AdamW":
        steps = {f"{name}_step" for name in parameters}
        assert steps <= written
        if not ON_GPU:  # the step counters are written by a region (a ScalarStage runs an op or two)
            counters = {d.name for s in writing for _, d in s.writes}
            counters |= {d.name for _, r in _runners(jitted) for _, d in r.copied}
            assert steps <= counters
        # on CUDA, AdamW (not capturable) keeps its step counters on the CPU: no nvFuser region
        # takes them, the torch executor updates them in place


@pytest.mark.parametrize("optimizer", ["AdamW", "Adam"])
def test_a_fused_adam_step_writes_its_weights_and_counters_in_place(optimizer: str) -> None:
    """Fused Adam(W) keeps its step counters on the parameters' device. Every parameter's counter
    update and the step sizes made from it run first, together (``early_updates.py``; region
    rematerialization leaves 0-dim work where it is), in one stage that writes the counters. Each
    update reads those values as stride-0 views (``ExpandStage``), so it is a pointwise stage without
    a broadcast that writes the parameter and both moments itself; a bias's update is split off the
    reduction that makes its gradient (``stage_groups.updates_split_off``). Nothing is copied after a region.
    Before, every write of the step was copied."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(DEVICE)
    jitted = _fused_adam_steps_against_eager(net, getattr(torch.optim, optimizer), steps=4, batch=(4, 8))
    trace = thunder.last_traces(jitted)[-1]
    runners = [r for _, r in _runners(jitted)]
    assert not any(r.copied for r in runners)
    stages = [s for r in runners for s in r.stages if isinstance(s, FusionStage)]
    written = [d.name for s in stages for _, d in s.writes]
    parameters = sorted(a.name for a in trace.args if a.name.count("_") == 1 and a.name.startswith("param"))
    assert len(parameters) == 4
    expected = [f"{p}{suffix}" for p in parameters for suffix in ("", "_exp_avg", "_exp_avg_sq", "_step")]
    assert sorted(written) == sorted(expected)
    (counters,) = [s for s in stages if any(d.name.endswith("_step") for _, d in s.writes)]
    assert sorted(d.name for _, d in counters.writes) == [f"{p}_step" for p in parameters]
    assert all(b.symbol.name != "broadcast_in_dim" for s in stages if s.writes for b in s.region)


def test_step_sizes_of_many_parameters_run_in_runs_that_share_a_structure() -> None:
    """Each parameter's step size and bias corrections are an independent 0-dim computation, linked to
    the others only through the learning rate. Cut into runs of ``SCALAR_CHUNK_PARTS`` (the last run
    shorter), every full run has one structure, which nvFuser compiles once, instead of one kernel
    for all parameters compiled anew for each program (``stage_groups.scalar_chunks``)."""
    from thunder.executors.nvfuser.stage_groups import SCALAR_CHUNK_PARTS

    torch.manual_seed(0)
    layers = SCALAR_CHUNK_PARTS + 3  # weights and biases: 2 * layers parameters
    net = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(layers))).to(DEVICE)
    jitted = _fused_adam_steps_against_eager(net, torch.optim.AdamW, steps=3, batch=(2, 4))
    stages = [s for _, r in _runners(jitted) for s in r.stages if isinstance(s, FusionStage)]
    counters = [s for s in stages if any(d.name.endswith("_step") for _, d in s.writes)]
    sizes = sorted(len(s.writes) for s in counters)
    assert sum(sizes) == 2 * layers
    assert max(sizes) == SCALAR_CHUNK_PARTS and sizes.count(SCALAR_CHUNK_PARTS) == len(sizes) - 1
    full = {s.structure for s in counters if len(s.writes) == SCALAR_CHUNK_PARTS}
    assert len(full) == 1, "runs of one length and form should share one compiled kernel"


def read_between(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x * 2`` is fused; the matmul reads the old ``x`` after it; then ``x`` is written."""
    doubled = x * 2 + 1
    product = x @ w
    x.copy_(doubled)
    return product


def test_a_copy_is_not_taken_past_a_later_read_of_the_old_value() -> None:
    x, w = torch.randn(4, 4, device=DEVICE), torch.randn(4, 4, device=DEVICE)
    jitted = _jit(read_between)
    x1, x2 = x.clone(), x.clone()
    torch.testing.assert_close(_call(jitted, x1, w), read_between(x2, w))
    torch.testing.assert_close(x1, x2)
    for _, runner in _runners(jitted):
        assert not runner.writes
    assert len(_top_level_copies(jitted)) == 1


def scaled_by_its_sum(x: torch.Tensor) -> torch.Tensor:
    """The new value reads every element of the old one (a reduction): no kernel may write it while
    reading it; the region copies at its end."""
    x.copy_(x / x.sum() + x.exp())
    return x.amax()


def test_a_value_made_beside_a_reduction_of_its_input_is_copied_at_the_regions_end() -> None:
    x = torch.randn(64, device=DEVICE)
    jitted = _jit(scaled_by_its_sum)
    for _ in range(2):
        x1, x2 = x.clone(), x.clone()
        torch.testing.assert_close(_call(jitted, x1), scaled_by_its_sum(x2))
        torch.testing.assert_close(x1, x2)
    writers = [r for _, r in _runners(jitted) if r.writes]
    assert writers and all(not s.writes for r in writers for s in r.stages if isinstance(s, FusionStage))
    assert any(r.copied for r in writers)


def counter(step: torch.Tensor, p: torch.Tensor, g: torch.Tensor) -> None:
    step.add_(1)
    p.mul_(0.5).add_(g / step)


def test_a_counter_and_an_update_taken_into_their_region_equal_eagers() -> None:
    step, p, g = (
        torch.tensor(3.0, device=DEVICE),
        torch.randn(32, device=DEVICE),
        torch.randn(32, device=DEVICE),
    )
    jitted = _jit(counter)
    states = [(step.clone(), p.clone()), (step.clone(), p.clone())]
    for _ in range(3):
        _call(jitted, states[0][0], states[0][1], g)
        counter(states[1][0], states[1][1], g)
        torch.testing.assert_close(states[0], states[1])
    assert not _top_level_copies(jitted)


def pointwise_update(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(0.5).add_(y.sigmoid())
    return y * 2


def test_a_pointwise_update_without_broadcasts_is_written_by_its_kernel() -> None:
    """One pointwise kernel, no broadcast: nvFuser writes ``x`` through an output aliased to it."""
    x, y = torch.randn(8, 16, device=DEVICE), torch.randn(8, 16, device=DEVICE)
    jitted = _jit(pointwise_update)
    for _ in range(3):
        x1, x2 = x.clone(), x.clone()
        torch.testing.assert_close(_call(jitted, x1, y), pointwise_update(x2, y))
        torch.testing.assert_close(x1, x2)
        y = y + 1
    (stage,) = [s for _, r in _runners(jitted) for s in r.stages if isinstance(s, FusionStage)]
    assert [d.name for _, d in stage.writes] == ["x"]
    assert not _top_level_copies(jitted)


def test_a_region_replaced_by_its_writing_version_is_never_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fuse`` makes a runner, ``write_inputs`` replaces it by one that writes ``x``: only the runner
    that runs plans its stages (on first use, or when the disk cache stores it)."""
    planned: list[FusionRunner] = []
    plan = FusionRunner._plan

    def counted(runner: FusionRunner) -> list:
        planned.append(runner)
        return plan(runner)

    monkeypatch.setattr(FusionRunner, "_plan", counted)
    x, y = torch.randn(8, 16, device=DEVICE), torch.randn(8, 16, device=DEVICE)
    jitted = _jit(pointwise_update)
    for _ in range(2):
        _call(jitted, x.clone(), y)
    runners = [r for _, r in _runners(jitted)]
    assert runners and all(r.writes for r in runners)
    assert {id(r) for r in planned} == {id(r) for r in runners}, len(planned)


def two_counters(s1: torch.Tensor, s2: torch.Tensor) -> None:
    s1.add_(1)
    s2.add_(2)


def test_counters_of_a_scalar_stage_are_copied_back_together_by_torch() -> None:
    """A region of 0-dim counters is a ScalarStage (torch, no nvFuser: it runs on the CPU too); its
    writes are copied after it, as one ``_foreach_copy_``."""
    s1, s2 = torch.tensor(3.0, device=DEVICE), torch.tensor(5.0, device=DEVICE)
    jitted = _jit(two_counters)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExecutorFallbackWarning)  # the region runs as it is
        for _ in range(3):
            jitted(s1, s2)
    assert (s1.item(), s2.item()) == (6.0, 11.0)
    ((_, runner),) = _runners(jitted)
    assert sorted(d.name for _, d in runner.copied) == ["s1", "s2"]
    assert not _top_level_copies(jitted)


def view_read_after_the_region(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x[1:]`` and ``x.t()`` are taken before ``x * 2`` is fused and read by matmuls after it; after
    claiming they run as ``torch.narrow`` and ``torch.permute``, which the alias roots did not know
    as views (found by tests/fuzz/test_fusion_writes_fuzz.py): the copy was taken into the region,
    and on the CPU the matmuls read the new ``x``."""
    rows, transposed = x[1:], x.t()
    doubled = x * 2
    product = rows @ w + (transposed @ w)[1:]
    x.copy_(doubled)
    return product


def test_a_copy_is_not_taken_past_a_later_read_through_a_view_made_before_the_region() -> None:
    x, w = torch.randn(4, 4, device=DEVICE), torch.randn(4, 4, device=DEVICE)
    jitted = _jit(view_read_after_the_region)
    for _ in range(2):
        x1, x2 = x.clone(), x.clone()
        torch.testing.assert_close(_call(jitted, x1, w), view_read_after_the_region(x2, w))
        torch.testing.assert_close(x1, x2)
    assert len(_top_level_copies(jitted)) == 1


def plus_its_transpose(x: torch.Tensor) -> torch.Tensor:
    """The region reads ``x.t()``, a ``torch.permute`` of ``x`` run before it (a peeled view)."""
    x.copy_(x.t() * 2 + x)
    return x


def test_a_region_reading_a_transpose_of_its_input_does_not_write_the_input() -> None:
    # The transpose runs as ``torch.permute``, which the alias roots did not know as a view: the copy
    # was taken in and planned as an aliased output of the pointwise kernel, which on a GPU would
    # write ``x`` while other threads read ``x.t()``. (On the CPU the fallback copies at the region's
    # end, which is right: this checks the plan.)
    x = torch.randn(4, 4, device=DEVICE)
    jitted = _jit(plus_its_transpose)
    x1, x2 = x.clone(), x.clone()
    torch.testing.assert_close(_call(jitted, x1), plus_its_transpose(x2))
    torch.testing.assert_close(x1, x2)
    assert not any(runner.writes for _, runner in _runners(jitted))
    assert len(_top_level_copies(jitted)) == 1
