"""Objects the program creates and returns holding what it computed (interpreter/returned_objects.py).

Found in an audit: such an object was a constant of the trace, so the caller got the object made while
tracing, with ``TensorProxy`` placeholders in it, the same object on every call: a plain dataclass
``Result(loss=<TensorProxy t0>)``, and ``model(ids).past_key_values`` of a transformers model called
without a cache (it creates a ``DynamicCache``), which then failed when generation went on with it.
The epilogue now builds a fresh copy with this call's values; named tuples holding lists of tensors or
symbolic sizes are rebuilt by the computation (codegen).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
import torch

import thunder
from thunder.interpreter.returned_objects import attributes


@dataclasses.dataclass
class Result:
    count: int
    loss: torch.Tensor


@dataclasses.dataclass(frozen=True)
class Frozen:
    items: list


class Holder:
    def __init__(self, value: torch.Tensor):
        self.value = value
        self.inner = Result(1, value + 1)
        self.label = "holder"


class Slotted:
    __slots__ = ("value", "size")

    def __init__(self, value: torch.Tensor, size: int):
        self.value, self.size = value, size


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenSlots:
    value: torch.Tensor


Pair = collections.namedtuple("Pair", "first second")

_PROGRAMS = {
    "dataclass": lambda x: Result(x.shape[0], x.sum()),
    "frozen dataclass in a tuple": lambda x: (Frozen([x * 2, 3]), 1),
    "object in a list": lambda x: [Holder(x - 1)],
    "object in a dict": lambda x: {"holder": Holder(x * 3), "x": x},
    "named tuple of a list": lambda x: Pair([x * 2], 1),
    "slots": lambda x: Slotted(x * 2, x.shape[0]),
    "frozen dataclass with slots": lambda x: [FrozenSlots(x + 1)],
    "named tuple of sizes and an object": lambda x: Pair(x.shape[0], Result(x.shape[1], x)),
}


def _assert_same(result: Any, expected: Any) -> None:
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(result, expected)
    elif isinstance(expected, (list, tuple)):
        assert type(result) is type(expected) and len(result) == len(expected)
        for r, e in zip(result, expected):
            _assert_same(r, e)
    elif isinstance(expected, dict):
        assert type(result) is type(expected) and result.keys() == expected.keys()
        for key in expected:
            _assert_same(result[key], expected[key])
    elif hasattr(expected, "__dict__") or hasattr(expected, "__slots__"):
        assert type(result) is type(expected)
        _assert_same(attributes(result), attributes(expected))
    else:
        assert type(result) is type(expected) and result == expected


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("fn", _PROGRAMS.values(), ids=_PROGRAMS.keys())
def test_a_returned_object_holds_this_calls_values(fn: Any, dynamic: bool) -> None:
    jitted = thunder.jit(fn, dynamic=dynamic)
    previous = None
    for n in (2, 3, 4):
        x = torch.randn(n, 2)
        result = jitted(x)
        _assert_same(result, fn(x))
        assert result is not previous  # a new object per call, as eager makes
        previous = result


@pytest.mark.slow
def test_a_model_without_a_cache_returns_a_usable_one() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    jitted = thunder.jit(model)
    ids, step = torch.randint(3, 64, (1, 4)), torch.randint(3, 64, (1, 1))
    with torch.no_grad():
        cache, expected = jitted(ids).past_key_values, model(ids).past_key_values
        assert cache.get_seq_length() == expected.get_seq_length() == 4
        torch.testing.assert_close(cache.layers[0].keys, expected.layers[0].keys)
        # generation goes on from thunder's cache as from eager's
        torch.testing.assert_close(
            model(step, past_key_values=cache).logits, model(step, past_key_values=expected).logits
        )


class Counter:
    def __init__(self):
        self.count = 0
        self.seen: list = []


def test_a_returned_object_is_new_on_every_call_even_without_computed_values() -> None:
    """It was the object made while tracing: a caller's change to it showed in the next call's result."""

    def fn(x):
        return x * 2, Counter()

    jitted = thunder.jit(fn)
    first = jitted(torch.ones(2))[1]
    first.count += 1
    first.seen.append("changed by the caller")
    second = jitted(torch.ones(2))[1]
    assert second is not first and (second.count, second.seen) == (0, [])


_MUTABLE = {
    "set": lambda x: (x, {1, 2}),
    "defaultdict of tensors": lambda x: (x, collections.defaultdict(list, {"a": [x * 2]})),
    "deque of tensors": lambda x: (x, collections.deque([1, x + 1], maxlen=3)),
    "bytearray": lambda x: (x, bytearray(b"ab")),
}


@pytest.mark.parametrize("fn", _MUTABLE.values(), ids=_MUTABLE.keys())
def test_a_returned_mutable_container_is_new_on_every_call(fn: Any) -> None:
    """A set, deque, defaultdict or bytearray was a constant of the trace (the same object every call,
    a deque or defaultdict of tensors held proxies); codegen builds them anew."""
    jitted = thunder.jit(fn)
    for n in (2, 3):
        x = torch.randn(n)
        first, second = jitted(x)[1], jitted(x)[1]
        assert first is not second and type(first) is type(fn(x)[1])
        _assert_same(list(first), list(fn(x)[1]))
