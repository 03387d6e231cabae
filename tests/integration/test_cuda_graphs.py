"""``thunder.jit(fn, cuda_graphs=True)``: replayed CUDA graphs give eager's results (core/cuda_graphs.py).

The graph tests need a CUDA device and skip with the reason otherwise; the fallback test runs
everywhere (without CUDA, the option warns and runs the program without a graph).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from cuda_graph_helpers import graphed_pair  # this folder's helper (conftest.py puts it on sys.path)

import thunder
from thunder.core.cuda_graphs import CAN_MOVE_HELD_OUTPUTS, CudaGraphWarning, GraphedFunction

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")


def _mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )


def _graphed(jitted: object) -> GraphedFunction:
    compiled = getattr(jitted, "_thunder_jitted", jitted)  # a ThunderModule's, or a jitted function
    computation = compiled._cache[-1].computation  # type: ignore[attr-defined]
    assert isinstance(computation, GraphedFunction)
    return computation


def test_without_a_cuda_input_the_program_runs_without_a_graph_and_says_so() -> None:
    model = _mlp()
    jmodel = thunder.jit(model, cuda_graphs=True)
    x = torch.randn(8, 784)
    with pytest.warns(CudaGraphWarning, match="without a CUDA graph"):
        with torch.no_grad():
            out = jmodel(x)
    torch.testing.assert_close(out, model(x).detach())


@needs_cuda
def test_eval_forward_replays_one_graph_and_matches_eager() -> None:
    model = _mlp().cuda().eval()
    jmodel = thunder.jit(model, cuda_graphs=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        xs = [torch.randn(8, 784, device="cuda") for _ in range(3)]
        outs = [jmodel(x) for x in xs]
        for x, out in zip(xs, outs):  # earlier results are not overwritten by later replays
            torch.testing.assert_close(out, model(x))
        first = _graphed(jmodel)
        assert len(first.graphs) == 1  # its small outputs are copied out: nothing held, nothing retired
        torch.testing.assert_close(jmodel(x4 := torch.randn(4, 784, device="cuda")), model(x4))
        second = _graphed(jmodel)  # another shape: another cache entry, run without a graph once ...
        assert second is not first and not second.graphs
        torch.testing.assert_close(jmodel(x4), model(x4))
        assert len(second.graphs) == 1 and len(first.graphs) == 1  # ... then captured


@needs_cuda
def test_parameters_updated_in_place_or_replaced_are_seen() -> None:
    model = _mlp().cuda().eval()
    jmodel = thunder.jit(model, cuda_graphs=True)
    x = torch.randn(8, 784, device="cuda")
    with torch.no_grad():
        jmodel(x)
        model[0].weight.mul_(0.5)  # same storage: the graph reads it where it is
        torch.testing.assert_close(jmodel(x), model(x))
        model[2].weight.data = torch.randn_like(model[2].weight)  # new storage: a new capture
        torch.testing.assert_close(jmodel(x), model(x))


@needs_cuda
def test_training_steps_with_graphs_match_eager() -> None:
    torch.manual_seed(0)
    model = _mlp().cuda()
    reference = copy.deepcopy(model)
    jmodel = thunder.jit(model, cuda_graphs=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        x, t = torch.randn(8, 784, device="cuda"), torch.randint(0, 10, (8,), device="cuda")
        for net, opt in ((jmodel, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            F.cross_entropy(net(x), t).backward()
            opt.step()
        for ours, eager in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours, eager, atol=1e-5, rtol=1e-4)


@needs_cuda
@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True),
        lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    ],
    ids=["adamw-fused", "adam", "sgd-momentum"],
)
def test_the_whole_training_step_as_one_graph_matches_eager(make_optimizer: object) -> None:
    """Forward, ``loss.backward()`` and ``optimizer.step()`` in one program replayed as one graph: the
    parameters and the optimizer's state are written in place by the graph, step after step. In float64:
    Adam divides by the root of its second moment, which turns float32 rounding (cuBLAS against a
    fusion) of a gradient near zero into a visible difference of the update."""
    torch.manual_seed(0)
    model = _mlp().cuda().double()
    reference = copy.deepcopy(model)
    optimizer, reference_optimizer = (
        make_optimizer(model.parameters()),
        make_optimizer(reference.parameters()),
    )

    def step(
        net: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, t: torch.Tensor
    ) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), t)
        loss.backward()
        opt.step()
        return loss

    jitted = thunder.jit(step, cuda_graphs=True)
    # non-fused Adam keeps its step count on the CPU, as eager does: no graph, and a warning says so
    graphed = not (isinstance(optimizer, torch.optim.Adam) and not optimizer.defaults["fused"])
    losses = []
    for _ in range(5):
        x, t = (
            torch.randn(8, 784, device="cuda", dtype=torch.float64),
            torch.randint(0, 10, (8,), device="cuda"),
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CudaGraphWarning)
            losses.append(jitted(model, optimizer, x, t))
        if graphed:
            assert not caught, [str(w.message) for w in caught]
        expected = step(reference, reference_optimizer, x, t)
        torch.testing.assert_close(losses[-1], expected)
        for ours, eager in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours, eager)
    for ours, eager in zip(optimizer.state.values(), reference_optimizer.state.values()):
        for key in eager:
            torch.testing.assert_close(ours[key], eager[key])
    assert len({id(loss) for loss in losses}) == 5 and not losses[0].equal(losses[-1])  # not overwritten
    if graphed:  # the first step made the state (its own entry, run once); the others replay one graph
        assert len(_graphed(jitted).graphs) == 1
    else:
        assert _graphed(jitted).refused is not None and "on cpu" in _graphed(jitted).refused


def _write_cache(cache: torch.Tensor, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    cache.index_copy_(0, position, x)  # a static KV cache's update
    cache[-1].add_(1)  # and its length, counted in place: an update applied twice would show
    return cache.sum(0) * 2


def test_inputs_written_in_place_are_found_in_the_execution_trace() -> None:
    from thunder.core.cuda_graphs import mutated_inputs

    jitted = thunder.jit(_write_cache)
    jitted(torch.zeros(4, 3), torch.ones(1, 3), torch.tensor([1]))
    assert mutated_inputs(thunder.last_traces(jitted)[-1]) == frozenset({0})


@needs_cuda
def test_an_input_updated_in_place_is_written_by_the_graph_itself() -> None:
    jitted = thunder.jit(_write_cache, cuda_graphs=True)
    cache, expected_cache = torch.zeros(6, 3, device="cuda"), torch.zeros(6, 3, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for step in range(4):  # the same cache every step: captured at its address, nothing copied
            x, position = torch.randn(1, 3, device="cuda"), torch.tensor([step], device="cuda")
            torch.testing.assert_close(jitted(cache, x, position), _write_cache(expected_cache, x, position))
            torch.testing.assert_close(cache, expected_cache)
        graphed = _graphed(jitted)
        assert graphed.mutated == frozenset({0}) and len(graphed.graphs) == 1
        assert 0 not in [index for index, _ in next(iter(graphed.graphs.values())).copied]
        other, expected_other = torch.ones(6, 3, device="cuda"), torch.ones(6, 3, device="cuda")
        for step in (4, 5):  # another cache: run once, then its own capture, written in place
            x, position = torch.randn(1, 3, device="cuda"), torch.tensor([step], device="cuda")
            torch.testing.assert_close(jitted(other, x, position), _write_cache(expected_other, x, position))
            torch.testing.assert_close(other, expected_other)
        torch.testing.assert_close(cache, expected_cache)  # and the first one is left as it was
        assert len(graphed.graphs) == 2


def test_the_key_changes_with_what_a_capture_depends_on() -> None:
    """The key each call computes (on the CPU too: it is plain tensor metadata)."""
    weight, cache, x = torch.nn.Parameter(torch.randn(3, 3)), torch.zeros(4, 3), torch.randn(2, 3)
    graphed = GraphedFunction(lambda *args: None, mutated=frozenset({1}))
    key = graphed.key((weight, cache, x, 2))
    assert graphed.key((weight, cache, x, 2)) == key
    assert graphed.key((weight, cache, torch.randn(2, 3), 2)) == key  # copied in: its address is free
    weight.data = weight.data.t()  # the same address, other strides
    assert graphed.key((weight, cache, x, 2)) != key
    weight.data = torch.randn(3, 3)  # another address
    assert graphed.key((weight, cache, x, 2)) != key
    weight.data = weight.data.t().contiguous().t()
    key = graphed.key((weight, cache, x, 2))
    assert graphed.key((weight, torch.zeros(4, 3), x, 2)) != key  # an input written in place: its address
    assert graphed.key((weight, cache, torch.randn(3, 2).t(), 2)) != key  # a copied input's strides
    assert graphed.key((weight, cache, x, 3)) != key and graphed.key((weight, cache, x, 2.0)) != key


def test_the_key_with_one_input_of_a_kind() -> None:
    graphed = GraphedFunction(lambda *args: None)
    weight = torch.nn.Parameter(torch.randn(2))
    assert graphed.key((weight,)) == ((weight.data_ptr(),), None, ((1,),), (), None)
    assert GraphedFunction(lambda *args: None).key((torch.randn(2, 2),)) == ((), None, ((2, 1),), (), None)


def test_the_key_leaves_out_the_strides_the_prologue_checked() -> None:
    """After the prologue's C++ check passed with the strides it recorded (``TensorChecks.covered``:
    a version and the positions), those strides are the version's: the key holds the version instead."""
    weight, x = torch.nn.Parameter(torch.randn(3, 3)), torch.randn(2, 3)
    graphed = GraphedFunction(lambda *args: None)
    checked: list[Any] = [(0, (0,))]
    graphed.checked_strides = lambda: checked[0]
    assert graphed.key((weight, x)) == ((weight.data_ptr(),), 0, ((3, 1),), (), None)  # x's strides only
    checked[0] = None  # the last check did not pass the recorded strides: all strides are in the key
    assert graphed.key((weight, x)) == ((weight.data_ptr(),), None, ((3, 1), (3, 1)), (), None)
    checked[0] = (1, (0, 1))
    assert graphed.key((weight, x)) == ((weight.data_ptr(),), 1, (), (), None)


