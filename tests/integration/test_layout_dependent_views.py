"""Constructs whose eager answer depends on the memory layout answer as eager's do (core/layouts.py).

- ``x.t().view(-1)``: eager raises (the strides do not allow the view); thunder returned a reshape.
- ``y = x.t().contiguous(); y.add_(1)``: eager's ``contiguous`` copies, so ``x`` is unchanged;
  thunder's returned its input, and the write reached ``x``.
- ``y = x.t().reshape(-1); y.add_(1)``: eager's reshape copies; thunder treated it as a view of ``x``.
- An input's layout is traced as it is, and the prologue checks that a later call's input makes eager
  answer as it did: a layout for which eager answers otherwise is a cache miss, a compile for that
  layout (``f(x)`` then ``f(x.t())`` works as in eager), or eager's own error where eager raises.
"""

from __future__ import annotations

import re

import pytest
import torch

import thunder

_VIEW_ERROR = "view size is not compatible with input tensor's size and stride"


def contiguous(step: int) -> torch.Tensor:
    return torch.arange(6.0).reshape(2, 3) + step


def transposed(step: int) -> torch.Tensor:
    return (torch.arange(6.0).reshape(3, 2) + step).t()


PROGRAMS = {
    "view of a transpose": (lambda x: x.t().view(-1), contiguous),
    "view of a made-contiguous transpose": (lambda x: x.t().contiguous().view(-1), contiguous),
    "view of a transposed input": (lambda x: x.view(-1), transposed),
    "view of the transpose of a transposed input": (lambda x: x.t().view(-1), transposed),
    "view of the transpose of an intermediate": (lambda x: (x * 2).t().view(-1), contiguous),
    "view of a column slice": (lambda x: x[:, :2].view(-1), contiguous),
    "view of a row slice": (lambda x: x[:1].view(-1), contiguous),
    "view of an expand": (lambda x: x[:1].expand(4, 3).view(12), contiguous),
    "view after unsqueeze": (lambda x: x.unsqueeze(0).view(3, 2), contiguous),
    "permute, contiguous, view": (
        lambda x: x.reshape(1, 2, 3).permute(0, 2, 1).contiguous().view(3, 2),
        contiguous,
    ),
}


def _write_through_contiguous(x):
    y = x.t().contiguous()
    y.add_(1)
    return y


def _write_through_reshape(x):
    y = x.t().reshape(-1)
    y.add_(1)
    return y


def _write_through_viewing_reshape(x):
    y = x.reshape(-1)
    y.add_(1)
    return y


def _read_reshape_after_update(x):
    y = x.t().reshape(-1)
    x.add_(1)
    return y


def _write_through_a_transposed_slice_then_reshape(x):
    y = x + 0
    y.t()[::2, 1:].mul_(-1)  # y's new value is made by write-backs through a transpose
    y.reshape(-1)[3:5].fill_(9.0)
    return y.view(-1), y.t().contiguous()


WRITES = [
    _write_through_a_transposed_slice_then_reshape,
    _write_through_contiguous,
    _write_through_reshape,
    _write_through_viewing_reshape,
    _read_reshape_after_update,
]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_view_raises_where_eager_raises(name: str) -> None:
    fn, make = PROGRAMS[name]
    jitted = thunder.jit(fn)
    for step in range(3):
        try:
            expected = fn(make(step))
        except RuntimeError as error:
            assert _VIEW_ERROR in str(error)
            with pytest.raises(RuntimeError, match=_VIEW_ERROR):
                jitted(make(step))
            continue
        torch.testing.assert_close(jitted(make(step)), expected)


@pytest.mark.parametrize("fn", WRITES)
def test_writes_reach_the_input_only_through_eager_views(fn) -> None:
    jitted = thunder.jit(fn)
    for step in range(3):
        x, expected_x = contiguous(step), contiguous(step)
        torch.testing.assert_close(jitted(x), fn(expected_x))
        torch.testing.assert_close(x, expected_x)


