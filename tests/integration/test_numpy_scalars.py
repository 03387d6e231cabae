"""NumPy scalars where torch takes a number (``x.reshape(np.int64(4), -1)``) behave as in eager.

The torch language read them as unknown objects ("'numpy.int64' object has no attribute 'step'"); the
frontend now hands a symbol the Python number, as eager reads it. A NumPy array (its data would be a
constant of the program) raises an error naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import thunder

PROGRAMS = {
    "reshape": lambda x: x.reshape(np.int64(4), -1),
    "view": lambda x: x.view(np.int32(2), 4),
    "zeros": lambda x: torch.zeros(np.int64(3)) + x.sum(),
    "index": lambda x: x[np.int64(1)],
    "two indices": lambda x: x[np.int64(1), np.int64(0)],
    "slice": lambda x: x[: np.int64(2)],
    "sum dim": lambda x: x.sum(np.int64(0)),
    "transpose": lambda x: x.transpose(np.int64(0), 1),
    "repeat": lambda x: x.repeat(np.int64(2), 1),
    "mul int64": lambda x: x * np.int64(3),
    "int tensor by float32": lambda x: x.int() * np.float32(2.5),
    "half by float64": lambda x: x.half() * np.float64(2.5),
    "compare": lambda x: x > np.float32(1.5),
    "full": lambda x: torch.full((2,), np.int64(3)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_numpy_scalars_as_in_eager(name: str) -> None:
    fn = PROGRAMS[name]
    jitted = thunder.jit(fn)
    for start in (0.0, 1.0):
        x = torch.arange(8.0).reshape(4, 2) + start
        actual, expected = jitted(x), fn(x)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def test_numpy_scalar_argument_is_guarded() -> None:
    jitted = thunder.jit(lambda x, n: x.reshape(n, -1))
    assert jitted(torch.ones(8), np.int64(4)).shape == (4, 2)
    assert jitted(torch.ones(8), np.int64(2)).shape == (2, 4)


def test_numpy_array_argument_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="NumPy ndarray as an argument of getitem"):
        thunder.jit(lambda x: x[np.array([1, 2])])(torch.ones(4))
