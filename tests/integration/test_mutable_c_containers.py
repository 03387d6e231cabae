"""Mutable containers implemented in C (``collections.deque``, ``bytearray``, ``array.array``) read by
a jitted program: a change between calls is seen (a new compile), as for lists and sets, and a change
the program makes is replayed on every call (a deque) or refused with a clear error; never a stale
answer. They used to be checked by identity only: ``x * len(self.v)`` kept its first length after
``self.v`` grew, and a deque the program appended to grew once per compile, not once per call."""

from __future__ import annotations

import array
import collections
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder


class _Reads(torch.nn.Module):
    def __init__(self, values: Any):
        super().__init__()
        self.values = values

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * len(self.values) + sum(self.values)


class _Changes(torch.nn.Module):
    def __init__(self, values: Any, change: Callable[[Any], None]):
        super().__init__()
        self.values, self.change = values, change

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.change(self.values)
        return x * len(self.values) + sum(self.values)


CONTAINERS = {
    "deque": (lambda: collections.deque([1, 2]), lambda v: v.append(3)),
    "deque-maxlen": (lambda: collections.deque([1, 2], maxlen=2), lambda v: v.append(3)),
    "bytearray": (lambda: bytearray(b"ab"), lambda v: v.extend(b"c")),
    "array": (lambda: array.array("i", [1, 2]), lambda v: v.append(3)),
    "set": (lambda: {1, 2}, lambda v: v.add(3)),
}


@pytest.mark.parametrize("kind", CONTAINERS)
def test_a_container_changed_between_calls_is_seen(kind: str) -> None:
    make, change = CONTAINERS[kind]
    values = make()
    model = _Reads(values)
    jitted = thunder.jit(model)
    x = torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(jitted(x), model(x))
        change(values)
    torch.testing.assert_close(jitted(x), model(x))


def test_an_array_of_another_typecode_is_another_compile() -> None:
    model = _Reads(array.array("i", [1, 2]))
    jitted = thunder.jit(model)
    x = torch.ones(2)
    jitted(x)
    model.values = array.array("d", [1.0, 2.0])  # equal values, float items: sum is a float
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == 2


@pytest.mark.parametrize("maxlen", [None, 3])
def test_a_deque_the_program_appends_to_grows_once_per_call(maxlen: int | None) -> None:
    def make() -> collections.deque:
        return collections.deque([1, 2], maxlen=maxlen)

    ours, theirs = make(), make()
    model, reference = _Changes(ours, lambda v: v.append(3)), _Changes(theirs, lambda v: v.append(3))
    jitted = thunder.jit(model)
    x = torch.ones(2)
    for _ in range(4):
        torch.testing.assert_close(jitted(x), reference(x))
        assert list(ours) == list(theirs) and ours.maxlen == theirs.maxlen


@pytest.mark.parametrize("kind", ["bytearray", "array"])
def test_changing_a_bytearray_or_array_inside_the_program_is_refused(kind: str) -> None:
    make, change = CONTAINERS[kind]
    values = make()
    jitted = thunder.jit(_Changes(values, change))
    before = bytes(values) if kind == "bytearray" else values.tolist()
    with pytest.raises(
        Exception, match=r"cannot replay \.(extend|append)\(\) on the (bytearray|array\.array)"
    ):
        jitted(torch.ones(2))
    assert (bytes(values) if kind == "bytearray" else values.tolist()) == before  # left as it was
