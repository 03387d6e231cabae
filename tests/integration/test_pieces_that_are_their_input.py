"""Splitting ops whose one piece is the whole input (``x.split(n)`` with ``n`` the size, ``x.chunk(1)``,
``x.tensor_split(1)``, ``hsplit``/``vsplit``/``dsplit`` into one), against eager PyTorch.

Eager's piece is a new tensor viewing the input: a write into it reaches the input, and a write into
the input reaches it. thunder's decomposition returns the input's proxy itself for such a piece; it
was taken for a copy once the program had written an input (the returned piece was a tensor of its
own, so the caller's write into it was lost: a silent wrong answer found on 2026-11-28). Also here:
``torch.as_tensor`` of a tensor, which eager returns itself, found by the same probe.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder

WHOLE_PIECES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "split": lambda x: x.split(x.shape[0])[0],
    "split_with_sizes": lambda x: x.split([x.shape[0]])[0],
    "chunk": lambda x: x.chunk(1)[0],
    "tensor_split": lambda x: x.tensor_split(1)[0],
    "hsplit": lambda x: x.hsplit(1)[0],
    "vsplit": lambda x: x.vsplit(1)[0],
    "torch.split": lambda x: torch.split(x, x.shape[0])[0],
}


def _write_then_piece(piece: Callable) -> Callable:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return piece(x)

    return f


def _piece_then_write(piece: Callable) -> Callable:
    def f(x: torch.Tensor) -> torch.Tensor:
        p = piece(x)
        x.mul_(2)
        return p + 0, p

    return f


def _piece_alone(piece: Callable) -> Callable:
    def f(x: torch.Tensor) -> torch.Tensor:
        return piece(x)

    return f


@pytest.mark.parametrize(
    "make", [_write_then_piece, _piece_then_write, _piece_alone], ids=lambda m: m.__name__
)
@pytest.mark.parametrize("name", sorted(WHOLE_PIECES))
def test_a_piece_that_is_the_whole_input_aliases_it(name: str, make: Callable) -> None:
    f = make(WHOLE_PIECES[name])
    jitted = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(4, 3)
        x_eager = x.clone()
        actual, expected = jitted(x), f(x_eager)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x, x_eager)
        returned = actual[-1] if isinstance(actual, tuple) else actual
        returned_eager = expected[-1] if isinstance(expected, tuple) else expected
        assert returned is not x and returned_eager is not x_eager  # a new tensor object, as eager's
        returned.mul_(-1)  # written through the returned piece: the input has it, as in eager
        returned_eager.mul_(-1)
        torch.testing.assert_close(x, x_eager)


def test_gradients_reach_the_input_through_a_whole_piece() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        first = x.split(4)[0]
        (second,) = x.chunk(1)
        return (first * 2 + second.sin()).sum()

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(4, 3, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        jitted(x).backward()
        f(x_eager).backward()
        torch.testing.assert_close(x.grad, x_eager.grad)


@pytest.mark.parametrize("write_first", [False, True])
def test_as_tensor_of_a_tensor_is_that_tensor(write_first: bool) -> None:
    """``torch.as_tensor(x)`` (its own dtype and device) returns ``x`` itself in eager: a write through
    the result reaches ``x``. It was a copy under thunder (found with the split pieces above)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        if write_first:
            x.add_(1)
        return torch.as_tensor(x, dtype=x.dtype)

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(4)
        x_eager = x.clone()
        actual, expected = jitted(x), f(x_eager)
        assert (actual is x) == (expected is x_eager)
        actual.mul_(3)
        expected.mul_(3)
        torch.testing.assert_close(x, x_eager)


@pytest.mark.parametrize("same_dtype", [True, False])
def test_the_tensor_copy_returns_is_its_destination(same_dtype: bool) -> None:
    """``c.copy_(a)`` returns ``c`` itself in eager. Its value is ``a`` itself (an input too), which the
    output got a copy of, so the returned tensor was neither ``c`` nor a view of it: a write through
    it was lost (found by the same probe)."""

    def f(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return c.copy_(a)

    jitted = thunder.jit(f)
    for _ in range(2):
        a, c = torch.randn(4), torch.randn(4, dtype=torch.float32 if same_dtype else torch.float64)
        a_eager, c_eager = a.clone(), c.clone()
        actual, expected = jitted(a, c), f(a_eager, c_eager)
        assert actual is c and expected is c_eager
        actual.mul_(2)
        expected.mul_(2)
        torch.testing.assert_close((a, c), (a_eager, c_eager))
