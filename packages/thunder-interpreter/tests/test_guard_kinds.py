"""Each row of the guard table (thunder/interpreter/guards.py): one jitted function, called with a
sequence of values of that kind, must answer as eager PyTorch on every call, and an unchanged value
must hit the cache."""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.interpreter.guards import UnguardableValueError


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


Pair = collections.namedtuple("Pair", "scale shift")


@dataclasses.dataclass
class Config:
    scale: float
    mode: str


class Plain:
    def __init__(self, **attributes: Any):
        self.__dict__.update(attributes)


SENTINEL = object()
OTHER_SENTINEL = object()


def _eager_or_error(fn: Callable, args: tuple) -> Any:
    try:
        return fn(*args)
    except Exception as error:  # noqa: BLE001 - compared by type below
        return error


def _assert_same(actual: Any, expected: Any) -> None:
    if isinstance(expected, Exception):
        assert isinstance(actual, type(expected)), f"eager raised {expected!r}, thunder gave {actual!r}"
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)
    elif isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected)
    else:
        assert actual == expected


def check_calls(fn: Callable, x: torch.Tensor, values: list, cache: str = "constant values") -> Any:
    """Call one jitted function with each value in turn (then the first again), as eager does."""
    jitted = thunder.jit(fn, cache=cache)
    for value in [*values, values[0]]:
        expected = _eager_or_error(fn, (x, value))
        actual = _eager_or_error(jitted, (x, value))
        _assert_same(actual, expected)
    return jitted


X = torch.arange(24.0).reshape(4, 6)

# (kind, program, values in call order)
CASES: list[tuple[str, Callable, list]] = [
    ("int", lambda x, v: x * v, [2, 3]),
    ("bool vs int vs float", lambda x, v: x * 2 if type(v) is int else x - 1, [1, True, 1.0]),
    ("float nan", lambda x, v: x + 1 if v != v else x, [float("nan"), 0.5]),
    ("complex", lambda x, v: x * v.real, [1 + 2j, 3 + 0j]),
    ("str", lambda x, v: x.sum() if v == "sum" else x.mean(), ["sum", "mean"]),
    ("bytes", lambda x, v: x * len(v), [b"ab", b"abc"]),
    ("None", lambda x, v: x if v is None else x * v, [None, 2]),
    ("torch.Size reshape", lambda x, v: x.reshape(v), [torch.Size([6, 4]), torch.Size([3, 8])]),
    ("torch.Size vs list", lambda x, v: x * 2 if x.shape == v else x, [[4, 6], torch.Size([4, 6])]),
    ("slice", lambda x, v: x[v], [slice(0, 2), slice(1, 4), slice(None, None, 2)]),
    ("slice then tuple", lambda x, v: x[v], [slice(0, 2), (slice(0, 2), 1), (Ellipsis, 1), (None, 0)]),
    ("range", lambda x, v: sum(x * i for i in v), [range(3), range(1, 4), range(0, 6, 2), range(0)]),
    ("enum", lambda x, v: x + 1 if v is Color.RED else x - 1, [Color.RED, Color.BLUE]),
    ("int enum", lambda x, v: x * int(v), [Level.LOW, Level.HIGH, 2]),
    ("sentinel", lambda x, v: x if v is SENTINEL else -x, [SENTINEL, OTHER_SENTINEL]),
    ("dtype", lambda x, v: x.to(v), [torch.float64, torch.int32]),
    ("device", lambda x, v: x.to(v) * 2, [torch.device("cpu"), "cpu"]),
    (
        "memory format",
        lambda x, v: x * 2 if v == torch.channels_last else x,
        [torch.contiguous_format, torch.channels_last],
    ),
    ("layout", lambda x, v: x * 2 if v == torch.strided else x, [torch.strided, torch.sparse_coo]),
    ("tuple length", lambda x, v: sum(x * i for i in v), [(1, 2), (1, 2, 3), [1, 2]]),
    ("nested list", lambda x, v: x * v[0][1], [[[1, 2]], [[1, 3]], [(1, 3)]]),
    ("dict values", lambda x, v: x * v["a"], [{"a": 1}, {"a": 2}, {"a": 2, "b": 3}]),
    ("dict order", lambda x, v: [x * k for k in v.values()], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]),
    ("empty dict vs 0", lambda x, v: x + 1 if isinstance(v, int) else x, [{}, 0]),
    ("dict vs list", lambda x, v: [x * i for i in v], [{0: 5, 1: 6}, [0, 1]]),
    (
        "enum keys",
        lambda x, v: x * v[Color.RED],
        [{Color.RED: 1, Color.BLUE: 2}, {Color.BLUE: 1, Color.RED: 3}],
    ),
    ("named tuple", lambda x, v: x * v.scale + v[1], [Pair(1, 2), Pair(3, 2), (3, 2)]),
    (
        "dataclass",
        lambda x, v: x * v.scale if v.mode == "mul" else x + v.scale,
        [Config(2.0, "mul"), Config(3.0, "mul"), Config(3.0, "add")],
    ),
    (
        "partial",
        lambda x, v: v(x),
        [
            functools.partial(torch.pow, exponent=2),
            functools.partial(torch.pow, exponent=3),
            functools.partial(torch.clamp, min=2),
        ],
    ),
    ("object attributes", lambda x, v: x * v.k, [Plain(k=2), Plain(k=3), Plain(k=3.5)]),
    ("missing attribute", lambda x, v: x * getattr(v, "k", 10), [Plain(k=2), Plain(), Plain(k=2)]),
    ("hasattr", lambda x, v: x * 2 if hasattr(v, "k") else x, [Plain(k=2), Plain()]),
    ("set", lambda x, v: x * 2 if Color.RED in v else x, [{Color.RED}, {Color.BLUE}, frozenset({Color.RED})]),
    ("functions", lambda x, v: v(x), [torch.sin, torch.cos, F.relu]),
]