@pytest.mark.skipif(
    not CAN_MOVE_HELD_OUTPUTS, reason="torch before 2.12 has no UntypedStorage._swap_data_ptr_"
)
def test_lent_outputs_held_by_the_caller_keep_their_values_when_the_buffers_are_written() -> None:
    """The lending itself, on the CPU: static buffers stand for a graph's outputs, and writing them
    stands for a replay. What the caller holds (a lent tensor, or only a view of it) keeps its values
    and moves to memory of its own; what it dropped stays where it was, uncopied."""
    from thunder.core.cuda_graphs import _LENT_ADDRESSES, _LentOutputs

    storage = torch.arange(12.0)
    outputs = [storage[:6].view(2, 3), storage[6:], torch.full((4,), 7.0), 5]
    lending = _LentOutputs(outputs, [0, 1, 2])
    assert len(lending.storages) == 2  # two outputs on one storage share one lent storage
    results = list(outputs)
    lending.lend(results)
    kept, view_only = results[0], results[1][2:]
    assert kept.data_ptr() == outputs[0].data_ptr() and kept is not outputs[0]  # aliased, not copied
    assert kept.data_ptr() in _LENT_ADDRESSES
    del results
    lending.take_back()  # before the "replay": the caller holds `kept` and a view of output 1
    assert not _LENT_ADDRESSES
    for static in outputs[:3]:
        static.mul_(-1)  # the replay
    torch.testing.assert_close(kept, torch.arange(6.0).view(2, 3))
    torch.testing.assert_close(view_only, torch.arange(8.0, 12.0))
    assert kept.data_ptr() != outputs[0].data_ptr()  # it moved
    kept.add_(1)  # and its memory is its own
    torch.testing.assert_close(outputs[0], -torch.arange(6.0).view(2, 3))
    torch.testing.assert_close(outputs[2], torch.full((4,), -7.0))


