"""In-place ops through thunder.jit: functionalized in the trace, written back to real tensors."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder


def _check_against_eager(fn, *args, calls: int = 2):
    """Run fn eagerly and compiled on copies of args; outputs and the mutated args must agree."""
    jitted = thunder.jit(fn)
    for _ in range(calls):
        eager_args = [a.clone() for a in args]
        jit_args = [a.clone() for a in args]
        torch.testing.assert_close(jitted(*jit_args), fn(*eager_args))
        for jit_arg, eager_arg in zip(jit_args, eager_args):
            torch.testing.assert_close(jit_arg, eager_arg)
    return jitted


def test_inplace_methods_and_operators_update_later_uses_and_the_input() -> None:
    def fn(x, y):
        x.add_(y)
        z = x * 2
        x += 1
        x.mul_(y).sub_(0.5)
        x -= y
        x /= 2
        return z, x

    jitted = _check_against_eager(fn, torch.randn(3), torch.randn(3))
    trace = str(thunder.last_traces(jitted)[0])
    assert "inplace.copy_(x, " in trace and "add_" not in trace


def test_inplace_ops_table() -> None:
    def fn(x, y):
        x.clamp_(min=-0.5, max=0.5)
        y.zero_()
        y.fill_(2.0)
        x.copy_(x * y)
        x.neg_().exp_()
        return x + y

    _check_against_eager(fn, torch.randn(4), torch.randn(4))


def test_inplace_on_views_updates_the_base() -> None:
    def fn(x):
        y = x * 1
        row = y[0]
        row.add_(10)
        y.view(-1).mul_(2)
        y[:, 1:] = 0
        y.t()[1].sub_(3)
        y[1, ::2] += 5
        return y, row

    _check_against_eager(fn, torch.randn(3, 4))


def test_views_taken_before_a_mutation_see_it() -> None:
    def fn(x):
        head = x[:2]
        x.mul_(3)
        return head + 0

    _check_against_eager(fn, torch.randn(4))


def test_setitem_forms() -> None:
    def fn(x, v):
        x[0] = v
        x[1:3, 1] = 7.0
        x[..., -1] = x[..., 0]
        x[x > 1] = -1.0
        return x

    _check_against_eager(fn, torch.randn(4, 5), torch.randn(5))


def test_out_and_inplace_arguments() -> None:
    def fn(x, out):
        torch.add(x, 1, out=out)
        y = F.relu(x, inplace=True)
        torch.relu_(out)
        return y, out

    _check_against_eager(fn, torch.randn(6), torch.empty(6))


def test_inplace_dtype_rules_follow_eager() -> None:
    def int_into_float(x, i):
        x.add_(i)
        return x

    _check_against_eager(int_into_float, torch.randn(3), torch.arange(3))

    def float_into_int(i, x):
        i.add_(x)
        return i

    with pytest.raises(RuntimeError, match="can't be cast"):
        thunder.jit(float_into_int)(torch.arange(3), torch.randn(3))


def test_inplace_on_a_leaf_that_requires_grad_is_refused_like_eager() -> None:
    def fn(x):
        x.add_(1)
        return x

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        thunder.jit(fn)(torch.randn(2, requires_grad=True))


def test_inplace_inside_the_graph_is_differentiated() -> None:
    def fn(x):
        y = x * 2
        y.mul_(x)
        y[0] = 0
        return y.sum()

    x = torch.randn(4, requires_grad=True)
    thunder.jit(fn)(x).backward()
    expected = x.detach().clone().requires_grad_()
    fn(expected).backward()
    torch.testing.assert_close(x.grad, expected.grad)


class _Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("last", torch.zeros(4))

    def forward(self, x):
        self.count += 1
        self.total.add_(x.sum(0))
        self.last = x.mean(0)  # a rebinding of a buffer: thunder writes the value into the buffer
        return self.linear(x) * self.count


def _compare_buffers(module: torch.nn.Module, eager: torch.nn.Module) -> None:
    for (name, buffer), (_, eager_buffer) in zip(module.named_buffers(), eager.named_buffers()):
        torch.testing.assert_close(buffer, eager_buffer, msg=name)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_module_buffers_mutated_in_forward(requires_grad: bool) -> None:
    module = _Counter().requires_grad_(requires_grad)
    eager = copy.deepcopy(module)
    jitted = thunder.jit(module)
    for _ in range(3):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jitted(x), eager(x))
    _compare_buffers(module, eager)
    assert module.count.item() == 3


@pytest.mark.parametrize("dims", [1, 2])
def test_batch_norm_training_updates_running_statistics(dims: int) -> None:
    torch.manual_seed(0)
    if dims == 1:
        module = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6))
        shape = (8, 6)
    else:
        module = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(inplace=True)
        )
        shape = (2, 3, 6, 6)
    eager = copy.deepcopy(module)
    jitted = thunder.jit(module)
    for _ in range(3):
        x = torch.randn(shape)
        torch.testing.assert_close(jitted(x), eager(x))
        _compare_buffers(module, eager)
    jitted.eval(), eager.eval()
    x = torch.randn(shape)
    torch.testing.assert_close(jitted(x), eager(x))
    _compare_buffers(module, eager)
    assert module[1].num_batches_tracked.item() == 3


def test_storing_a_computed_tensor_on_a_plain_attribute_is_replayed() -> None:
    class Caches(torch.nn.Module):
        def forward(self, x):
            self.cache = x * 2
            return x

    module = Caches()
    jitted = thunder.jit(module)
    for _ in range(2):
        x = torch.randn(2)
        jitted(x)
        torch.testing.assert_close(module.cache, x * 2)  # written by the epilogue, on every call
    assert thunder.cache_misses(jitted) == 1


def test_copies_do_not_alias() -> None:
    def fn(x):
        picked = x[[0, 2]]  # advanced indexing copies
        repeated = x.repeat(2)
        x.add_(1)
        picked.mul_(2)
        repeated.sub_(1)
        return picked, repeated

    _check_against_eager(fn, torch.randn(4))


def test_writing_into_a_view_thunder_computes_as_a_copy_is_an_error() -> None:
    def fn(x):
        x.unfold(0, 2, 1).add_(1)
        return x

    with pytest.raises(NotImplementedError, match="clone"):
        thunder.jit(fn)(torch.randn(5))
