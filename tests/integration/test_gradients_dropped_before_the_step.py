"""A jitted training step that sets ``.grad`` anew (``zero_grad(set_to_none=True)``, then ``backward``)
drops the old gradients before its computation runs, as eager frees them when ``zero_grad`` runs
(``Epilogue.before``): the old and the new gradients are never alive together (a model's worth of
memory), and a CUDA graph's gradients lent out by the last replay are no longer held when it replays."""

from __future__ import annotations

import copy
import weakref

import torch
import torch.nn.functional as F

import thunder


def _step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), t)
    loss.backward()
    optimizer.step()
    return loss


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def test_the_old_gradients_are_gone_when_the_computation_runs() -> None:
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    jitted = thunder.jit(_step)
    x, t = torch.randn(4, 6), torch.randint(0, 3, (4,))
    jitted(model, optimizer, x, t)
    jitted(model, optimizer, x, t)  # the entry that finds gradients from the step before
    entry = jitted._cache[-1]  # type: ignore[attr-defined]
    assert entry.epilogue is not None and entry.epilogue.before is not None
    assert "def before(args, kwargs):" in str(entry.epilogue)
    old = [weakref.ref(p.grad) for p in model.parameters()]
    seen: list[bool] = []
    computation = entry.computation

    def watched(*inputs: object) -> object:
        seen.append(all(ref() is None for ref in old))
        return computation(*inputs)

    entry.computation = watched
    try:
        jitted(model, optimizer, x, t)
    finally:
        entry.computation = computation
    assert seen == [True]
    assert all(p.grad is not None for p in model.parameters())


def test_steps_match_eager_and_gradients_the_caller_kept_are_left_alone() -> None:
    model, optimizer_class = _model(), torch.optim.SGD
    reference = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=0.1, momentum=0.9)
    reference_optimizer = optimizer_class(reference.parameters(), lr=0.1, momentum=0.9)
    jitted = thunder.jit(_step)
    kept: list[torch.Tensor] = []
    for i in range(4):
        x, t = torch.randn(4, 6), torch.randint(0, 3, (4,))
        if i:
            kept = [p.grad for p in model.parameters()]  # the caller's references to the old gradients
            before = [g.clone() for g in kept]
        torch.testing.assert_close(
            jitted(model, optimizer, x, t), _step(reference, reference_optimizer, x, t)
        )
        for ours, eager in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours, eager)
            torch.testing.assert_close(ours.grad, eager.grad)
        if i:
            for old, value, p in zip(kept, before, model.parameters()):
                torch.testing.assert_close(old, value)  # not written by the step
                assert old is not p.grad


def test_a_step_that_reads_the_old_gradients_first_still_sees_them() -> None:
    def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> torch.Tensor:
        previous = sum(p.grad.square().sum() for p in model.parameters())
        optimizer.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        return previous

    model = _model()
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    warm = torch.randn(2, 6)
    for net in (model, reference):
        net(warm).sum().backward()
    jitted = thunder.jit(step)
    for _ in range(3):
        x = torch.randn(4, 6)
        torch.testing.assert_close(jitted(model, optimizer, x), step(reference, reference_optimizer, x))
        for ours, eager in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours.grad, eager.grad)
