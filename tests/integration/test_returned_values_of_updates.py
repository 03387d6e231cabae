"""A returned tensor whose value was also written into an input is a tensor of its own, as in eager.

``y = x + 1; x.copy_(y); return y``: eager's ``y`` does not change when the caller later writes ``x``.
Thunder returned the input itself for it (functionalization: ``y``'s proxy is ``x``'s new value), and
reinplacing could make ``y`` the input's memory; common-subexpression elimination makes the case
common (``a = x + 1; x.add_(1); return a``: ``a`` and ``x``'s new value are one computation).
"""

from __future__ import annotations

import pytest
import torch

import thunder


def copy_back_and_return(x):
    y = x + 1
    x.copy_(y)
    return y


def update_and_return_the_input(x):
    x.add_(1)
    return x


def same_value_before_the_update(x):
    a = x + 1
    x.add_(1)
    return a, x * 2


def view_of_the_written_value(x):
    y = x + 1
    x.copy_(y)
    return y[0], y.view(-1)


def written_with_index_copy(x, index, source):
    y = x.index_copy(0, index, source)
    x.copy_(y)
    return y


@pytest.mark.parametrize(
    "fn",
    [
        copy_back_and_return,
        update_and_return_the_input,
        same_value_before_the_update,
        view_of_the_written_value,
    ],
)
def test_outputs_alias_what_eagers_alias(fn) -> None:
    jitted = thunder.jit(fn)
    for start in (0.0, 2.0, -1.0):
        x, expected_x = torch.full((3,), start), torch.full((3,), start)
        actual, expected = jitted(x), fn(expected_x)
        actual = actual if isinstance(actual, tuple) else (actual,)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert [a is x for a in actual] == [e is expected_x for e in expected]
        x.add_(5)  # the caller writes its input: only outputs that are the input see it
        expected_x.add_(5)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)
        torch.testing.assert_close(x, expected_x)


def test_indexed_update_returned_stays_its_own_tensor() -> None:
    jitted = thunder.jit(written_with_index_copy)
    for position in (0, 2):
        x, expected_x = torch.zeros(4, 2), torch.zeros(4, 2)
        index, source = torch.tensor([position]), torch.ones(1, 2)
        y, expected_y = jitted(x, index, source), written_with_index_copy(expected_x, index, source)
        assert y.data_ptr() != x.data_ptr()
        x.zero_()
        expected_x.zero_()
        torch.testing.assert_close(y, expected_y)