# Inputs of shape (2, 3) in several layouts, each a fresh tensor for every call.
LAYOUTS = {
    "contiguous": contiguous,
    "transposed": transposed,
    "every other column": lambda step: (torch.arange(12.0).reshape(2, 6) + step)[:, ::2],
    "every other row": lambda step: (torch.arange(12.0).reshape(4, 3) + step)[::2],
    "offset columns": lambda step: (torch.arange(8.0).reshape(2, 4) + step)[:, 1:],
    "broadcast row": lambda step: (torch.arange(3.0) + step).expand(2, 3),
    "viewable, not contiguous": lambda step: (torch.arange(12.0) + step)[::2].view(2, 3),
}


def _contiguous_then_write(x):
    y = x.contiguous()
    y.mul_(-1)
    return y


def _transpose_contiguous_then_write(x):
    y = x.t().contiguous()
    y.add_(1)
    return y.sum()


def _reshape_then_write(x):
    y = x.reshape(-1)
    y[1:3] = 0.5
    return y * 2


def _returned_contiguous(x):
    return x.t().contiguous()


CALLED_WITH_LAYOUTS = {
    "view": lambda x: x.view(-1) * 2,
    "view of a transpose": lambda x: x.t().view(-1),
    "view to another shape": lambda x: x.view(3, 2) + 1,
    "flatten then view": lambda x: x.t().flatten().view(3, 2),
    "contiguous then write": _contiguous_then_write,
    "transpose, contiguous, write": _transpose_contiguous_then_write,
    "reshape then write": _reshape_then_write,
    "read a reshape after an update": _read_reshape_after_update,
    "returned contiguous": _returned_contiguous,
}

# alternating layouts, each met again later (a cache hit)
_CALLS = [
    "contiguous", "transposed", "contiguous", "every other column", "transposed", "every other row",
    "offset columns", "viewable, not contiguous", "contiguous", "broadcast row", "transposed",
    "every other column",
]  # fmt: skip


def _writes_input(fn) -> bool:
    return fn in (
        _contiguous_then_write,
        _transpose_contiguous_then_write,
        _reshape_then_write,
        _read_reshape_after_update,
    )


