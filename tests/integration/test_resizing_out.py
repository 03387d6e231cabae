"""``out=`` of another shape than the result: eager resizes ``out`` (and warns where it had elements),
and so does thunder for a tensor the program made; against eager PyTorch, over several calls and
input shapes. An input of the compiled function as such an ``out`` (the caller's tensor would change
shape), or a view, raises an error that names the construct."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder


def _into_empty(x: torch.Tensor, y: torch.Tensor) -> tuple:
    t = torch.empty(0)
    torch.add(x, y, out=t)
    return t * 2, t.shape, t.ndim


def _into_filled(x: torch.Tensor, y: torch.Tensor) -> tuple:
    t = torch.zeros(5)
    r = torch.mul(x, y, out=t)
    t.add_(1)  # r is t
    return r, t.sum(), r is t


def _into_another_dtype(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    t = torch.empty(0, dtype=torch.float64)
    torch.sub(x, y, out=t)
    return t


def _two_outputs(x: torch.Tensor, y: torch.Tensor) -> tuple:
    values, indices = torch.empty(0), torch.empty(0, dtype=torch.long)
    torch.max(x + y, 1, out=(values, indices))
    return values, indices


def _equal(expected: object, actual: object) -> bool:
    if isinstance(expected, torch.Tensor):
        return expected.dtype == actual.dtype and torch.equal(expected, actual)
    if isinstance(expected, tuple) and not isinstance(expected, torch.Size):
        return all(_equal(e, a) for e, a in zip(expected, actual, strict=True))
    return expected == actual


def _resize_warnings(fn, *args) -> tuple:  # noqa: ANN001
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    # (eager's ends with where ATen raised it: " (Triggered internally at ...Resize.cpp:30.)")
    messages = [str(w.message).split(" (Triggered internally")[0] for w in caught]
    return result, [m for m in messages if "was resized" in m]


@pytest.mark.parametrize(
    "fn", [_into_empty, _into_filled, _into_another_dtype, _two_outputs], ids=lambda f: f.__name__
)
def test_resizing_out_matches_eager(fn) -> None:  # noqa: ANN001
    jitted = thunder.jit(fn)
    generator = torch.Generator().manual_seed(0)
    for call, shape in enumerate([(2, 3), (2, 3), (4, 3)]):
        x, y = torch.randn(shape, generator=generator), torch.randn(shape[-1:], generator=generator)
        expected, eager_warnings = _resize_warnings(fn, x, y)
        actual, thunder_warnings = _resize_warnings(jitted, x, y)
        assert _equal(expected, actual)
        if call == 0:  # (thunder warns when it compiles; eager's warning shows once per line too)
            assert thunder_warnings == eager_warnings


def test_an_out_that_is_also_an_operand_is_not_resized_as_in_eager() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = x.clone()
        return torch.add(t, y, out=t)

    x, y = torch.randn(1), torch.randn(2, 2)
    with pytest.raises(
        RuntimeError, match=r"output with shape \[1\] doesn't match the broadcast shape \[2, 2\]"
    ):
        f(x, y)
    with pytest.raises(
        RuntimeError, match=r"output with shape \[1\] doesn't match the broadcast shape \[2, 2\]"
    ):
        thunder.jit(f)(x, y)


def test_resizing_an_input_or_a_view_is_refused() -> None:
    def into_input(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.add(x, x, out=t)

    def into_viewed(x: torch.Tensor) -> torch.Tensor:
        t = torch.empty(0)
        view = t[:0]
        torch.add(x, x, out=t)
        return view

    with pytest.raises(
        NotImplementedError, match=r"out= of shape \[0\] .* an input of the compiled function"
    ):
        thunder.jit(into_input)(torch.randn(2), torch.empty(0))
    with pytest.raises(NotImplementedError, match=r"out= of shape \[0\] .* a tensor with views"):
        thunder.jit(into_viewed)(torch.randn(2))