def test_a_lent_output_dropped_in_time_is_not_copied() -> None:
    from thunder.core.cuda_graphs import _LentOutputs

    outputs = [torch.ones(3)]
    lending = _LentOutputs(outputs, [0])
    results = list(outputs)
    lending.lend(results)
    address = results[0].data_ptr()
    held = results[0].view(3)
    del results
    del held
    assert lending.lent and all(ref.expired() for ref in lending.lent)
    lending.take_back()  # nothing to move
    assert outputs[0].data_ptr() == address


def _wide() -> torch.nn.Sequential:  # outputs of 4 MiB: lent, not copied out (_LEND_MIN_BYTES)
    return torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 4096))


@needs_cuda
def test_results_held_across_replays_keep_their_values() -> None:
    """Lent outputs on the GPU: results (and views of them) held across replays keep eager's values,
    whether the graph moves them out (torch 2.12+) or retires and copies from then on."""
    model = _wide().cuda().eval()
    jmodel = thunder.jit(model, cuda_graphs=True)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CudaGraphWarning)
        xs = [torch.randn(256, 784, device="cuda") for _ in range(6)]
        outs = [jmodel(x) for x in xs]
        views = [out[:, :3] for out in outs]
        outs = outs[:2]  # drop some results, keep views of them
        for x, view in zip(xs, views):
            torch.testing.assert_close(view, model(x)[:, :3])
        for x, out in zip(xs, outs):
            torch.testing.assert_close(out, model(x))
        del views, outs
        for x in xs:  # results dropped in time: lent again and again, never copied
            torch.testing.assert_close(jmodel(x), model(x))
        graphed = _graphed(jmodel)
        assert len(graphed.graphs) == 1
    assert not caught, [str(w.message) for w in caught]
    if CAN_MOVE_HELD_OUTPUTS:
        assert graphed.lends and graphed.copies_outputs_because is None
    else:  # the graph it lent from was retired; the function says why it copies its outputs now
        assert not graphed.lends and "256x4096" in str(graphed.copies_outputs_because)


