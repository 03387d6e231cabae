"""A write through a tensor that eager returns as its input itself, or as a view of it, reaches the input.

Thunder treated these results as new tensors, and the write did not reach the input (silently wrong):

- ops that return their input when they have nothing to do: the dropouts with ``training=False`` or
  ``p=0`` (``nn.Dropout`` in eval mode), ``positive``, ``conj`` of a real tensor, ``resolve_conj``,
  ``resolve_neg``, ``x.type(x.dtype)``, ``sum_to_size`` to the same size;
- views thunder did not know as views: ``broadcast_to``, ``reshape_as``, ``atleast_1d/2d/3d``, and the
  views of several tensors at once ``broadcast_tensors`` and ``meshgrid``, whose broadcast outputs eager
  refuses to write into (thunder returned a result, or failed inside: "fusion regions form a cycle").
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


def _input(step: int) -> torch.Tensor:
    return torch.arange(6.0).reshape(2, 3) - 3 + step


ALIASES = {
    "dropout, training=False": lambda x: F.dropout(x, 0.5, training=False),
    "dropout, p=0": lambda x: F.dropout(x, 0.0),
    "nn.Dropout in eval mode": lambda x: torch.nn.Dropout(0.3).eval()(x),
    "alpha_dropout, training=False": lambda x: F.alpha_dropout(x, 0.5, training=False),
    "dropout1d, training=False": lambda x: F.dropout1d(x, 0.5, training=False),
    "positive": torch.positive,
    "conj of a real tensor": torch.conj,
    "resolve_conj": lambda x: x.resolve_conj(),
    "resolve_neg": lambda x: x.resolve_neg(),
    "type to its own dtype": lambda x: x.type(torch.float32),
    "sum_to_size to its size": lambda x: x.sum_to_size(x.shape),
    "broadcast_to its shape": lambda x: torch.broadcast_to(x, x.shape),
    "broadcast_to a larger shape": lambda x: torch.broadcast_to(x, (2, 2, 3)),
    "reshape_as": lambda x: x.reshape_as(torch.empty(3, 2)),
    "reshape_as of a transpose (a copy)": lambda x: x.t().reshape_as(torch.empty(6)),
    "atleast_1d": torch.atleast_1d,
    "atleast_3d": torch.atleast_3d,
    "atleast_2d of two": lambda x: torch.atleast_2d(x[0], x)[0],
    "broadcast_tensors, the broadcast one": lambda x: torch.broadcast_tensors(x, x[:1])[1],
    "broadcast_tensors, the full one": lambda x: torch.broadcast_tensors(x, x[:1])[0],
    "meshgrid": lambda x: torch.meshgrid(x[0], x[1], indexing="ij")[0],
}


@pytest.mark.parametrize("name", list(ALIASES))
def test_a_write_through_eagers_alias_reaches_the_input(name: str) -> None:
    alias = ALIASES[name]

    def fn(x):
        y = alias(x)
        y.add_(1)
        return y * 2

    jitted = thunder.jit(fn)
    for step in range(2):
        x, expected_x = _input(step), _input(step)
        try:
            expected = fn(expected_x)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                jitted(x)
            assert "more than one element" in str(error)
            continue
        torch.testing.assert_close(jitted(x), expected)
        torch.testing.assert_close(x, expected_x)


def test_a_later_write_to_the_input_shows_through_a_broadcast_view() -> None:
    def fn(x):
        y = torch.broadcast_tensors(x, x[:1])[1]
        x.mul_(2)
        return y

    x, expected_x = _input(0), _input(0)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(expected_x))
    torch.testing.assert_close(x, expected_x)
