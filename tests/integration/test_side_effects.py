"""Side effects on Python objects through thunder.jit, eager PyTorch as the oracle.

Writes to objects the caller can see (attributes, list/dict changes, globals) are replayed after
every call by the epilogue (interpreter/side_effects.py), on the objects of *that* call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder
from thunder.interpreter.side_effects import UnreplayableSideEffectError


class State:
    """A plain Python object the compiled function receives and changes."""

    def __init__(self, **attributes: Any):
        self.__dict__.update(attributes)


def _assert_same(actual: Any, expected: Any) -> None:
    """Structural equality, tensors by value (and same type), objects by their attributes."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            _assert_same(actual[key], expected[key])
    elif isinstance(expected, State):
        _assert_same(vars(actual), vars(expected))
    else:
        assert actual == expected


def _check_against_eager(fn: Callable, make_args: Callable[[int], tuple], calls: int = 3) -> Callable:
    """Each call gets fresh arguments (made twice, equal): outputs and the arguments' states must agree."""
    jitted = thunder.jit(fn)
    for call in range(calls):
        torch.manual_seed(call)
        eager_args = make_args(call)
        torch.manual_seed(call)
        jit_args = make_args(call)
        _assert_same(jitted(*jit_args), fn(*eager_args))
        _assert_same(list(jit_args), list(eager_args))
    return jitted


def test_attribute_assignment_on_an_argument() -> None:
    def fn(x, state):
        state.doubled = x * 2
        state.calls = state.calls + 1
        state.shape = x.shape
        state.dtype = x.dtype  # thunder's dtype while tracing: the caller gets torch's
        state.device = x.device
        state.doubled = state.doubled + 1  # read back: the program's own value, not a guard
        return state.doubled * 3

    jitted = _check_against_eager(fn, lambda call: (torch.randn(3), State(calls=5)))
    assert thunder.cache_misses(jitted) == 1


def test_each_call_writes_the_objects_of_that_call() -> None:
    def fn(x, state):
        state.total = state.total + x
        return x

    jitted = thunder.jit(fn)
    states = [State(total=torch.zeros(2)) for _ in range(3)]
    for i, state in enumerate(states):
        jitted(torch.full((2,), float(i)), state)
    for i, state in enumerate(states):
        torch.testing.assert_close(state.total, torch.full((2,), float(i)))
    assert thunder.cache_misses(jitted) == 1


def test_list_append_collects_outputs() -> None:
    def fn(x, outputs):
        for scale in (1.0, 2.0):
            outputs.append(x * scale)
        outputs.append(len(outputs))  # reads its own change: no length check in the prologue
        return outputs[-2] + 1

    jitted = _check_against_eager(fn, lambda call: (torch.randn(2), [torch.ones(2), "kept"]))
    assert thunder.cache_misses(jitted) == 1


def test_list_operations_replay_their_final_contents() -> None:
    def fn(x, items):
        items.insert(0, x)
        items.extend(v * 2 for v in (1, 2))  # a generator: consumed while tracing
        popped = items.pop(1)
        items[0] = items[0] + popped
        items.reverse()
        del items[0]
        return items[-1]

    _check_against_eager(fn, lambda call: (torch.randn(2), [torch.ones(2) * call, 7, "s"]))


def test_dict_update_setitem_pop_setdefault() -> None:
    def fn(x, options):
        options["seen"] = True
        options.update({"double": x * 2, "count": options["count"] + 1})
        options.setdefault("mode", "fast")
        options.pop("drop")
        return x + options["count"]

    _check_against_eager(fn, lambda call: (torch.randn(2), {"count": call, "drop": 1.0}))


COUNTER = 0
HISTORY: list = []


def test_global_assignment_and_global_list() -> None:
    global COUNTER

    def fn(x):
        global COUNTER
        COUNTER = COUNTER + 1
        HISTORY.append(x.sum())
        return x * COUNTER

    jitted = thunder.jit(fn)
    for call in range(3):
        COUNTER = 10
        HISTORY.clear()
        torch.testing.assert_close(jitted(torch.ones(2) * call), torch.ones(2) * call * 11)
        assert COUNTER == 11
        assert len(HISTORY) == 1
        torch.testing.assert_close(HISTORY[0], torch.tensor(2.0 * call))
    assert thunder.cache_misses(jitted) == 1


def test_nested_objects() -> None:
    def fn(x, state):
        state.inner.cache = x + 1
        state.layers[1].keys = torch.cat([state.layers[1].keys, x[None]])
        state.table["a"].append(x.sum())
        return x

    def make(call: int) -> tuple:
        layers = [State(keys=torch.zeros(call, 2)) for _ in range(2)]
        state = State(inner=State(), layers=layers, table={"a": []})
        return torch.randn(2), state

    _check_against_eager(fn, make)


