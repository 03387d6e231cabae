"""Python ints that change between compiles become symbolic (core/symbolic_shapes.py), as sizes do.

transformers' sliding-window cache layers count tokens in a Python int (``cumulative_length``) that
grows every decode step; guarded by value, each step compiled again. Now an int the program reads
(an argument, an attribute of an object reached from one, a global) whose value differed between two
compiles is a ``torch.SymInt`` from the next compile on: every decision on it is a guard, arithmetic
on it stays symbolic, and a value written back is this call's. 0, 1 and negative ints, bools and
enums stay constants checked by value; an int used as a key or an index into a Python container is
specialized (guarded). Each test compares every call with eager PyTorch and counts the compiles.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder
from thunder.core.pipeline import compile_stats


class Counter:
    """A Python object holding an int the program reads, as a cache layer does."""

    def __init__(self, n: Any):
        self.n = n


def _prologue(jitted: Callable) -> str:
    return str(thunder.last_prologue_traces(jitted)[-1])


def _compare(fn: Callable, values: list, make_input: Callable[[], torch.Tensor] = lambda: torch.arange(20.0)):
    """Calls ``fn(x, Counter(v))`` eagerly and jitted for each value; results and written ``n`` equal."""
    jitted = thunder.jit(fn)
    for value in values:
        eager_counter, counter = Counter(value), Counter(value)
        expected, actual = fn(make_input(), eager_counter), jitted(make_input(), counter)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert type(counter.n) is type(eager_counter.n) and counter.n == eager_counter.n, value
    assert compile_stats(jitted).dynamic_fallbacks == []
    return jitted


def slice_compare_size_and_write(x: torch.Tensor, counter: Counter) -> tuple:
    """``counter.n`` as a slice bound, in a comparison, in a size, returned, and written back."""
    y = x[: counter.n] * counter.n
    zeros = torch.zeros(abs(counter.n) + 1)
    counter.n += 1
    if counter.n > 5:
        y = y + 1
    return y, zeros, counter.n


def test_an_int_attribute_that_changes_becomes_symbolic() -> None:
    values = [3, 4, 5, 6, 7, 2, 8, 1, 0, -3, 9, -3]
    jitted = _compare(slice_compare_size_and_write, values)
    # 3 (static), 4 (symbolic, n + 1 <= 5), 5 (symbolic, n + 1 > 5; 6, 7, 8, 9 hit it; 2 hits the
    # entry of 4), then 1, 0 and -3 each by value (the second -3 hits)
    assert thunder.cache_misses(jitted) == 6
    entries = thunder.core.pipeline._jitted(jitted)._cache
    symbolic = [e for e in entries if "s0 = args[1].n" in str(e.prologue_traces[-1])]
    assert len(symbolic) == 2
    for entry in symbolic:
        prologue = str(entry.prologue_traces[-1])
        assert "if type(s0) is not int: raise GuardFailure" in prologue
        assert "if not (s0 >= 2): raise GuardFailure" in prologue
        # the written value is computed by the computation: ``1 + s0``, not the traced constant (the
        # size as torch.zeros's signature spells it, a tuple)
        computation = str(entry.computation_traces[-1])
        assert "torch.zeros(((1 + s0),))" in computation and "(1 + s0)" in computation.splitlines()[-1]
    assert any("if not (1 + s0 > 5): raise GuardFailure" in str(e.prologue_traces[-1]) for e in symbolic)


def test_0_1_and_negative_ints_stay_constants() -> None:
    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        return x * counter.n

    jitted = _compare(fn, [5, 6, 1, 0, -4, -5, 7])
    assert thunder.cache_misses(jitted) == 6  # 5, 6 (symbolic: 7 hits), 1, 0, -4, -5
    assert "!= 1: raise GuardFailure" not in _prologue(jitted)  # the last entry to run: the symbolic one
    assert "s0 = args[1].n" in _prologue(jitted)


def test_an_int_written_back_advances_every_call() -> None:
    """The epilogue writes this call's value: one symbolic entry serves every later value."""

    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        counter.n = counter.n * 2 + x.shape[0]
        return x[: counter.n // 4] + 1

    jitted = thunder.jit(fn)
    eager_counter, counter = Counter(3), Counter(3)
    for _ in range(6):
        torch.testing.assert_close(jitted(torch.ones(40), counter), fn(torch.ones(40), eager_counter))
        assert type(counter.n) is int and counter.n == eager_counter.n
    # 3 (static), 8 (symbolic; its slice bound n // 2 + 10 stays below 40 only until n reaches 15), then
    # the bound is past the end of x: one entry for every later value
    assert thunder.cache_misses(jitted) <= 4


def _read_global_and_argument(x: torch.Tensor, n: int) -> torch.Tensor:
    return x[:n] * 2 + LIMIT


def test_a_global_and_an_argument() -> None:
    global LIMIT
    jitted = thunder.jit(_read_global_and_argument)
    for limit, n in [(3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]:
        LIMIT = limit
        x = torch.arange(20.0)
        torch.testing.assert_close(jitted(x, n), _read_global_and_argument(x, n))
    assert thunder.cache_misses(jitted) == 2  # static, then symbolic in both for every later pair
    prologue = _prologue(jitted)
    assert "s0 = args[1]" in prologue and re.search(r"s\d+ = _constant\d+\['LIMIT'\]", prologue)


LIMIT = 3


class Mode(enum.IntEnum):
    SMALL = 2
    LARGE = 3


def test_bools_and_enums_stay_constants() -> None:
    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        return x * counter.n + 1

    jitted = _compare(fn, [True, False, True, Mode.SMALL, Mode.LARGE, Mode.SMALL])
    assert thunder.cache_misses(jitted) == 4
    assert "s0" not in _prologue(jitted)


def test_another_type_in_place_of_a_symbolic_int_is_a_new_compile() -> None:
    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        return x * counter.n + counter.n

    # 3, 4 (symbolic: 5, 6 and 7 hit it), True, 5.0 and False each compile: the prologue checks the type
    jitted = _compare(fn, [3, 4, 5, True, 5.0, 6, False, 7])
    assert thunder.cache_misses(jitted) == 5


TABLE = {2: "ab", 3: "abc", 4: "abcd", 5: "abcde", 6: "abcdef", 7: "abcdefg"}
ITEMS = [10, 20, 30, 40, 50, 60, 70, 80]


@pytest.mark.parametrize(
    "use",
    [
        pytest.param(lambda x, c: x * len(TABLE[c.n]), id="dict key"),
        pytest.param(lambda x, c: x + len(TABLE.get(c.n, "")), id="dict.get"),
        pytest.param(lambda x, c: x + (c.n in TABLE), id="in dict"),
        pytest.param(lambda x, c: x + {c.n: 1, 100: 2}.get(c.n, 3), id="built dict"),
        pytest.param(lambda x, c: x + len({c.n, 3}), id="set"),
        pytest.param(lambda x, c: x + hash(c.n) % 5, id="hash"),
        pytest.param(lambda x, c: x + ITEMS[c.n], id="list index"),
        pytest.param(lambda x, c: x + sum(range(c.n)), id="range"),
        pytest.param(lambda x, c: x + len(f"{c.n}:{c.n:03d}"), id="text"),
    ],
)
def test_an_int_used_as_a_key_or_index_specializes(use: Callable) -> None:
    """A lookup decides on the value: each value its own entry, guarded, never a symbolic fallback."""

    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        return use(x, counter)

    jitted = _compare(fn, [3, 4, 5, 6, 2, 7, 5])
    assert thunder.cache_misses(jitted) == 6


@pytest.mark.parametrize(
    "use, misses",
    [
        pytest.param(lambda x, c: torch.full((c.n,), c.n) + x[0], 2, id="full"),
        pytest.param(lambda x, c: torch.arange(c.n) * x[0], 2, id="arange"),
        pytest.param(lambda x, c: x[: 2 * c.n].view(c.n, -1), 2, id="view"),
        pytest.param(lambda x, c: x[-c.n :] / c.n, 2, id="negative slice, division"),
        pytest.param(lambda x, c: x[: max(c.n - 3, 0)] + min(c.n, 4), 4, id="min max"),
        pytest.param(lambda x, c: x[: c.n // 2] * (c.n % 3), 3, id="floordiv mod"),
        pytest.param(lambda x, c: x[:1].expand(c.n) + c.n**2, 2, id="expand, power"),
        pytest.param(lambda x, c: x.narrow(0, c.n, 3), 2, id="narrow"),
        # the number of pieces is Python structure: a guard on it (ceil(20 / n) pieces: 5 and 6 share an
        # entry for split and chunk; n pieces for tensor_split), never a static fallback
        pytest.param(lambda x, c: torch.cat(x.split(c.n)[:2]) * len(x.split(c.n)), 5, id="split"),
        pytest.param(lambda x, c: torch.cat(x.chunk(c.n)[:1]) * len(x.chunk(c.n)), 5, id="chunk"),
        pytest.param(lambda x, c: x.tensor_split(c.n)[0] * c.n, 6, id="tensor_split"),
        pytest.param(lambda x, c: x + (c.n == 4), 3, id="comparison as an operand"),  # 3; 4; not 4
        pytest.param(lambda x, c: x.roll(c.n), 2, id="roll"),
        pytest.param(lambda x, c: x * divmod(c.n, 3)[0] + divmod(c.n, 3)[1], 2, id="divmod"),
        pytest.param(lambda x, c: x.reshape(4, 5).sum(c.n % 2), 3, id="reduction dim"),  # 3; even; odd
    ],
)
def test_arithmetic_on_a_symbolic_int_stays_symbolic(use: Callable, misses: int) -> None:
    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        return use(x, counter)

    jitted = _compare(fn, [3, 4, 5, 6, 2, 7, 5])
    assert thunder.cache_misses(jitted) == misses


def test_dynamic_false_keeps_every_int_a_constant() -> None:
    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:n] + n

    jitted = thunder.jit(fn, dynamic=False)
    for n in (3, 4, 5, 4):
        torch.testing.assert_close(jitted(torch.arange(9.0), n), fn(torch.arange(9.0), n))
    assert thunder.cache_misses(jitted) == 3
    assert "s0" not in _prologue(jitted)


def test_a_symbolic_int_is_an_int_to_the_program() -> None:
    """``type(n)``, ``isinstance(n, int)`` and ``n.__class__`` answer as for eager's int (no guard needed:
    every value of the symbol is an int); ``n.__class__`` gave ``torch.SymInt``, and its identity check
    rejected every call."""

    def fn(x: torch.Tensor, counter: Counter) -> torch.Tensor:
        n = counter.n
        is_int = type(n) is int and isinstance(n, int) and not isinstance(n, bool) and n.__class__ is int
        return x[:n] + (1 if is_int else 2)

    jitted = _compare(fn, [3, 4, 5, 6])
    assert thunder.cache_misses(jitted) == 2