@pytest.mark.parametrize("kind, fn, values", CASES, ids=[case[0] for case in CASES])
def test_each_kind_is_guarded(kind: str, fn: Callable, values: list) -> None:
    check_calls(fn, X, values)


@pytest.mark.parametrize("kind, fn, values", CASES, ids=[case[0] for case in CASES])
def test_each_kind_is_guarded_with_symbolic_values(kind: str, fn: Callable, values: list) -> None:
    check_calls(fn, X, values, cache="symbolic values")


def test_an_unchanged_value_of_each_kind_hits_the_cache() -> None:
    for kind, fn, values in CASES:
        jitted = thunder.jit(fn)
        for _ in range(3):
            _eager_or_error(jitted, (X, values[0]))
        assert thunder.cache_misses(jitted) == 1, kind


def test_identity_test_on_an_object_checks_its_identity() -> None:
    first, second = Plain(k=1), Plain(k=1)
    fn = lambda x, a, b: x * 2 if a is b else x  # noqa: E731
    jitted = thunder.jit(fn)
    torch.testing.assert_close(jitted(X, first, first), fn(X, first, first))
    torch.testing.assert_close(jitted(X, first, second), fn(X, first, second))


def test_globals_of_each_kind_are_read_again() -> None:
    global GLOBAL_SHAPE
    GLOBAL_SHAPE = torch.Size([6, 4])
    jitted = thunder.jit(lambda x: x.reshape(GLOBAL_SHAPE))
    assert jitted(X).shape == (6, 4)
    GLOBAL_SHAPE = torch.Size([2, 12])
    assert jitted(X).shape == (2, 12)


def test_closure_cells_and_module_attributes_of_each_kind() -> None:
    index = slice(0, 2)
    jitted = thunder.jit(lambda x: x[index])
    assert jitted(X).shape == (2, 6)
    index = slice(1, 4)
    assert jitted(X).shape == (3, 6)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mode = Color.RED

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1 if self.mode is Color.RED else x - 1

    model = Model()
    jmodel = thunder.jit(model)
    torch.testing.assert_close(jmodel(X), X + 1)
    model.mode = Color.BLUE
    torch.testing.assert_close(jmodel(X), X - 1)


def test_iterators_are_refused_with_a_clear_error() -> None:
    with pytest.raises(UnguardableValueError, match=r"args\[1\] is a builtins.list_iterator"):
        thunder.jit(lambda x, it: x * next(it))(X, iter([1, 2]))


def test_the_prologue_prints_checks_as_readable_python() -> None:
    jitted = thunder.jit(lambda x, s, i, e: x.reshape(s)[i] if e is Color.RED else x)
    jitted(X, torch.Size([6, 4]), slice(0, 2), Color.RED)
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert "# torch.Size([6, 4])" in prologue
    assert "# slice(0, 2, None)" in prologue
    assert "# <Color.RED: 1>" in prologue
    jitted = thunder.jit(lambda x, v: x * v[0])
    jitted(X, [2])
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert "if type(args[1]) is not list or len(args[1]) != 1: raise GuardFailure" in prologue


def test_one_object_reached_through_two_paths_is_checked_on_both() -> None:
    x = torch.arange(24.0)
    shape = [6, 4]
    reshape = thunder.jit(lambda x, first, second: x.reshape(second))
    assert reshape(x, shape, shape).shape == (6, 4)
    assert reshape(x, shape, 24).shape == (24,)  # the second path no longer holds the first's list
    add = thunder.jit(lambda a, b: a + b)
    ones, zeros = torch.ones(2), torch.zeros(2)
    torch.testing.assert_close(add(ones, ones), ones * 2)
    torch.testing.assert_close(add(ones, zeros), ones)  # one tensor traced for both, two given now
    aliased = thunder.jit(lambda a, b: a + b)
    aliased(ones, ones)
    assert "if args[1] is not args[0]: raise GuardFailure" in str(thunder.last_prologue_traces(aliased)[-1])


def test_an_object_bound_in_a_partial_is_checked_by_the_attributes_read() -> None:
    def pick(value: Any) -> Any:
        return value

    scale = thunder.jit(lambda x, p: x * p().k)
    torch.testing.assert_close(scale(X, functools.partial(pick, Plain(k=0.5))), X * 0.5)
    torch.testing.assert_close(scale(X, functools.partial(pick, Plain(k=3))), X * 3)
