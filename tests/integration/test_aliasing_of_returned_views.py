"""A returned view of an input the program updated in place is a view of the caller's tensor, as in eager.

``x.add_(1); return x[0]``: eager returns a view of ``x``, so a later write by the caller into ``x``
shows in the result (and the other way round). Thunder returned the view of the new value computed
out of place, a tensor of its own. ``inplace_finish.finish`` now takes the view again of the input after its
update (``inplace.returned_view``); a view it cannot take raises.
"""

from __future__ import annotations

import pytest
import torch

import thunder


def _leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _same_aliasing(actual, expected, x, expected_x) -> None:
    for a, e in zip(_leaves(actual), _leaves(expected)):
        assert (a is x) == (e is expected_x)
        assert a.shape == e.shape and a.stride() == e.stride()
        shares = e.untyped_storage().data_ptr() == expected_x.untyped_storage().data_ptr()
        assert (a.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == shares
        if shares:
            assert a.data_ptr() - x.data_ptr() == e.data_ptr() - expected_x.data_ptr()


def update_then_index(x):
    x.add_(1)
    return x[0]


def update_then_view(x):
    x.mul_(2)
    return x.view(-1)


def update_then_t(x):
    x.add_(1)
    return x.t()


def update_then_slice(x):
    x.sub_(1)
    return x[1:]


def update_then_unsqueeze(x):
    x.add_(1)
    return x.unsqueeze(0)


def update_then_column(x):
    x.add_(1)
    return x[:, 1]


def update_then_expand(x):
    x.add_(1)
    return x[0:1].expand(4, 3)


def view_taken_before_the_update(x):
    y = x[1]
    x.add_(1)
    return y


def update_through_a_view(x):
    y = x[0]
    y.add_(1)
    return y


def update_one_view_return_another(x):
    x[0].add_(1)
    return x[1]


def update_then_several(x):
    x.add_(1)
    return x[0], x.t(), x, x * 2


def update_then_chain(x):
    x.add_(1)
    return x.view(-1)[2:].view(2, 2)


CASES = [
    update_then_index, update_then_view, update_then_t, update_then_slice, update_then_unsqueeze,
    update_then_column, update_then_expand, view_taken_before_the_update, update_through_a_view,
    update_one_view_return_another, update_then_several, update_then_chain,
]  # fmt: skip


@pytest.mark.parametrize("fn", CASES)
def test_returned_views_alias_the_input_as_in_eager(fn) -> None:
    jitted = thunder.jit(fn)
    for start in (0.0, 2.0, -1.0):
        x = torch.arange(6.0).reshape(2, 3) + start
        expected_x = x.clone()
        actual, expected = jitted(x), fn(expected_x)
        _same_aliasing(actual, expected, x, expected_x)
        for a, e in zip(_leaves(actual), _leaves(expected)):
            torch.testing.assert_close(a, e)
        x.mul_(3)  # the caller writes its input: every view of it sees the write
        expected_x.mul_(3)
        for a, e in zip(_leaves(actual), _leaves(expected)):
            torch.testing.assert_close(a, e)


def test_returned_view_of_a_buffer_updated_in_place() -> None:
    class Running(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x):
            self.total.add_(x.sum(0))
            return x * 2, self.total[:2]

    eager, module = Running(), Running()
    jitted = thunder.jit(module)
    for _ in range(3):
        x = torch.randn(3, 4)
        (_, actual), (_, expected) = jitted(x), eager(x)
        assert actual.untyped_storage().data_ptr() == module.total.untyped_storage().data_ptr()
        torch.testing.assert_close(actual, expected)
        module.total.add_(1)
        eager.total.add_(1)
        torch.testing.assert_close(actual, expected)


def test_running_stats_of_batch_norm_returned() -> None:
    def step(bn, x):
        return bn(x), bn.running_mean.view(1, -1)

    bn, eager_bn = torch.nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)
    jitted = thunder.jit(step)
    for _ in range(3):
        x = torch.randn(8, 4)
        (out, mean), (expected_out, expected_mean) = jitted(bn, x), step(eager_bn, x)
        torch.testing.assert_close(out, expected_out)
        assert mean.untyped_storage().data_ptr() == bn.running_mean.untyped_storage().data_ptr()
        torch.testing.assert_close(mean, expected_mean)
    torch.testing.assert_close(bn.running_var, eager_bn.running_var)


def test_the_trace_takes_the_view_of_the_input() -> None:
    jitted = thunder.jit(update_then_index)
    jitted(torch.zeros(2, 3))
    source = str(thunder.last_traces(jitted)[-1])
    assert "inplace.returned_view(x" in source


def test_running_stats_returned_while_the_input_requires_grad() -> None:
    def step(bn, x):
        return bn(x), bn.running_mean[:2]

    bn, eager_bn = torch.nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)
    jitted = thunder.jit(step)
    for _ in range(2):
        x = torch.randn(8, 4, requires_grad=True)
        (out, mean), (expected_out, expected_mean) = jitted(bn, x), step(eager_bn, x)
        torch.testing.assert_close(out, expected_out)
        assert mean.untyped_storage().data_ptr() == bn.running_mean.untyped_storage().data_ptr()
        assert mean.requires_grad == expected_mean.requires_grad
        torch.testing.assert_close(mean, expected_mean)
        out.sum().backward()


def test_writes_through_view_as_reach_the_input() -> None:
    def fn(x, z):
        y = x.view_as(z)
        y.add_(1)
        return x, y.reshape_as(x)

    jitted = thunder.jit(fn)
    for start in (0.0, 2.0):
        x, expected_x, z = torch.full((2, 3), start), torch.full((2, 3), start), torch.zeros(6)
        for actual, expected in zip(jitted(x, z), fn(expected_x, z)):
            torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x, expected_x)
