"""Tensor methods in every spelling eager accepts (``x.flip(0, 1)``, ``x.tile(2)``, ``dims=``), through
``thunder.jit``: the torch executor calls a torch callable the symbol stands for with the arguments the
trace recorded, which are the function's spelling (the frontend gathers a method's ints into a tuple;
test_size_argument_forms.py has every form)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "flip_int": lambda x: x.flip(-1),
    "flip_varargs": lambda x: x.flip(0, 1),
    "flip_function": lambda x: torch.flip(x, (0,)),
    "flip_keyword": lambda x: torch.flip(x, dims=[1]),
    "tile_int": lambda x: x.tile(2),
    "tile_varargs": lambda x: x.tile(1, 2, 1),
    "tile_function": lambda x: torch.tile(x, (2, 1)),
    "tile_keyword": lambda x: torch.tile(x, dims=(2,)),
    "permute": lambda x: x.permute(1, 0),
    "reshape": lambda x: x.reshape(3, 2),
    "view": lambda x: x.view(3, 2),
    "expand": lambda x: x.expand(2, 2, 3),
    "repeat": lambda x: x.repeat(2, 1),
    "roll": lambda x: x.roll(1, 0),
    "new_zeros": lambda x: x.new_zeros(2, 2),
    "sum_to_size": lambda x: x.sum_to_size(1, 3),
    "split": lambda x: x.split(1),
    "rot90": lambda x: x.rot90(1, (0, 1)),
    "diagonal": lambda x: x.diagonal(0, 0, 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_method_spelling(name: str) -> None:
    x = torch.randn(2, 3)
    torch.testing.assert_close(thunder.jit(CASES[name])(x), CASES[name](x))
