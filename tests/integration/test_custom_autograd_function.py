"""A user's ``torch.autograd.Function`` inside a jitted function (interpreter/custom_functions.py).

Found in an audit: torch's C ``apply`` ran ``forward`` natively under no_grad, so the function's
gradient silently vanished (eager's ``x.grad`` was ``g * 5``, thunder's 0) and what ``forward`` read
was never guarded. Now ``forward`` is traced like the rest of the program; a call whose gradient is
needed raises an error naming the class and the line (thunder does not trace ``backward``).
"""

from __future__ import annotations

import pytest
import torch

import thunder

SCALE = 2.0


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shift):
        ctx.save_for_backward(x)
        ctx.shift = shift
        return x * SCALE + shift

    @staticmethod
    def backward(ctx, grad):
        return grad * 5.0, None  # not the derivative of forward, on purpose: straight-through style


class WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.sin() * SCALE

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        return grad


def program(x):
    return Scaled.apply(x, 1.0) + WithSetupContext.apply(x).cos()


def test_a_gradient_through_a_custom_function_is_a_clear_error() -> None:
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"Scaled\.apply.*does not trace Scaled\.backward") as info:
        thunder.jit(program)(x)
    assert "return Scaled.apply(x, 1.0)" in str(info.value)  # the user's line


def test_without_gradients_the_forward_is_traced_and_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    jitted = thunder.jit(program)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(jitted(x), program(x))
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), program(x))
    monkeypatch.setitem(globals(), "SCALE", 3.0)  # a global the forward reads
    torch.testing.assert_close(jitted(x), program(x))
    monkeypatch.setattr(Scaled, "forward", staticmethod(lambda ctx, x, shift: x - shift))
    torch.testing.assert_close(jitted(x), program(x))
    assert thunder.cache_misses(jitted) == 4
