"""Writes eager's autograd does not see, against eager PyTorch: through ``x.detach()`` (which shares
``x``'s memory) and under ``torch.no_grad()``. The tensor gets the new values, and keeps its place in
the autograd graph: gradients reach it as they would have reached its old values. Each program runs
several times under one jitted function, with new values each call."""

from __future__ import annotations

import pytest
import torch

import thunder


def _detach_add(x: torch.Tensor) -> torch.Tensor:
    y = x.detach()
    y.add_(1)
    return x * 2


def _detach_setitem(x: torch.Tensor) -> torch.Tensor:
    y = x.detach()
    y[0] = 5
    return x.sin()


def _detach_of_a_view(x: torch.Tensor) -> torch.Tensor:
    x[1:].detach().mul_(3)
    x.t().detach()[:, torch.tensor([0, 2])] = -1.0
    return x + 1


def _view_of_a_detach(x: torch.Tensor) -> torch.Tensor:
    x.detach()[0, 1:].zero_()
    return x.cos()


def _through_data(x: torch.Tensor) -> torch.Tensor:
    x.data.clamp_(min=0)
    x.data[:, 0] = x.data[:, 1]
    return x * x.data.requires_grad


NO_GRAD_INPUTS = [_detach_add, _detach_setitem, _detach_of_a_view, _view_of_a_detach, _through_data]


@pytest.mark.parametrize("fn", NO_GRAD_INPUTS, ids=lambda fn: fn.__name__)
def test_writes_through_detach_reach_the_input(fn) -> None:  # noqa: ANN001
    jitted = thunder.jit(fn)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = torch.randn(3, 3, generator=generator)
        expected_x, actual_x = x.clone(), x.clone()
        expected, actual = fn(expected_x), jitted(actual_x)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(actual_x, expected_x)


def _input_detached(x: torch.Tensor) -> torch.Tensor:
    x.detach().mul_(2)  # a leaf that requires grad: eager allows the write through detach
    return (x * x).sum()


def _input_under_no_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        x[0] = 1.5
        x.add_(1)
    return (x * x.sum()).sum()


def _intermediate_detached(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    y.detach()[1:] = 0.5
    return (y * x).sum()


def _intermediate_under_no_grad(x: torch.Tensor) -> torch.Tensor:
    y = x * 2 + 1  # (exp would save its output, which eager then refuses to differentiate)
    with torch.no_grad():
        y[:, 0].mul_(-1)
    z = y * 3  # a seen write after the unseen one: its gradient reaches x through both
    z[0] = x[0] * 4
    return (z * y).sum()


def _detached_then_returned(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.detach().add_(2)
    return y


def _parameter_initialized_through_data(x: torch.Tensor) -> torch.Tensor:
    x.data.mul_(0.5)  # (a weight initialized in place)
    return (x.sin() * x).sum()


WITH_GRADS = [
    _input_detached, _input_under_no_grad, _intermediate_detached, _intermediate_under_no_grad,
    _detached_then_returned, _parameter_initialized_through_data,
]  # fmt: skip


@pytest.mark.parametrize("fn", WITH_GRADS, ids=lambda fn: fn.__name__)
def test_gradients_pass_unseen_writes_as_eager(fn) -> None:  # noqa: ANN001
    jitted = thunder.jit(fn)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(3, 3, generator=generator)
        results = []
        for run in (fn, jitted):
            xs = x.clone().requires_grad_()
            out = run(xs)
            out.backward(torch.ones_like(out))
            results.append((out.detach(), xs.detach(), xs.grad))
        for expected, actual in zip(*results):
            torch.testing.assert_close(actual, expected)


def _saved_output_overwritten(x: torch.Tensor) -> torch.Tensor:
    y = x.exp()  # saves its output for the backward
    with torch.no_grad():
        y.mul_(-1)
    return (y * 3).sum()


def _saved_input_overwritten(x: torch.Tensor) -> torch.Tensor:
    z = x * x  # saves x
    x.detach().add_(1)
    return z.sum()


def _saved_view_overwritten(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    z = y[0].sin()  # saves the view y[0]
    y.detach()[0].zero_()
    return (z + y).sum()


@pytest.mark.parametrize(
    "fn",
    [_saved_output_overwritten, _saved_input_overwritten, _saved_view_overwritten],
    ids=lambda fn: fn.__name__,
)
def test_a_backward_reading_an_overwritten_tensor_raises_as_eager(fn) -> None:  # noqa: ANN001
    """Eager's backward raises where an op had saved the tensor written: so does thunder's, when it
    runs; the forward runs, as eager's does."""
    jitted = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3, 3)
        expected_x, actual_x = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected, actual = fn(expected_x), jitted(actual_x)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(actual_x, expected_x)
        for out in (expected, actual):
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                out.backward()