@pytest.mark.parametrize("name", list(CALLED_WITH_LAYOUTS))
def test_one_function_called_with_alternating_layouts_answers_as_eager(name: str) -> None:
    fn = CALLED_WITH_LAYOUTS[name]
    jitted = thunder.jit(fn)
    for step, layout in enumerate(_CALLS):
        x, expected_x = LAYOUTS[layout](step), LAYOUTS[layout](step)
        if _writes_input(fn) and layout == "broadcast row":
            continue  # writing into an input whose elements share memory: aliasing inputs, not layouts
        try:
            expected = fn(expected_x)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match=re.escape(str(error)[:40])):
                jitted(x)
            continue
        actual = jitted(x)
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{layout}: {m}")
        torch.testing.assert_close(x, expected_x, msg=lambda m: f"{layout} (the input): {m}")
        if isinstance(expected, torch.Tensor) and expected.numel() > 1:
            shares = expected.untyped_storage().data_ptr() == expected_x.untyped_storage().data_ptr()
            assert (actual.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == shares, layout


def test_a_layout_met_again_is_a_cache_hit() -> None:
    jitted = thunder.jit(_transpose_contiguous_then_write)
    for layout in ("contiguous", "transposed"):
        jitted(LAYOUTS[layout](0))
    assert thunder.cache_misses(jitted) == 2
    for step in range(4):
        for layout in ("contiguous", "transposed", "every other column"):  # the last: contiguous' entry
            x, expected_x = LAYOUTS[layout](step), LAYOUTS[layout](step)
            torch.testing.assert_close(jitted(x), _transpose_contiguous_then_write(expected_x))
            torch.testing.assert_close(x, expected_x)
    assert thunder.cache_misses(jitted) == 2


def test_the_recompile_reason_names_the_layout() -> None:
    jitted = thunder.jit(lambda x: x.contiguous().add_(1))
    jitted(contiguous(0))
    jitted(transposed(0))
    reason = thunder.compile_stats(jitted).recompile_reasons[-1]
    assert "layout" in reason.message and "x" in reason.what, reason.message
    assert "(3, 1)" in reason.before and "(1, 2)" in reason.after, reason


def test_a_later_call_with_another_layout_is_not_reshaped_silently() -> None:
    jitted = thunder.jit(lambda x: x.view(-1) * 2)
    torch.testing.assert_close(jitted(contiguous(0)), contiguous(0).view(-1) * 2)
    with pytest.raises(RuntimeError, match=_VIEW_ERROR):
        jitted(transposed(0))
    viewable = torch.arange(3.0).reshape(1, 3).expand(2, 3)[:1]  # not contiguous, yet viewable
    torch.testing.assert_close(jitted(viewable), viewable.view(-1) * 2)
    torch.testing.assert_close(jitted(contiguous(1)), contiguous(1).view(-1) * 2)


def test_a_later_call_where_contiguous_would_not_copy_writes_as_eager() -> None:
    jitted = thunder.jit(_write_through_contiguous)
    x = contiguous(0)
    jitted(x)
    torch.testing.assert_close(x, contiguous(0))
    x, expected_x = transposed(0), transposed(0)  # x.t() is contiguous: the write reaches x in eager
    torch.testing.assert_close(jitted(x), _write_through_contiguous(expected_x))
    torch.testing.assert_close(x, expected_x)
    assert not torch.equal(x, transposed(0))


def test_the_check_prints_in_the_trace() -> None:
    jitted = thunder.jit(lambda x: x.t().view(3, 2) if False else x.view(-1))
    jitted(contiguous(0))
    assert "layouts.guard(x" in str(thunder.last_prologue_traces(jitted)[-1])


def test_symbolic_sizes_take_eagers_layout_too() -> None:
    def fn(x):
        return x.t().contiguous(), x.view(x.shape) * 2

    jitted = thunder.jit(fn, dynamic=True)
    for rows in (3, 5, 7):
        x = torch.randn(rows, 4)
        for actual, expected in zip(jitted(x), fn(x)):
            torch.testing.assert_close(actual, expected)
            assert actual.is_contiguous() and actual.data_ptr() != x.data_ptr()
    view_of_transpose = thunder.jit(lambda x: x.t().view(-1), dynamic=True)
    for rows in (3, 5):
        with pytest.raises(RuntimeError, match=_VIEW_ERROR):
            view_of_transpose(torch.randn(rows, 4))


# Eager's elementwise ops, type conversions and the like keep a permuted operand's layout
# (TensorIterator, ``preserve_format``): ``(x.t() * 2).view(-1)`` raises in eager, and a write through
# ``(x.t() * 2).contiguous()`` does not reach the product. Thunder runs the op on meta tensors of its
# operands' layouts to know the result's.
def _write_through_contiguous_of_a_product(x):
    y = x.t() * 2
    z = y.contiguous()
    z.add_(1)
    return y, z


def _write_through_reshape_of_a_product(x):
    y = x.t() + 1
    y.reshape(-1)[:2].fill_(-5.0)
    return y


def _contiguous_of_where(x):
    y = torch.where(x.t() > 2, x.t(), 0.0)
    y.contiguous().mul_(3)
    return y


OPS_KEEPING_LAYOUT = {
    "mul": lambda x: (x.t() * 2).view(-1),
    "add": lambda x: (x.t() + 1).view(-1),
    "relu": lambda x: torch.relu(x.t()).view(-1),
    "to float64": lambda x: x.t().to(torch.float64).view(-1),
    "clone": lambda x: x.t().clone().view(-1),
    "zeros_like": lambda x: torch.zeros_like(x.t()).view(-1),
    "two operands": lambda x: (x.t() * x.t()).view(-1),
    "permuted first operand": lambda x: (x.t() + x.t().contiguous()).view(-1),
    "contiguous first operand": lambda x: (x.t().contiguous() + x.t()).view(-1),
    "broadcast": lambda x: (x.t() * torch.ones(3, 1)).view(-1),
    "chain": lambda x: torch.sigmoid(x.t().exp() - 1).view(-1),
    "of an input": lambda x: (x * 2).view(-1),
    "permute 3-d": lambda x: (x.reshape(1, 2, 3).permute(2, 0, 1) * 3).view(6),
    "reduction": lambda x: x.t().sum(0).view(-1),
    "matmul": lambda x: (x.t() @ torch.ones(2, 2)).view(-1),
    "contiguous product": lambda x: (x.t() * 2).contiguous().view(-1),
    "write through contiguous": _write_through_contiguous_of_a_product,
    "write through reshape": _write_through_reshape_of_a_product,
    "where, contiguous, write": _contiguous_of_where,
}


@pytest.mark.parametrize("name", list(OPS_KEEPING_LAYOUT))
def test_ops_keep_a_permuted_operands_layout_as_in_eager(name: str) -> None:
    fn = OPS_KEEPING_LAYOUT[name]
    jitted = thunder.jit(fn)
    for step, layout in enumerate(
        ["contiguous", "transposed", "every other column", "contiguous", "transposed"]
    ):
        x, expected_x = LAYOUTS[layout](step), LAYOUTS[layout](step)
        try:
            expected = fn(expected_x)
        except RuntimeError as error:
            assert _VIEW_ERROR in str(error)
            with pytest.raises(RuntimeError, match=_VIEW_ERROR):
                jitted(x)
            continue
        torch.testing.assert_close(jitted(x), expected, msg=lambda m: f"{layout}: {m}")
        torch.testing.assert_close(x, expected_x)


def test_a_layout_check_folded_into_the_tensor_check_prints_and_decides_as_before() -> None:
    """``(x * 2).view(-1)`` views only where ``x`` is contiguous (the product takes its layout): the
    prologue checks that in its C++ tensor check (printed with the tensor), and a call with another
    layout still answers as eager, also after many calls that took the C++ check's fast path."""

    def fn(x):
        return (x * 2).view(-1)

    jitted = thunder.jit(fn)
    for step in range(3):
        torch.testing.assert_close(jitted(contiguous(step)), fn(contiguous(step)))
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert "layout contiguous" in prologue and "layouts.guard(x" not in prologue, prologue
    for layout in ("transposed", "contiguous", "every other column", "transposed", "contiguous"):
        x = LAYOUTS[layout](5)
        try:
            expected = fn(x)
        except RuntimeError:
            with pytest.raises(RuntimeError, match=_VIEW_ERROR):
                jitted(x)
            continue
        torch.testing.assert_close(jitted(x), expected, msg=lambda m: f"{layout}: {m}")
    reason = thunder.compile_stats(jitted).recompile_reasons[0]
    assert "layout" in reason.message and "(3, 1)" in reason.before, reason
    misses = thunder.cache_misses(jitted)  # the contiguous entry is still found
    torch.testing.assert_close(jitted(contiguous(7)), fn(contiguous(7)))
    assert thunder.cache_misses(jitted) == misses


def test_a_tensor_whose_layout_does_not_matter_passes_with_changing_strides() -> None:
    """Strides the program does not depend on are not a miss: the first call's strides make the fast
    path, another layout passes the checks the entry requires, and is then left out of the fast one."""
    jitted = thunder.jit(lambda x, w: (x * 2).sum(0) + w)
    w = torch.randn(3)
    for x in (torch.randn(4, 3), torch.randn(3, 4).t(), torch.randn(4, 3), torch.randn(3, 4).t()):
        torch.testing.assert_close(jitted(x, w), (x * 2).sum(0) + w)
    assert thunder.cache_misses(jitted) == 1
    checks = thunder.last_prologue_traces(jitted)[-1].constants["_tensor_checks"]
    jitted(torch.randn(3, 4).t(), w)
    assert checks.covered() == (1, (1,))  # x left out once (version 1), w still covered
    assert checks.covered() is None  # taken: a CUDA graph's key reads it once per call
