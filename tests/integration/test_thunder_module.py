"""ThunderModule stands for the module it wraps: its attributes and methods, with forward compiled."""

from __future__ import annotations

import pytest
import torch

import thunder


class Base(torch.nn.Module):
    def step(self, x):
        return self(x)


class Net(Base):
    scale = 3.0

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        return self.linear(x).relu()

    def step(self, x):  # super() needs self to be a Net: the method runs on the model itself
        self.calls += 1  # and the attributes it sets are the model's
        return super().step(x) * self.scale

    def twice(self, x):
        return self.forward(self.step(x))


def test_methods_run_on_the_model_with_the_compiled_forward() -> None:
    model = Net()
    jitted = thunder.jit(model)
    x = torch.randn(2, 4)
    with torch.no_grad():  # the second call's input is the first's output: no requires_grad either
        torch.testing.assert_close(jitted.twice(x), model.twice(x))
    assert thunder.cache_misses(jitted) == 1 and thunder.cache_hits(jitted) == 1  # self(...) and self.forward
    assert model.calls == 2 and "calls" not in jitted.__dict__
    assert "forward" not in model.__dict__  # the model itself stays eager
    model(x)
    assert thunder.cache_hits(jitted) == 1
    assert jitted.scale == 3.0 and jitted.linear is model.linear


def test_a_model_with_hooks_of_its_own_is_refused_in_routed_methods() -> None:
    model = Net()
    model.register_forward_hook(lambda module, args, output: output + 1)
    jitted = thunder.jit(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(jitted(x), model(x))  # a direct call traces the hook once
    with pytest.raises(NotImplementedError, match="model.forward = thunder.jit"):
        jitted.step(x)
    assert "forward" not in model.__dict__


def test_jitted_bound_forward_takes_the_modules_parameters() -> None:
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    model.forward = thunder.jit(model.forward)
    x = torch.randn(2, 4)
    torch.testing.assert_close(model(x), reference(x))
    torch.testing.assert_close(model.step(x), reference.step(x))
    with torch.no_grad():
        model.linear.weight.mul_(2)
        reference.linear.weight.mul_(2)
    torch.testing.assert_close(model(x), reference(x))  # parameters are inputs, not constants
    assert thunder.cache_misses(model.forward) == 1
