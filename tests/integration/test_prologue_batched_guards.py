"""Every kind of guard the prologue checks through a fast spelling still rejects a change, called
through ``thunder.jit`` on plain modules and on a Hugging Face decoder; eager PyTorch is the oracle.

The fast spellings (``core/prologue.py``, ``core/prologue_fetches.py``): a value check compares the
value with the object traced before its type and value (``16`` and ``True`` must still fail a check
for ``1``, an equal value that is another object must still pass); a dict's keys are compared object
by object before ``check_keys``; fetches through a module's globals (``os.environ._data``) and both
sides of an alias check (``layer.self_attn.config is model.config``) are bound once per call. Each
test warms the jitted callable until the prologue runs its steady-state checks, changes one thing,
and checks that the next call recompiles (or hits, for an equal value) and answers as eager does.
"""

from __future__ import annotations

import copy
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")

# read by Scaled.forward through this module's globals, twice (so the prologue binds the fetch once)
SETTINGS = types.SimpleNamespace(factor=2.0, offset=1)


class Scaled(torch.nn.Module):
    """A module whose forward depends on attributes of every kind the prologue checks by value."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
        self.repeats = 1  # int; True and 1.0 are equal to it
        self.big = 100_000  # an int that is not a cached small int
        self.eps = 1e-6
        self.mode = "scale"
        self.device_of_bias = torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.linear(x))
        for _ in range(int(self.repeats)):  # 1, True and 1.0 loop once: only the checks tell them apart
            y = y * SETTINGS.factor + SETTINGS.offset
        if self.mode == "scale":
            y = y * (self.big / 100_000) + self.eps
        if isinstance(self.repeats, bool):
            y = y - 1
        return y + torch.zeros(4, device=self.device_of_bias)


def _warm(jitted: Callable, *args: Any) -> None:
    for _ in range(3):  # the first call builds torch's tensor check, the next ones run it
        jitted(*args)


def _check(model: torch.nn.Module, change: Callable[[torch.nn.Module], Any], recompiles: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    jitted = thunder.jit(model)
    _warm(jitted, x)
    assert thunder.cache_misses(jitted) == 1
    change(model)
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == (2 if recompiles else 1)
    torch.testing.assert_close(jitted(x), model(x))  # and the entry it made (or hit) stays right


def _set(name: str, value: Callable[[], Any]) -> Callable[[torch.nn.Module], None]:
    return lambda model: setattr(model, name, value())


def _replace_weight(model: torch.nn.Module) -> None:
    model.linear._parameters["weight"] = torch.nn.Parameter(torch.randn(4, 4))


def _weight_data(shape: tuple[int, ...]) -> Callable[[torch.nn.Module], None]:
    def change(model: torch.nn.Module) -> None:
        model.linear.weight.data = torch.randn(shape)  # the same Parameter object

    return change


def _hook(kind: str) -> Callable[[torch.nn.Module], None]:
    def change(model: torch.nn.Module) -> None:
        if kind == "forward":
            model.act.register_forward_hook(lambda module, args, output: output * 3)
        elif kind == "pre":
            model.linear.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
        else:
            model.register_forward_hook(lambda module, args, output: output + 1)

    return change


def _global(name: str, value: Any) -> Callable[[torch.nn.Module], None]:
    def change(model: torch.nn.Module) -> None:
        setattr(SETTINGS, name, value)

    return change


def _rebind_settings(model: torch.nn.Module) -> None:
    sys.modules[__name__].SETTINGS = types.SimpleNamespace(factor=3.0, offset=1)


PLAIN_CHANGES: dict[str, tuple[Callable[[torch.nn.Module], Any], bool]] = {
    "int -> equal bool": (_set("repeats", lambda: True), True),
    "int -> equal float": (_set("repeats", lambda: 1.0), True),
    "int -> another int": (_set("repeats", lambda: 2), True),
    "large int -> an equal int object": (_set("big", lambda: int("100000")), False),
    "large int -> equal float": (_set("big", lambda: 100_000.0), True),
    "float -> an equal float object": (_set("eps", lambda: float("1e-06")), False),
    "float -> another float": (_set("eps", lambda: 1e-5), True),
    "str -> an equal str object": (_set("mode", lambda: "".join(["sc", "ale"])), False),
    "str -> another str": (_set("mode", lambda: "shift"), True),
    "device -> an equal device object": (_set("device_of_bias", lambda: torch.device("cpu")), False),
    "device -> its name": (_set("device_of_bias", lambda: "cpu"), True),
    "a forward hook on a submodule": (_hook("forward"), True),
    "a forward pre-hook on a submodule": (_hook("pre"), True),
    "a forward hook on the module": (_hook("module"), True),
    "weight.data of another shape": (_weight_data((4, 4, 1)), True),
    "weight.data of the same shape": (_weight_data((4, 4)), False),
    "_parameters['weight'] replaced": (_replace_weight, False),
    "a submodule replaced": (_set("act", lambda: torch.nn.Tanh()), True),
    "a global's attribute": (_global("factor", 3.0), True),
    "a global's attribute -> equal bool": (_global("offset", True), True),
    "a global rebound": (_rebind_settings, True),
}


@pytest.fixture(autouse=True)
def _restore_settings() -> Any:
    saved = SETTINGS
    factor, offset = SETTINGS.factor, SETTINGS.offset
    yield
    sys.modules[__name__].SETTINGS = saved
    saved.factor, saved.offset = factor, offset


@pytest.mark.parametrize("change", list(PLAIN_CHANGES))
def test_a_plain_module(change: str) -> None:
    function, recompiles = PLAIN_CHANGES[change]
    if change == "weight.data of another shape":  # eager cannot run it either: the call must not hit
        model = Scaled().eval()
        jitted = thunder.jit(model)
        _warm(jitted, torch.randn(3, 4))
        function(model)
        with pytest.raises(Exception):  # noqa: B017 -- eager's own error, raised by a recompile
            jitted(torch.randn(3, 4))
        assert thunder.cache_misses(jitted) == 2
        return
    _check(Scaled().eval(), function, recompiles)


def test_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    def read(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if os.environ.get("THUNDER_TEST_BATCHED_GUARDS") == "on" else x * 3

    monkeypatch.setenv("THUNDER_TEST_BATCHED_GUARDS", "on")
    jitted, x = thunder.jit(read), torch.randn(3)
    _warm(jitted, x)
    monkeypatch.setenv("THUNDER_TEST_BATCHED_GUARDS", "on")  # set again: another, equal value
    torch.testing.assert_close(jitted(x), read(x))
    assert thunder.cache_misses(jitted) == 1
    monkeypatch.setenv("THUNDER_TEST_BATCHED_GUARDS", "off")
    torch.testing.assert_close(jitted(x), read(x))
    assert thunder.cache_misses(jitted) == 2
    monkeypatch.setenv("THUNDER_TEST_BATCHED_GUARDS_OTHER", "1")  # another variable: the keys changed
    torch.testing.assert_close(jitted(x), read(x))
    assert thunder.cache_misses(jitted) == 3


def test_a_set_attribute_changed_in_place() -> None:
    class Gate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.allowed = {1, 2}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if 3 in self.allowed else x * 5

    _check(Gate(), lambda model: model.allowed.add(3), recompiles=True)


def test_an_alias_of_two_arguments() -> None:
    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    jitted, x = thunder.jit(add), torch.randn(3)
    _warm(jitted, x, x)
    y = x.clone()
    torch.testing.assert_close(jitted(x, y), add(x, y))
    assert thunder.cache_misses(jitted) == 2


# A Hugging Face decoder through a StaticCache: the prompt and the one-token step compile once each.


def _llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def _cache(model: torch.nn.Module) -> Any:
    cache = transformers.StaticCache(config=model.config, max_cache_len=16)
    cache.early_initialization(1, 2, 8, torch.float32, "cpu")
    return cache


def _decode(call: Callable, cache: Any, steps: int = 3) -> list[torch.Tensor]:
    cache.reset()
    ids, logits = torch.tensor([[3, 5, 7]]), []
    with torch.no_grad():
        for position in range(steps):
            start = 0 if position == 0 else 2 + position
            positions = torch.arange(start, start + ids.shape[1])[None]
            output = call(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=positions)
            logits.append(output.logits)
            ids = output.logits[:, -1:].argmax(-1)
    return logits


def _attention(model: torch.nn.Module, layer: int = 1) -> torch.nn.Module:
    return model.model.layers[layer].self_attn


def _with_attention(name: str, value: Callable[[Any], Any]) -> Callable[[torch.nn.Module], None]:
    def change(model: torch.nn.Module) -> None:
        attention = _attention(model)
        setattr(attention, name, value(getattr(attention, name)))

    return change


def _config(name: str, value: Any) -> Callable[[torch.nn.Module], None]:
    return lambda model: setattr(model.config, name, value)


def _own_config(model: torch.nn.Module) -> None:
    _attention(model).config = copy.deepcopy(model.config)  # equal values, another object


def _new_weight(model: torch.nn.Module) -> None:
    projection = _attention(model).o_proj
    projection._parameters["weight"] = torch.nn.Parameter(torch.randn_like(projection.weight))


def _weight_values(model: torch.nn.Module) -> None:
    _attention(model).o_proj.weight.data = torch.randn_like(_attention(model).o_proj.weight)


def _rotary(model: torch.nn.Module) -> None:
    from transformers.models.llama import modeling_llama

    original = modeling_llama.apply_rotary_pos_emb

    def rotary(*args: Any, **kwargs: Any) -> Any:
        q, k = original(*args, **kwargs)
        return q * 0.5, k

    modeling_llama.apply_rotary_pos_emb = rotary


def _hook(model: torch.nn.Module) -> None:
    model.model.layers[0].input_layernorm.register_forward_hook(lambda module, args, output: output * 2)


def _environment(model: torch.nn.Module) -> None:
    os.environ["THUNDER_TEST_BATCHED_GUARDS_HF"] = "1"


HF_CHANGES: dict[str, tuple[Callable[[torch.nn.Module], Any], bool]] = {
    "layer_idx -> equal bool": (_with_attention("layer_idx", lambda value: True), True),
    "layer_idx -> an equal int object": (_with_attention("layer_idx", lambda value: int(str(value))), False),
    "scaling -> an equal float object": (_with_attention("scaling", lambda value: float(repr(value))), False),
    "scaling -> another float": (_with_attention("scaling", lambda value: value * 2), True),
    "a config value": (_config("_attn_implementation", "eager"), True),
    "a layer's config replaced by an equal copy": (_own_config, True),
    "a global rebound (apply_rotary_pos_emb)": (_rotary, True),
    "a forward hook on a layer norm": (_hook, True),
    "_parameters['weight'] replaced": (_new_weight, False),
    "weight.data of the same shape": (_weight_values, False),
    "an environment variable added": (_environment, True),
}


@pytest.fixture
def _restore_hf_state() -> Any:
    from transformers.models.llama import modeling_llama

    rotary = modeling_llama.apply_rotary_pos_emb
    yield
    modeling_llama.apply_rotary_pos_emb = rotary
    os.environ.pop("THUNDER_TEST_BATCHED_GUARDS_HF", None)


@pytest.mark.parametrize("change", list(HF_CHANGES))
def test_a_hugging_face_decoder(change: str, _restore_hf_state: Any) -> None:
    function, recompiles = HF_CHANGES[change]
    torch.manual_seed(0)
    model = _llama()
    jitted = thunder.jit(model)
    cache = _cache(model)
    _decode(jitted, cache)
    _decode(jitted, cache)
    assert thunder.cache_misses(jitted) == 2  # the prompt and the one-token step
    function(model)
    actual = _decode(jitted, cache)
    expected = _decode(model, cache)
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)
    assert (thunder.cache_misses(jitted) > 2) is recompiles, thunder.compile_stats(jitted).recompile_reasons
