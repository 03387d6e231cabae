"""Calls eager refuses for their tensors' dtypes (thunder/torch/eager_dtypes.py).

Eager raises where such a call is, also when its result is never read; thunder's dead-code
elimination used to drop the call and answer. Every case compares thunder with eager: the same
exception type and message (thunder adds the line of the user's code), or the same values (the dtypes
eager takes must keep working).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder


def _unused(op: Callable) -> Callable:
    def f(x: torch.Tensor) -> torch.Tensor:
        op(x)  # eager raises here even though the result is dropped
        return x + 1

    return f


def _returned(op: Callable) -> Callable:
    return lambda x: op(x)


REFUSED = [
    ("gelu of long", F.gelu, torch.int64),
    ("tanh gelu of long", lambda a: F.gelu(a, approximate="tanh"), torch.int64),
    ("silu of bool", F.silu, torch.bool),
    ("logsigmoid of long", F.logsigmoid, torch.int64),  # thunder's decomposition answered even when returned
    ("leaky_relu of long", F.leaky_relu, torch.int64),
    ("hardswish of long", F.hardswish, torch.int64),
    ("softplus of bool", F.softplus, torch.bool),
    ("relu of bool", F.relu, torch.bool),
    ("neg of bool", torch.neg, torch.bool),
    ("floor of bool", torch.floor, torch.bool),
    ("normalize of long", F.normalize, torch.int64),
]


@pytest.mark.parametrize("how", [_unused, _returned], ids=["unused", "returned"])
@pytest.mark.parametrize("name, op, dtype", REFUSED, ids=[case[0] for case in REFUSED])
def test_thunder_refuses_what_eager_refuses(
    name: str, op: Callable, dtype: torch.dtype, how: Callable
) -> None:
    x = torch.tensor([[1, 0], [2, 3]]).to(dtype)
    with pytest.raises(Exception) as eager:
        how(op)(x)
    with pytest.raises(type(eager.value)) as traced:
        thunder.jit(how(op))(x)
    assert str(traced.value).startswith(str(eager.value))  # thunder adds where in the user's code


ACCEPTED = [
    ("relu of long", F.relu, torch.int64),
    ("abs of long", torch.abs, torch.int64),
    ("floor of long", torch.floor, torch.int64),
    ("cumsum of bool", lambda a: torch.cumsum(a, 0), torch.bool),
    ("sum of bool", torch.sum, torch.bool),
    ("logical_not of long", torch.logical_not, torch.int64),
    ("where of a bool mask", lambda a: torch.where(a > 1, a, 0), torch.int64),
    ("masked_fill of long", lambda a: a.masked_fill(a > 1, 7), torch.int64),
    ("true division of long", lambda a: a / 2, torch.int64),
    ("embedding with long indices", lambda a: F.embedding(a, torch.arange(8.0).reshape(4, 2)), torch.int64),
]


@pytest.mark.parametrize("name, op, dtype", ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_what_eager_takes_still_runs(name: str, op: Callable, dtype: torch.dtype) -> None:
    jitted = thunder.jit(op)
    for values in ([[1, 0], [2, 3]], [[3, 1], [0, 2]]):
        x = torch.tensor(values).to(dtype)
        torch.testing.assert_close(jitted(x), op(x))
