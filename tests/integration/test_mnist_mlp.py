"""The MNIST tutorial's MLP (torchvision.ops.MLP's layers, built with torch.nn) under thunder.jit."""

from __future__ import annotations

import re

import torch

import thunder


def mnist_mlp() -> torch.nn.Sequential:
    """torchvision.ops.MLP(784, [784, 784, 784, 28, 10], dropout=0.1): Linear, ReLU, Dropout per hidden layer."""
    layers: list[torch.nn.Module] = []
    sizes = [784, 784, 784, 784, 28]
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(0.1)]
    layers += [torch.nn.Linear(28, 10), torch.nn.Dropout(0.1)]
    return torch.nn.Sequential(*layers)


def test_eval_forward_matches_eager_and_reads_like_the_seed() -> None:
    torch.manual_seed(0)
    net = mnist_mlp().eval().requires_grad_(False)
    jitted = thunder.jit(net)
    data = torch.rand(8, 784)
    torch.testing.assert_close(jitted(data), net(data))
    torch.testing.assert_close(torch.argmax(jitted(data), 1), torch.argmax(net(data), 1))
    trace = str(thunder.last_traces(jitted)[-1])
    assert "@torch.no_grad()" in trace
    assert re.search(r"def computation\(input, _0_weight, _0_bias, _3_weight, _3_bias,", trace)
    assert 't0 = torch.nn.functional.linear(input, _0_weight, _0_bias)  # t0: "cpu f32[8, 784]"' in trace
    assert "dropout" not in trace  # eval mode: dropout is the identity and disappears
    assert "del [t0]" in trace
    assert thunder.cache_hits(jitted) == 1


def test_switching_to_training_mode_is_detected() -> None:
    torch.manual_seed(0)
    net = mnist_mlp().eval()
    jitted = thunder.jit(net)
    data = torch.rand(8, 784)
    torch.testing.assert_close(jitted(data), net(data))
    net.train()
    out = jitted(data)  # the prologue checks `training`: a new trace with dropout, not the eval one
    assert thunder.cache_misses(jitted) == 2
    assert "native_dropout" in str(thunder.last_traces(jitted)[-1])  # dropout, its mask kept for autograd
    assert out.shape == (8, 10)


def test_training_step_updates_the_shared_parameters() -> None:
    torch.manual_seed(0)
    net = mnist_mlp()
    jitted = thunder.jit(net)
    optimizer = torch.optim.Adam(net.parameters())
    before = net[0].weight.detach().clone()
    loss = torch.nn.functional.cross_entropy(jitted(torch.rand(8, 784)), torch.randint(0, 10, (8,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, net[0].weight)
