"""Training under ``cuda_graphs=True``: the backward's graph is captured into its forward's memory pool
and frees the saved activations at their last use, as eager's backward does (core/cuda_graphs.py).

Sharing a pool makes the two graphs write each other's memory, so every test here checks eager's
results where that could go wrong: gradients accumulated over several forwards (the forward's replay
writes where the backward's gradients lie), ``retain_graph=True`` (the backward's replay reuses the
activations a second backward reads), outputs held across the backward, two forwards before one
backward. They need a CUDA device and skip with the reason otherwise.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from cuda_graph_helpers import graphed_pair  # this folder's helper (conftest.py puts it on sys.path)

import thunder
from thunder.core.cuda_graphs import CAN_MOVE_HELD_OUTPUTS, CudaGraphWarning

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")


def _model() -> torch.nn.Sequential:  # activations of 2-8 MiB at batch 512: lent (_LEND_MIN_BYTES)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 1024),
        torch.nn.GELU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.Tanh(),
        torch.nn.Linear(1024, 4096),
    )


def _models() -> tuple[torch.nn.Module, torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    model = _model().cuda()
    return model, copy.deepcopy(model), thunder.jit(model, cuda_graphs=True)


def _assert_same_gradients(model: torch.nn.Module, reference: torch.nn.Module) -> None:
    for ours, eager in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours.grad, eager.grad, atol=1e-4, rtol=1e-4)


def test_the_backward_graph_takes_over_the_forwards_activations() -> None:
    """Step after step with new inputs: the backward's graph shares the forward's pool, the forward's
    graph no longer owns the saved activations (the backward's capture freed them at their last use),
    and gradients equal eager's."""
    model, reference, jmodel = _models()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for _ in range(5):
            x = torch.randn(512, 784, device="cuda")
            for net in (jmodel, reference):
                net.zero_grad(set_to_none=True)
                net(x).square().mean().backward()
            _assert_same_gradients(model, reference)
    forward, backward = graphed_pair(jmodel)
    (forward_graph,) = forward.graphs.values()
    (backward_graph,) = backward.graphs.values()
    assert backward_graph.shares_pool and forward_graph.partner == (backward, backward_graph)
    handed = [t.position for t in forward_graph.lent.tensors if forward_graph.outputs[t.position] is None]
    assert len(handed) >= 3, handed  # the activations of the three layers, at least


def test_gradients_accumulated_over_several_forwards_match_eager() -> None:
    """``.grad`` holds the backward's output when the next forward replays into the shared pool: the
    gradients are moved out first (torch 2.12+), or the pair retires and the backward copies its
    outputs from then on; either way the accumulated gradients are eager's."""
    model, reference, jmodel = _models()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.01)
    for _ in range(3):
        for opt in (optimizer, reference_optimizer):
            opt.zero_grad(set_to_none=True)
        for micro in range(3):
            x = torch.randn(512, 784, device="cuda") + micro
            for net in (jmodel, reference):
                net(x).square().mean().backward()
        _assert_same_gradients(model, reference)
        optimizer.step()
        reference_optimizer.step()
    forward, backward = graphed_pair(jmodel)
    if not CAN_MOVE_HELD_OUTPUTS:
        assert "share" in str(backward.copies_outputs_because)


def test_retain_graph_and_a_second_backward_match_eager() -> None:
    """``retain_graph=True``: the backward runs without its pool-sharing graph (whose replay reuses the
    activations' memory), and the second backward reads them intact."""
    model, reference, jmodel = _models()
    for _ in range(4):
        x = torch.randn(512, 784, device="cuda")
        for net in (jmodel, reference):
            net.zero_grad(set_to_none=True)
            loss = net(x).square().mean()
            loss.backward(retain_graph=True)
            loss.backward()
        _assert_same_gradients(model, reference)


def test_outputs_held_across_the_backward_keep_their_values() -> None:
    """The forward's own outputs stay the forward graph's: the backward's replay never writes them."""
    model, reference, jmodel = _models()
    for _ in range(4):
        x = torch.randn(512, 784, device="cuda")
        jmodel.zero_grad(set_to_none=True)
        out = jmodel(x)
        out.square().mean().backward()
        with torch.no_grad():
            torch.testing.assert_close(out, reference(x), atol=1e-4, rtol=1e-4)


def test_two_forwards_before_one_backward_match_eager() -> None:
    """The first forward's activations are still needed when the forward replays again."""
    model, reference, jmodel = _models()
    for _ in range(4):
        x, y = torch.randn(512, 784, device="cuda"), torch.randn(512, 784, device="cuda")
        for net in (jmodel, reference):
            net.zero_grad(set_to_none=True)
            (net(x).square().mean() + net(y).abs().mean()).backward()
        _assert_same_gradients(model, reference)
