"""Copy-backs of mutated inputs run right after their last old-value read (transforms/copy_backs.py).

Results and mutated inputs against eager, and the positions in the execution trace: the whole
training step writes each parameter and each optimizer state tensor back as soon as its update is
computed, so their new values do not all stay alive until the end of the program.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_backward_inside_jit import whole_step_of

import thunder
from thunder.core.inplace import copy_symbol


def _check(fn, *make_inputs) -> thunder.core.pipeline.JittedFunction:
    jitted = thunder.jit(fn)
    for _ in range(2):
        inputs = [make() for make in make_inputs]
        copies = [t.clone() for t in inputs]
        torch.testing.assert_close(jitted(*inputs), fn(*copies))
        for actual, expected in zip(inputs, copies):
            torch.testing.assert_close(actual, expected)
    return jitted


def test_a_copy_waits_for_a_read_of_the_old_value_through_a_view() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        new = x + 1
        old_through_view = x.t() * 3  # reads the old value after the new one is computed
        x.copy_(new)
        return old_through_view

    jitted = _check(fn, lambda: torch.randn(3, 4))
    execution = thunder.last_traces(jitted)[-1]
    names = [b.symbol.name for b in execution.bound_symbols]
    assert names.index("copy_") > names.index("mul")


def test_a_view_read_after_the_update_sees_the_new_value() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        view = x[0]
        x.mul_(2)
        return view + 1  # eager: the view shows the update

    _check(fn, lambda: torch.randn(3, 4))


def test_buffers_updated_in_a_forward_and_returned() -> None:
    norm = torch.nn.BatchNorm1d(4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return norm(x) * 2

    jitted = thunder.jit(fn)
    reference = torch.nn.BatchNorm1d(4)
    for _ in range(3):
        x = torch.randn(8, 4)
        torch.testing.assert_close(jitted(x), reference(x) * 2)
        torch.testing.assert_close(norm.running_mean, reference.running_mean)
        torch.testing.assert_close(norm.running_var, reference.running_var)


def test_the_whole_step_writes_each_parameter_back_right_after_its_update() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)

    jitted = thunder.jit(whole_step_of(model, optimizer))
    for _ in range(2):
        jitted(torch.randn(5, 4))
    execution = thunder.last_traces(jitted)[-1]
    symbols = [b for b in execution.bound_symbols if b.symbol.name != "del"]
    copy_positions = [i for i, b in enumerate(symbols) if b.symbol is copy_symbol()]
    assert len(copy_positions) == 4  # each parameter (it requires grad: never reinplaced)
    # its step, exp_avg and exp_avg_sq are updated in place instead (transforms/reinplace.py)
    inputs = {p.name for p in execution.args}
    written = [
        b.args[0].name for b in symbols if "writes_input" in b.symbol.tags and b.args[0].name in inputs
    ]
    assert len(written) == 4 * 3 and all(
        name.endswith(("_step", "_exp_avg", "_exp_avg_sq")) for name in written
    )
    made_at = {p.name: i for i, b in enumerate(symbols) for p in b.proxy_outputs()}
    for position in copy_positions:
        value = symbols[position].args[1]
        between = symbols[made_at[value.name] + 1 : position]
        assert all(b.symbol is copy_symbol() for b in between), execution  # right after its value is made
    assert copy_positions[0] < len(symbols) - 2 * 4 * 4  # not all at the end


def test_each_update_runs_as_soon_as_its_gradient_exists() -> None:
    """The last layer's parameters are updated (and written back) while the backward still works on the
    first layer: its gradient is freed there, not kept until the end of the program."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)

    jitted = thunder.jit(whole_step_of(model, optimizer))
    eager = whole_step_of(reference, reference_optimizer)
    for _ in range(3):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jitted(x), eager(x))
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    symbols = thunder.last_traces(jitted)[-1].bound_symbols
    copies = {b.args[0].name: i for i, b in enumerate(symbols) if b.symbol is copy_symbol()}
    matmuls = [i for i, b in enumerate(symbols) if b.symbol.name == "matmul"]
    last_layer = [name for name in copies if name.startswith("weight_1")]
    assert last_layer and min(copies[name] for name in last_layer) < matmuls[-1]


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.AdamW])
def test_the_whole_step_under_a_fusion_executor_reads_old_values_before_their_copy_backs(
    optimizer_class,
) -> None:
    """Fusion regions are emitted once all their inputs exist, which may be after a copy-back placed
    early: a region that reads a parameter's old value must still run before the parameter is written."""
    from test_hf_regions import NvFuserClaimsOnCpu

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.GELU(),
        torch.nn.Linear(8, 2),
    )  # fmt: skip
    reference = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=0.1)
    reference_optimizer = optimizer_class(reference.parameters(), lr=0.1)

    def step_of(net: torch.nn.Module, opt: torch.optim.Optimizer):
        def step(x: torch.Tensor) -> torch.Tensor:
            loss = (net(x) * net[0].weight.sum()).square().mean()  # the first weight read again late
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        return step

    fuser = NvFuserClaimsOnCpu()
    jitted, eager = (
        thunder.jit(step_of(model, optimizer), executors=[fuser]),
        step_of(reference, reference_optimizer),
    )
    for _ in range(3):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jitted(x), eager(x))
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    assert fuser.regions > 0