def test_writes_replay_in_order_on_the_objects_from_before_the_call() -> None:
    def fn(x, state, other):
        old = state.child
        state.child = other  # rebinding first ...
        old.value = x * 2  # ... must not redirect this write to `other`
        state.child.value = x * 3
        state.log.append("first")
        state.log.append("second")
        return x

    def make(call: int) -> tuple:
        return torch.randn(2), State(child=State(value=None), log=[]), State(value=None)

    _check_against_eager(fn, make)


def test_attribute_deleted_and_set_again() -> None:
    def fn(x, state):
        del state.stale
        state.fresh = x
        return x * 2

    _check_against_eager(fn, lambda call: (torch.randn(2), State(stale=1)))


def test_inplace_update_and_assignment_of_an_argument_tensor() -> None:
    def fn(x, state):
        state.kept = x  # the caller's tensor itself
        x.add_(1)
        state.derived = x * 2
        return x

    x = torch.zeros(2)
    state = State()
    thunder.jit(fn)(x, state)
    assert state.kept is x
    torch.testing.assert_close(x, torch.ones(2))
    torch.testing.assert_close(state.derived, torch.full((2,), 2.0))


def test_objects_made_inside_need_no_replay() -> None:
    def fn(x):
        scratch = State(values=[])
        scratch.values.append(x * 2)
        scratch.total = scratch.values[0] + 1
        return scratch.total

    _check_against_eager(fn, lambda call: (torch.randn(2),))


def test_a_built_container_assigned_outside_is_built_anew_each_call() -> None:
    def fn(x, state):
        pair = [x, x * 2]
        state.pair = pair
        pair.append("added after the assignment")
        state.same = pair  # the same new list object as state.pair
        return x

    jitted = thunder.jit(fn)
    first, second = State(), State()
    jitted(torch.ones(2), first)
    jitted(torch.zeros(2), second)
    assert first.pair is first.same and first.pair is not second.pair
    assert first.pair[2] == "added after the assignment"
    torch.testing.assert_close(second.pair[1], torch.zeros(2))


def test_a_named_tuple_built_inside_and_stored_outside() -> None:
    import collections

    Pair = collections.namedtuple("Pair", "first second")

    def fn(x, state):
        state.pair = Pair(x, x.sum())
        return x

    _check_against_eager(fn, lambda call: (torch.randn(2), State()))


def test_an_object_made_inside_written_outside_is_a_clear_error() -> None:
    def fn(x, state):
        state.child = State(value=x)
        return x

    state = State()
    with pytest.raises(
        UnreplayableSideEffectError, match=r"State object.*args\[1\]\.child.*test_side_effects.py:\d+"
    ):
        thunder.jit(fn)(torch.ones(2), state)
    assert not hasattr(state, "child")  # undone: the caller's object holds no proxy


def test_module_attributes_are_replayed() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.steps = 0
            self.linear = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.steps += 1
            self.last = self.linear(x)
            return self.last

    model, reference = Counter(), Counter()
    reference.load_state_dict(model.state_dict())
    jitted = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(2)
        torch.testing.assert_close(jitted(x), reference(x))
        assert model.steps == reference.steps
        torch.testing.assert_close(model.last, reference.last)


class _Box:
    def __init__(self, scale: float) -> None:
        self.scale = scale


@pytest.mark.parametrize("spelling", ["dict", "list", "itself"])
def test_an_input_object_returned_is_the_calls_own(spelling: str) -> None:
    """A returned input object (a model's cache in its output) is the object this call passed, not
    the one the computation was traced with; another object of the same kind needs no new entry."""

    def fn(x, box):
        y = x * box.scale
        return {"y": y, "box": box} if spelling == "dict" else [y, box] if spelling == "list" else box

    jitted = thunder.jit(fn)
    x, first, second = torch.randn(3), _Box(2.0), _Box(2.0)
    for box in (first, second, first):
        output = jitted(x, box)
        returned = output if spelling == "itself" else output["box"] if spelling == "dict" else output[1]
        assert returned is box
    assert thunder.cache_misses(jitted) == 1


def test_an_input_object_returned_in_a_tuple_is_checked_by_identity() -> None:
    jitted = thunder.jit(lambda x, box: (x * box.scale, box))
    x, first, second = torch.randn(3), _Box(2.0), _Box(2.0)
    assert jitted(x, first)[1] is first and jitted(x, second)[1] is second
    assert thunder.cache_misses(jitted) == 2
