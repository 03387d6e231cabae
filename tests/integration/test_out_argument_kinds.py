"""The kinds of arguments an ``out=`` call takes are eager's.

Some functions' ``out=`` overloads take fewer kinds of arguments than their others:
``torch.where(c, x, 0.0)`` takes the number, ``torch.where(c, x, 0.0, out=y)`` raises a TypeError
('other' must be a Tensor). thunder computes an ``out=`` call as the call without ``out`` and then
writes the result, so it answered those; now eager's argument parser sees the call first, on meta
tensors standing for the tensors (``_check_eager_parses`` in thunder/torch/inplace.py). Each case runs
one jitted function twice, with new inputs, against eager: the same values, or the same error type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

# name: f(x, c, y) with x of shape (4,), c a bool mask of x's shape, y the out tensor
CASES: dict[str, Callable[..., Any]] = {
    "where_number_other": lambda x, c, y: torch.where(c, x, 0.0, out=y),
    "where_number_input": lambda x, c, y: torch.where(c, 1.0, x, out=y),
    "where_tensors": lambda x, c, y: torch.where(c, x, x * 2, out=y),
    "where_number_other_no_out": lambda x, c, y: torch.where(c, x, 0.0),
    "add_number": lambda x, c, y: torch.add(x, 2, out=y),
    "sub_number_first": lambda x, c, y: torch.sub(2, x, out=y),
    "mul_number": lambda x, c, y: torch.mul(x, 2.0, out=y),
    "pow_number_base": lambda x, c, y: torch.pow(2, x, out=y),
    "clamp_numbers": lambda x, c, y: torch.clamp(x, 0.2, 0.7, out=y),
    "lerp_number_weight": lambda x, c, y: torch.lerp(x, x * 3, 0.5, out=y),
    "fmod_number": lambda x, c, y: torch.fmod(x, 0.3, out=y),
    "maximum_number": lambda x, c, y: torch.maximum(x, 2, out=y),
    "atan2_number": lambda x, c, y: torch.atan2(x, 2.0, out=y),
    "eq_number_bool_out": lambda x, c, y: torch.eq(x, 0.5, out=c),
    "add_empty_out_resized": lambda x, c, y: torch.add(x, 1, out=torch.empty(0)),
}


def _outcome(fn: Callable[..., Any], *args: torch.Tensor) -> tuple[str, Any]:
    try:
        result = fn(*args)
    except Exception as error:  # noqa: BLE001 -- the error's type is what is compared
        return type(error).__name__, None
    return "ok", [t.clone() for t in args] + [result.clone()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_argument_kinds_as_eager(name: str) -> None:
    fn = CASES[name]
    jitted = thunder.jit(fn)
    for seed in range(2):
        torch.manual_seed(seed)
        x = torch.rand(4)
        made = lambda: (x.clone(), x.clone() > 0.5, torch.zeros(4))  # noqa: E731
        expected, actual = _outcome(fn, *made()), _outcome(jitted, *made())
        assert actual[0] == expected[0], f"eager: {expected[0]}, thunder: {actual[0]}"
        if expected[0] == "ok":
            for a, e in zip(actual[1], expected[1]):
                torch.testing.assert_close(a, e, equal_nan=True)


RANDOM: dict[str, Callable[[torch.Tensor], Any]] = {
    "randn": lambda y: torch.randn(3, out=y),
    "rand": lambda y: torch.rand(3, out=y) + torch.rand(2).sum(),
    "normal": lambda y: torch.normal(0.0, 1.0, (3,), out=y),
    "randint": lambda y: torch.randint(0, 10, (3,), out=y.long()).float(),
    "normal_of_a_tensor_mean": lambda y: torch.normal(y + 1, 1.0, out=torch.empty(3)),
    "bernoulli": lambda y: torch.bernoulli(y + 0.5, out=torch.empty(3)) + torch.rand(3),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_out_calls_draw_as_eager_from_the_first_call(name: str) -> None:
    """The parser check runs the function on stand-ins: a random one must not draw from the default
    generator there (a factory's sizes would; it drew 3 numbers before the check skipped factories and
    put the generator's state back), so the compiling call's values are eager's for the same seed."""
    fn = RANDOM[name]
    jitted = thunder.jit(fn)
    for seed in range(2):
        torch.manual_seed(seed)
        expected = fn(torch.zeros(3))
        torch.manual_seed(seed)
        actual = jitted(torch.zeros(3))
        torch.testing.assert_close(actual, expected)