def test_a_fusion_region_reading_the_old_value_runs_before_the_copy_back() -> None:
    """Were ``a = w * 2`` and ``a + m`` one region, it would wait for the matmul m that comes after w's
    copy-back, and the copy-back must still wait for it (claim_executors makes every side effect wait
    for the nodes that begin before it). Today's region builder keeps them apart here, so this checks
    the results with a fusion executor and early copy-backs, not the barrier alone."""
    from test_hf_regions import NvFuserClaimsOnCpu

    def fn(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = w * 2  # reads the old w
        w.copy_(x @ y)  # the new value, made outside any region
        m = x @ x.T
        return a + m

    fuser = NvFuserClaimsOnCpu()
    jitted = thunder.jit(fn, executors=[fuser])
    for _ in range(2):
        x, y, w = torch.randn(3, 3), torch.randn(3, 3), torch.randn(3, 3)
        w_eager = w.clone()
        torch.testing.assert_close(jitted(x, y, w), fn(x, y, w_eager))
        torch.testing.assert_close(w, w_eager)
    assert fuser.regions > 0


def test_a_view_recomputed_for_a_region_runs_before_that_region() -> None:
    """Found by fuzzing with a CPU nvFuser: a reshape that rematerialization put into the region reading it
    was then peeled out of that region again as a leading view, and, appended after the program, was
    emitted after the return (``t11`` read before it was assigned)."""
    from test_hf_regions import NvFuserClaimsOnCpu

    def fn(a: torch.Tensor) -> tuple:
        v0 = a[..., ::2]
        a.add_(1)
        v3 = torch.outer(a.flatten(), v0.flatten())
        v4 = a + v3
        return v4, torch.neg(v4), a

    jitted = thunder.jit(fn, executors=[NvFuserClaimsOnCpu(), "torch"])
    for _ in range(2):
        a = torch.randn(1)
        expected_a = a.clone()
        torch.testing.assert_close(jitted(a), fn(expected_a))
        torch.testing.assert_close(a, expected_a)


def test_a_region_does_not_recompute_from_an_input_already_written_back() -> None:
    """Found by fuzzing with a CPU nvFuser (silently wrong): ``-b`` was recomputed in a later region from
    ``b`` (free: the region read ``b`` anyway), which ran after ``b``'s copy-back and saw the new value."""
    from test_hf_regions import NvFuserClaimsOnCpu

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple:
        old = torch.neg(b)
        b.add_(1)
        c = b.clone()
        c.add_(a)
        a.add_(1)
        return torch.neg(c), a + old, a, b

    jitted = thunder.jit(fn, executors=[NvFuserClaimsOnCpu(), "torch"])
    for _ in range(2):
        a, b = torch.randn(1, 1), torch.randn(1, 1)
        expected_a, expected_b = a.clone(), b.clone()
        torch.testing.assert_close(jitted(a, b), fn(expected_a, expected_b))
        torch.testing.assert_close((a, b), (expected_a, expected_b))