@needs_cuda
def test_the_backward_reads_the_forwards_lent_activations_in_place() -> None:
    """Training with graphs: the forward lends its saved activations, the backward's graph reads them
    where they are (no copy into its own buffers); gradients equal eager's step after step."""
    torch.manual_seed(0)
    model = _wide().cuda()
    reference = copy.deepcopy(model)
    jmodel = thunder.jit(model, cuda_graphs=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for _ in range(5):
            x = torch.randn(256, 784, device="cuda")
            for net in (jmodel, reference):
                net.zero_grad(set_to_none=True)
                net(x).square().mean().backward()
            for ours, eager in zip(model.parameters(), reference.parameters()):
                torch.testing.assert_close(ours.grad, eager.grad, atol=1e-5, rtol=1e-4)
    forward, backward = graphed_pair(jmodel)
    assert len(forward.graphs) == 1 and len(backward.graphs) == 1 and forward.lends
    (forward_graph,) = forward.graphs.values()
    (backward_graph,) = backward.graphs.values()
    assert forward_graph.lent.tensors  # activations are lent to autograd's saved tensors ...
    # ... and the backward reads them in place: it copies in only the input x and the output's gradient
    assert len(backward_graph.copied) <= 2, [tuple(buffer.shape) for _, buffer in backward_graph.copied]
