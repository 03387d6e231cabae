"""A view of a tensor the program filled from an input (``v = torch.empty_like(a); v.copy_(a);
return v.t()``).

After the write, the trace's value of ``v`` is ``a``'s proxy itself, so the view is taken of ``a`` when
the program runs: the caller got a view of its own input, where eager's is a view of the fresh ``v``.
A write into the result then changed ``a``, and under ``no_grad`` the result required grad because
``a`` did. Found by the general fuzzer's long run (``v1 = a.clone(); v1[None] = a;
v1.transpose(0, -1)``); ``inplace._copies_of_written_inputs`` now returns a copy there. Each case runs
one jitted function twice, with new inputs, against eager.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder


def filled_by_copy_then_transposed(a: torch.Tensor) -> torch.Tensor:
    v = torch.empty_like(a)
    v.copy_(a)
    return v.t()


def cloned_written_then_flattened(a: torch.Tensor) -> torch.Tensor:
    v = a.clone()
    v.copy_(a)
    return v.view(-1)


def written_through_an_index_then_transposed(a: torch.Tensor) -> torch.Tensor:
    v = a.clone()
    v[None] = a
    return v.transpose(0, -1)


def written_through_an_ellipsis_then_viewed(a: torch.Tensor) -> torch.Tensor:
    v = a.clone()
    v[...] = a
    return v.view(-1)


def a_view_of_the_input_itself(a: torch.Tensor) -> torch.Tensor:
    """The legitimate alias: eager's result is a view of ``a`` too."""
    return a.t()


CASES: list[Callable[[torch.Tensor], torch.Tensor]] = [
    filled_by_copy_then_transposed,
    cloned_written_then_flattened,
    written_through_an_index_then_transposed,
    written_through_an_ellipsis_then_viewed,
    a_view_of_the_input_itself,
]


def _shares_memory(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


@pytest.mark.parametrize("fn", CASES, ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("shape", [(1,), (2, 3)])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_the_result_aliases_what_eagers_aliases(fn: Callable, shape: tuple, grad: bool) -> None:
    jitted = thunder.jit(fn)
    for _ in range(2):
        a = torch.randn(shape, requires_grad=True)
        with torch.set_grad_enabled(grad):
            expected, actual = fn(a), jitted(a)
        torch.testing.assert_close(actual, expected)
        assert actual.requires_grad == expected.requires_grad
        assert _shares_memory(actual, a) == _shares_memory(expected, a)
        if not expected.requires_grad:  # a write into the result reaches a only where eager's does
            before = a.detach().clone()
            with torch.no_grad():
                actual.add_(1)
                expected_a = before + 1 if _shares_memory(expected, a) else before
            torch.testing.assert_close(a.detach(), expected_a)
