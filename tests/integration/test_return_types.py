"""Operators that return ``torch.return_types`` named tuples return them through thunder too.

User code reads ``x.max(1).values``; a compiled function that returns the named tuple gives back
the same type as eager, whether the operator has a thunder symbol or falls back to PyTorch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

CALLS: dict[str, Callable[[torch.Tensor], Any]] = {
    "max": lambda x: x.max(1),
    "min": lambda x: torch.min(x, dim=0, keepdim=True),
    "aminmax": lambda x: torch.aminmax(x, dim=1),
    "sort": lambda x: x.sort(1, descending=True),
    "topk": lambda x: torch.topk(x, 2),
    "kthvalue": lambda x: x.kthvalue(2, 0),
    "median": lambda x: x.median(1),
    "nanmedian": lambda x: torch.nanmedian(x, 0),
    "cummax": lambda x: torch.cummax(x, 1),
    "cummin": lambda x: x.cummin(0),
    "mode": lambda x: torch.mode(x, 1),  # no thunder symbol: the fallback
    "frexp": lambda x: torch.frexp(x),  # no thunder symbol: the fallback
}


@pytest.mark.parametrize("name", list(CALLS))
def test_named_tuple_is_returned(name: str) -> None:
    call = CALLS[name]
    x = torch.randn(4, 5)
    expected, actual = call(x), thunder.jit(call)(x)
    assert type(actual) is type(expected) is getattr(torch.return_types, name)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("name", ["max", "sort", "topk", "kthvalue", "median", "cummax", "mode"])
def test_fields_are_read_in_traced_code(name: str) -> None:
    call = CALLS[name]

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        result = call(x)
        return result.values * 2, result.indices + 1

    x = torch.randn(4, 5, requires_grad=True)
    jitted = thunder.jit(fn)
    actual, expected = jitted(x), fn(x)
    torch.testing.assert_close(actual, expected)
    (grad,) = torch.autograd.grad(actual[0].sum(), x)
    (expected_grad,) = torch.autograd.grad(expected[0].sum(), x)
    torch.testing.assert_close(grad, expected_grad)


def test_named_tuple_prints_in_the_trace() -> None:
    jitted = thunder.jit(lambda x: x.max(0))
    jitted(torch.randn(3, 2))
    assert "torch.return_types.max((" in str(thunder.last_traces(jitted)[-1])


class _Mode(enum.IntEnum):
    TRAIN = 1


def test_python_values_of_subclassed_number_types_come_back_as_they_are() -> None:
    """An IntEnum member came back a plain int (codegen printed ``repr(int(x))``), and a returned
    numpy scalar was printed as ``np.float64(2.5)``, a NameError in the computation."""
    numpy = pytest.importorskip("numpy")

    def fn(x):
        return _Mode.TRAIN, numpy.float64(2.5), numpy.int64(3), x + 1, 2, 2.5

    x = torch.zeros(2)
    result, expected = thunder.jit(fn)(x), fn(x)
    assert [type(v) for v in result] == [type(v) for v in expected]
    assert result[:3] == expected[:3] and result[4:] == expected[4:]
