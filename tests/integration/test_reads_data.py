"""Constructs that turn a tensor's data into Python values (``x.item()``, ``x.tolist()``) inside a
jitted function (issue 21): a trace holds no data, so each raises an error naming the construct,
saying why and what to do instead, and pointing at the user's line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

CASES: dict[str, tuple[str, Callable[[torch.Tensor], Any]]] = {
    "tolist": ("Tensor.tolist()", lambda x: (x * 2).tolist()),
    "item": ("Tensor.item()", lambda x: x.sum().item()),
    "numpy": ("Tensor.numpy()", lambda x: x.numpy()),
    "unbound_tolist": ("Tensor.tolist()", lambda x: torch.Tensor.tolist(x)),
    "unbound_item": ("Tensor.item()", lambda x: torch.Tensor.item(x[0])),
}


@pytest.mark.parametrize("case", CASES)
def test_reading_data_raises_a_clear_error(case: str) -> None:
    construct, fn = CASES[case]
    with pytest.raises(NotImplementedError) as raised:
        thunder.jit(fn)(torch.ones(3))
    message = str(raised.value)
    assert message.startswith(f"{construct} depends on the tensor's data, which thunder.jit does not see")
    assert "return the tensor from the jitted function" in message
    assert "torch.compile(fn, backend=ThunderCompiler())" in message
    assert "FakeTensor" not in message
    assert f"test_reads_data.py:{fn.__code__.co_firstlineno}:" in message  # the user's line


def test_returning_the_tensor_and_reading_it_outside_works() -> None:
    jitted = thunder.jit(lambda x: x * 2)
    assert jitted(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
