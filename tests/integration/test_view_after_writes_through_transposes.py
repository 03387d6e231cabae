"""``.view`` of a tensor taken after in-place writes through views answers as eager's (core/layouts.py).

A write through a view gives the written tensor a new value made by write-backs (a transpose of a slice
write, for a write through ``x.t()[0]``). Thunder took a view made later, ``x.t()[0].mul_(2)`` then
``x.t().t()``, as a view of that value, laid out otherwise than the tensor the user's code holds: it
refused ``x.t().t().view(-1)``, which eager makes. An op read before a later write (``y = v + 0``) had
the same wrong layout, and there thunder accepted a view eager refuses. Each program runs jitted
several times with fresh inputs; its outputs, the inputs' final values and its errors are eager's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder

_VIEW_ERROR = "view size is not compatible with input tensor's size and stride"


def _found_by_the_fuzzer(a):
    v2 = a.t()
    v2[0].mul_(2)
    v3 = v2.t()
    v3.t().copy_(v3.t() * 2)
    v3.view(-1).mul_(0.5)
    return a


def _double_transposes(write: Callable | None) -> dict[str, Callable]:
    """``.view(-1)`` of the three spellings of a double transpose, with ``write`` applied first to the
    single transpose (or to nothing)."""
    spellings = {
        "t": (lambda x: x.t(), lambda y: y.t()),
        "mT": (lambda x: x.mT, lambda y: y.mT),
        "permute": (lambda x: x.permute(1, 0), lambda y: y.permute(1, 0)),
    }
    programs = {}
    for name, (first, second) in spellings.items():

        def program(x, first=first, second=second):
            y = first(x)
            if write is not None:
                write(y)
            return second(y).view(-1) * 1

        programs[name] = program
    return programs


def _write_a_row(y):
    y[0].mul_(2)


def _write_all(y):
    y.add_(1)


def _write_back_through_both(x):
    y = x.t()
    y[1:].mul_(3)
    z = y.t()
    z.t()[0].fill_(5.0)
    z.view(-1)[2:4].sub_(1)
    return z.view(2, -1)


def _read_before_a_later_write_contiguous(x):
    v = x.t()
    v[0].mul_(2)
    y = v.t()
    v[1].mul_(2)
    return y.view(-1) + 0


def _read_before_a_later_write_transposed(x):  # eager refuses: ``y`` is laid out as ``x.t()``
    v = x.t()
    v[0].mul_(2)
    y = v + 0
    v[1].mul_(2)
    return y.view(-1)


def _transpose_after_a_write(x):  # eager refuses: ``x.t()`` is not contiguous
    v = x.t()
    v[0].mul_(2)
    return v.view(-1)


def _contiguous_after_writes(x):  # eager's contiguous() returns the tensor itself: the write reaches x
    v = x.t()
    v[0].mul_(2)
    y = v.t().contiguous()
    y.add_(1)
    return y


def _contiguous_of_the_transpose_after_writes(x):  # eager's contiguous() copies: x is not written
    v = x.t()
    v[0].mul_(2)
    y = v.contiguous()
    y.add_(1)
    return y


PROGRAMS = {
    "found by the fuzzer": _found_by_the_fuzzer,
    **{f"{name} twice, no write": p for name, p in _double_transposes(None).items()},
    **{f"{name} twice, a row written": p for name, p in _double_transposes(_write_a_row).items()},
    **{f"{name} twice, all written": p for name, p in _double_transposes(_write_all).items()},
    "writes back through both transposes": _write_back_through_both,
    "read before a later write, contiguous": _read_before_a_later_write_contiguous,
    "read before a later write, transposed": _read_before_a_later_write_transposed,
    "transpose after a write": _transpose_after_a_write,
    "contiguous after writes": _contiguous_after_writes,
    "contiguous of the transpose after writes": _contiguous_of_the_transpose_after_writes,
}


def _view_of_a_base(step: int) -> torch.Tensor:
    return (torch.arange(16.0).reshape(4, 4) + step).view(2, -1)


def _transposed(step: int) -> torch.Tensor:
    return (torch.arange(16.0).reshape(8, 2) + step).t()


def _run(program: Callable, x: torch.Tensor) -> tuple[object, torch.Tensor]:
    try:
        return program(x), x
    except RuntimeError as error:
        return error, x


@pytest.mark.parametrize("make_input", [_view_of_a_base, _transposed], ids=["view of a base", "transposed"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_matches_eager(name: str, make_input: Callable[[int], torch.Tensor]) -> None:
    program = PROGRAMS[name]
    jitted = thunder.jit(program)
    for step in range(3):
        expected, eager_input = _run(program, make_input(step))
        actual, thunder_input = _run(jitted, make_input(step))
        if isinstance(expected, RuntimeError):
            assert isinstance(actual, RuntimeError), f"eager raised {expected}, thunder returned {actual}"
            assert _VIEW_ERROR in str(expected) and _VIEW_ERROR in str(actual)
            continue
        assert not isinstance(actual, Exception), f"thunder raised {actual}, eager returned"
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(thunder_input, eager_input)


def test_a_view_of_the_source_of_a_copy_into_a_transposed_input() -> None:
    # A wrong answer from 6eac4ce (which fixed the mirror case ``a.t().contiguous()`` after
    # ``a.copy_(b)``) until the layout checks took the user's own arguments (``Mutations.user_call``,
    # ``view_sources``): ``b.t()`` was taken as a view of ``a``'s layout (``a`` transposed, so ``b.t()``
    # looked contiguous), ``contiguous()`` returned it itself, and the write reached ``b``.
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.copy_(b)
        y = b.t().contiguous()
        y.add_(1)
        return y

    a, b = torch.randn(4, 4).t(), torch.randn(4, 4)
    a_eager, b_eager = a.clone().t().contiguous().t(), b.clone()
    torch.testing.assert_close(thunder.jit(f)(a, b), f(a_eager, b_eager))
    torch.testing.assert_close(b, b_eager)


@pytest.mark.parametrize("transposed", ["a", "b"])
@pytest.mark.parametrize(
    "program", ["b.contiguous()", "a.contiguous()", "b.t().contiguous()", "a.t().contiguous()"]
)
def test_after_a_copy_each_tensor_keeps_its_own_layout(transposed: str, program: str) -> None:
    """After ``a.copy_(b)`` one trace value stands for both; ``contiguous()`` of either aliases or copies
    by that tensor's own layout, as eager's does (a write into the result reaches the tensor or not)."""

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.copy_(b)
        y = eval(program, {}, {"a": a, "b": b})  # noqa: S307 -- the test's own expressions
        y.add_(1)
        return y

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.randn(4, 4), torch.randn(4, 4)
        return (a.t(), b) if transposed == "a" else (a, b.t())

    def same_layout_copy(t: torch.Tensor) -> torch.Tensor:
        return t.clone() if t.is_contiguous() else t.clone().t().contiguous().t()

    jitted = thunder.jit(f)
    for _ in range(2):
        a, b = inputs()
        a_eager, b_eager = same_layout_copy(a), same_layout_copy(b)
        torch.testing.assert_close(jitted(a, b), f(a_eager, b_eager))
        torch.testing.assert_close((a, b), (a_eager, b_eager))
