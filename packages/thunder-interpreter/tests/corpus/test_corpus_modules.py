"""Corpus: nn.Module fidelity: containers, hooks, tied parameters, state dicts, ThunderModule queries."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from thunder.core.module import ThunderModule


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.heads = nn.ModuleDict({"mean": nn.Linear(4, 2), "scale": nn.Linear(4, 2)})
        self.tail = nn.Sequential(nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
        self.register_buffer("offset", torch.linspace(0, 1, 4))

    def forward(self, x):
        for index, layer in enumerate(self.layers):
            x = layer(x) if index % 2 == 0 else torch.relu(layer(x))
        x = self.tail(x) + self.offset
        x = self.layers[-1](x) + self.layers[0].bias
        return {name: head(x) for name, head in self.heads.items()}


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 6, bias=False)
        self.project = nn.Linear(6, 4, bias=False)
        self.unembed = nn.Linear(6, 4, bias=False)
        self.unembed.weight = self.project.weight  # the same Parameter in two modules

    def forward(self, x):
        h = self.embed(x)
        return self.project(h) + self.unembed(h)


class WithSubmoduleAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.scale = 2.0
        self.use_bias = True

    def forward(self, x):
        y = self.inner(x) * self.scale
        return y + 1 if self.use_bias else y


def _inputs(size=3):
    return torch.randn(size, 4)


def _compare(module, jitted, sizes=(3, 3, 5)):
    for size in sizes:
        x = _inputs(size)
        expected, actual = module(x), jitted(x)
        if isinstance(expected, dict):
            assert expected.keys() == actual.keys()
            for key in expected:
                torch.testing.assert_close(actual[key], expected[key])
        else:
            torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "make",
    [
        Stack,
        Tied,
        WithSubmoduleAttributes,
        lambda: nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4), nn.Softmax(dim=-1)),
        lambda: nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.SiLU()), nn.Sequential(nn.Linear(4, 2))),
    ],
    ids=["containers", "tied", "attributes", "sequential", "nested_sequential"],
)
def test_module_matches_eager_on_changed_values_and_shapes(jit, make) -> None:
    module = make().eval()
    _compare(module, jit(module))


def test_forward_pre_and_post_hooks_on_module_and_submodules(jit) -> None:
    module = Stack().eval()
    module.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    module.layers[1].register_forward_hook(lambda mod, args, out: out + 1)
    module.tail.register_forward_pre_hook(lambda mod, args: None)  # returns nothing: arguments unchanged
    module.heads["mean"].register_forward_hook(lambda mod, args, kwargs, out: out * 3, with_kwargs=True)
    jitted = jit(module)
    _compare(module, jitted)
    module.layers[1].register_forward_hook(lambda mod, args, out: out * 0.5)  # added later: retrace
    _compare(module, jitted)


def test_hook_with_a_side_effect_on_outside_state_is_replayed(jit) -> None:
    module = WithSubmoduleAttributes()
    calls = []
    module.inner.register_forward_pre_hook(lambda mod, args: calls.append(mod) or None)
    jitted = jit(module)
    jitted(_inputs())
    jitted(_inputs())  # the list is longer now: a new entry, which appends again
    assert calls == [module.inner, module.inner]


def test_hook_removed_between_calls_is_seen(jit) -> None:
    module = WithSubmoduleAttributes().eval()
    handle = module.inner.register_forward_hook(lambda mod, args, out: out * 0)
    jitted = jit(module)
    x = _inputs()
    torch.testing.assert_close(jitted(x), module(x))
    handle.remove()
    torch.testing.assert_close(jitted(x), module(x))


def test_tied_parameters_are_one_input_and_updates_reach_both_uses(jit) -> None:
    module = Tied()
    jitted = jit(module)
    x = _inputs()
    torch.testing.assert_close(jitted(x), module(x))
    assert [name for name, _ in jitted.named_parameters()] == ["embed.weight", "project.weight"]
    with torch.no_grad():
        module.project.weight.add_(1.0)
    torch.testing.assert_close(jitted(x), module(x))


def test_module_attribute_changes_are_seen(jit) -> None:
    module = WithSubmoduleAttributes().eval()
    jitted = jit(module)
    x = _inputs()
    torch.testing.assert_close(jitted(x), module(x))
    module.scale = 5.0
    torch.testing.assert_close(jitted(x), module(x))
    module.use_bias = False
    torch.testing.assert_close(jitted(x), module(x))
    module.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU())  # a different submodule: retrace
    torch.testing.assert_close(jitted(x), module(x))


def test_state_dict_and_load_state_dict_share_with_the_original(jit) -> None:
    module = Stack().eval()
    jitted = jit(module)
    assert isinstance(jitted, ThunderModule)
    state = jitted.state_dict()
    assert list(state) == list(module.state_dict())
    fresh = Stack().eval()
    jitted.load_state_dict(fresh.state_dict())
    for name, tensor in fresh.state_dict().items():
        torch.testing.assert_close(module.state_dict()[name], tensor)
    x = _inputs()
    torch.testing.assert_close(jitted(x)["mean"], fresh(x)["mean"])
    with pytest.raises(RuntimeError, match="Missing key"):
        jitted.load_state_dict({})


def test_thunder_module_queries_answer_with_the_original_names(jit) -> None:
    module = Stack()
    jitted = jit(module)
    assert jitted.get_parameter("layers.0.weight") is module.layers[0].weight
    assert jitted.get_buffer("offset") is module.offset
    assert jitted.get_submodule("heads.mean") is module.heads["mean"]
    assert jitted.get_submodule("tail.1") is module.tail[1]
    assert dict(jitted.named_parameters()).keys() == dict(module.named_parameters()).keys()
    assert [n for n, _ in jitted.named_buffers()] == ["offset"]
    assert [n for n, _ in jitted.named_parameters(prefix="model", recurse=False)] == []
    with pytest.raises(AttributeError):
        jitted.get_parameter("layers.9.weight")
    with pytest.raises(AttributeError):
        jitted.get_buffer("layers.0.weight")  # a parameter, not a buffer
    with pytest.raises(AttributeError):
        jitted.get_submodule("nothing")


def test_train_and_eval_mode_retrace(jit) -> None:
    module = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    jitted = jit(module)
    x = _inputs()
    module.eval()
    torch.testing.assert_close(jitted(x), module(x))
    module.train()
    torch.manual_seed(0)
    out = jitted(x)
    zeros = (out == 0).float().mean().item()
    assert 0.1 < zeros < 0.9, zeros  # dropout is active again in training mode
