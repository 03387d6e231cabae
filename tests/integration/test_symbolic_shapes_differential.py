"""Symbolic sizes against eager PyTorch: one jitted function, many calls with changing sizes.

Every call's result (tensors, and Python values: ints, text, bools, their types) must be eager's.
The first group are wrong answers found in an audit, each a way a size's value reached the program
without a guard: text made natively (``str`` of a tuple of sizes, ``str.format``, ``join``),
``isinstance``/``type``/``is`` on a size. The slow group sweeps the size-dependent constructs
(branches, arithmetic on sizes, slicing, factories, views, padding, reductions, attention) with
hypothesis-chosen sequences of sizes, 0 and 1 included.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thunder


def _assert_same(result: Any, expected: Any) -> None:
    """Equal values of equal types all the way down (``2 == 2.0`` and ``'s0'`` would not pass)."""
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(result, expected, equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert type(result) is type(expected) and len(result) == len(expected), (result, expected)
        for r, e in zip(result, expected):
            _assert_same(r, e)
    else:
        assert type(result) is type(expected) and result == expected, (result, expected)


def _differential(fn: Callable, calls: Iterable[tuple], **options: Any) -> Callable:
    jitted = thunder.jit(fn, **options)
    for args in calls:
        _assert_same(jitted(*args), fn(*args))
    return jitted


_TEXT = {
    "str of a shape tuple": lambda x: str(tuple(x.shape)),
    "str of a list": lambda x: str([x.shape[0], 1]),
    "str.format": lambda x: "{}-{}".format(x.shape[0], x.shape[1]),  # noqa: UP032
    "format with a spec": lambda x: f"{x.shape[0]:03d}",
    "f-string of a tuple": lambda x: f"{(x.shape[0], 2)}",
    "join of map(str)": lambda x: ",".join(map(str, x.shape)),
    "repr method": lambda x: x.shape[0].__repr__(),
    "float text": lambda x: str(x.shape[0] / 2),
    "bool text": lambda x: str(x.shape[0] > 4),
}


@pytest.mark.parametrize("make_text", _TEXT.values(), ids=_TEXT.keys())
def test_text_of_a_size_is_its_value(make_text: Callable) -> None:
    """torch prints a SymInt as its symbol, unguarded: thunder gave ``'(s0, s1)'`` on every call."""
    _differential(make_text, [(torch.randn(n, n + 1),) for n in (2, 3, 5, 4)], dynamic=True)


def test_a_size_printed_by_the_program_is_its_value() -> None:
    def fn(x):
        print("sizes", x.shape[0], list(x.shape))
        return x * 2

    jitted = thunder.jit(fn, dynamic=True)
    for n in (3, 5):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            jitted(torch.randn(n, 2))  # printed while tracing: each size compiles (the text specialized)
        assert printed.getvalue() == f"sizes {n} [{n}, 2]\n"


_TYPES = {
    "isinstance int": lambda x: isinstance(x.shape[0], int),
    "isinstance tuple of types": lambda x: isinstance(x.shape[0] // 2, (float, int)),
    "isinstance float": lambda x: isinstance(x.shape[0] / 2, float),
    "isinstance bool": lambda x: isinstance(x.shape[0] > 2, bool),
    "type is int": lambda x: type(x.size(1)) is int,
    "type name": lambda x: type(x.numel()).__name__,
    "normalizing a dim": lambda x: x.sum(x.shape[1] - 2 if isinstance(x.shape[1] - 2, int) else (0, 1)),
    "is a small int": lambda x: (x.shape[0] is 5, x.shape[0] is not 5),  # noqa: F632
    "is None": lambda x: x.shape[0] is None,
}


@pytest.mark.parametrize("fn", _TYPES.values(), ids=_TYPES.keys())
def test_type_and_identity_of_a_size_are_eager_ones(fn: Callable) -> None:
    """A size is an int in eager: thunder answered False for ``isinstance(n, int)``, ``'SymInt'``
    for ``type(n).__name__``, and False for ``n is 5`` when n was 5."""
    _differential(fn, [(torch.randn(n, 3),) for n in (2, 3, 5, 4, 5)], dynamic=True)


def test_text_specialization_leaves_other_sizes_symbolic() -> None:
    def fn(x):
        return x.sum(0) * x.shape[0], str(x.shape[1])

    jitted = _differential(fn, [(torch.randn(n, 3),) for n in (2, 3, 4, 5, 6)])
    assert thunder.cache_misses(jitted) == 2  # static, then the length symbolic; dim 1 never changed


def test_view_by_one_symbolic_size() -> None:
    """``x.view(n * m)`` was taken for ``view(dtype)`` when ``n * m`` was a SymInt: every length compiled
    static (correct, but a compile per length)."""
    jitted = _differential(
        lambda x: x.view(x.shape[0] * x.shape[1]) * 2, [(torch.randn(n, 3),) for n in (2, 3, 4, 5)]
    )
    assert thunder.cache_misses(jitted) == 2 and thunder.compile_stats(jitted).dynamic_fallbacks == []


# ---------------------------------------------------------------------------------------------
# The sweep: size-dependent Python and ops, random sequences of sizes


def _branches(x: torch.Tensor) -> Any:
    n, m = x.shape
    out = x * 2 if n % 2 == 0 else x - 1
    while n > 4:
        out = out + 1
        n -= 3
    steps = [out[i : i + 1].sum() for i in range(0, x.shape[0], 2)]
    return out, torch.stack(steps), min(x.shape[0], 4), max(m, 3), math.ceil(x.shape[0] / 3), bool(m - 2)


def _arithmetic(x: torch.Tensor) -> Any:
    n = x.shape[0]
    return x * n + (n - 1) / 2, x.sum() / x.numel(), n // 2, n % 3, n**2, -n, x.size(1) * 2 + 1, len(x)


def _slices(x: torch.Tensor) -> Any:
    n = x.shape[0]
    return x[-n + 1 :], x[-2:], x[1:-1], x[: n // 2], x[: min(n, 3)], x.narrow(0, 0, n // 2 + 1), x[n - 1]


def _factories(x: torch.Tensor) -> Any:
    n, m = x.shape
    return (
        torch.arange(n) * 1.0 + x.sum(1),
        torch.zeros(n, m) + x,
        torch.full((n,), float(m)),
        x.new_ones(n, n).tril(),
        torch.tensor([n, m]),
        torch.linspace(0, 1, n),
    )


def _views(x: torch.Tensor) -> Any:
    n, m = x.shape
    flat = x.reshape(-1)
    return (
        x.view(m, -1),
        flat.unflatten(0, (n, m)),
        x.t().contiguous().view(-1),
        x[:, :1].expand(n, 4),
        x.repeat(2, 1),
    )


def _pieces(x: torch.Tensor) -> Any:
    parts = x.split(2)
    return torch.cat([p * i for i, p in enumerate(parts)]), x.chunk(2), len(x.unbind(0)), x.flip(0)


def _reductions(x: torch.Tensor) -> Any:
    return x.mean(0), x.var(0), x.std(1), x.softmax(0), F.layer_norm(x, (x.shape[1],)), x.cumsum(0), x.amax(0)


def _padding(x: torch.Tensor) -> Any:
    n = x.shape[0]
    return F.pad(x, (1, 2, n // 2, 0)), F.pad(x, (0, 9 - x.shape[1])), F.interpolate(x[None], scale_factor=2)


def _masks(x: torch.Tensor) -> Any:
    n, m = x.shape
    causal = torch.ones(n, m, dtype=torch.bool).tril(m - n)
    return x.masked_fill(~causal, -1.0), x.masked_fill(torch.arange(m) > m // 2, 0.0)


def _attention(x: torch.Tensor) -> Any:
    n, m = x.shape
    q = x[None, None, :, :2].expand(1, 2, n, 2).contiguous()
    k = x.t()[None, None, :, :2].expand(1, 2, m, 2).contiguous()
    mask = torch.ones(n, m, dtype=torch.bool).tril(m - n)
    return F.scaled_dot_product_attention(q, k, k, attn_mask=mask), F.scaled_dot_product_attention(
        q, q, q, is_causal=True
    )


_SWEEP = [
    _branches,
    _arithmetic,
    _slices,
    _factories,
    _views,
    _pieces,
    _reductions,
    _padding,
    _masks,
    _attention,
]


@pytest.mark.slow
@pytest.mark.parametrize("fn", _SWEEP, ids=[f.__name__ for f in _SWEEP])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(st.tuples(st.integers(0, 9), st.integers(1, 9)), min_size=3, max_size=7))
def test_one_function_with_changing_sizes_matches_eager(fn: Callable, shapes: list[tuple[int, int]]) -> None:
    jitted = thunder.jit(fn)
    for n, m in shapes:
        x = torch.randn(n, m)
        try:
            expected = fn(x)
        except (RuntimeError, IndexError, ValueError):
            with pytest.raises((RuntimeError, IndexError, ValueError)):
                jitted(x)
            continue
        _assert_same(jitted(x), expected)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=3, max_size=6))
def test_two_inputs_broadcasting_one_against_n(shapes: list[tuple[int, int]]) -> None:
    """Two symbolic dims equal on one call, 1 and n on another, unequal (an error) on a third."""

    def fn(x, y):
        return x + y, (x * y).sum(0), x.shape[0] == y.shape[0]

    jitted = thunder.jit(fn)
    for a, b in shapes:
        x, y = torch.randn(a, 3), torch.randn(b, 3)
        if a != b and 1 not in (a, b):
            with pytest.raises(RuntimeError):
                jitted(x, y)
            continue
        _assert_same(jitted(x, y), fn(x, y))


@pytest.mark.slow
def test_backward_with_changing_sizes() -> None:
    """Training compiles static (symbolic_shapes.py); gradients of every call are eager's."""

    def fn(x, w):
        n = x.shape[0]
        h = (x @ w).tanh()
        return (h.mean(0) * n).sum() + h[: n // 2].sum() + F.pad(h, (0, 0, 1, 0)).square().sum()

    jitted = thunder.jit(fn)
    w = torch.randn(3, 4, requires_grad=True)
    for n in (2, 3, 5, 4, 7):
        x = torch.randn(n, 3, requires_grad=True)
        result = torch.autograd.grad(jitted(x, w), (x, w))
        expected = torch.autograd.grad(fn(x, w), (x, w))
        _assert_same(result, expected)
        with torch.no_grad():
            _assert_same(jitted(x, w), fn(x, w))


@pytest.mark.slow
def test_strides_change_while_sizes_are_symbolic() -> None:
    def fn(x):
        return x.contiguous().view(-1)[: x.shape[0]], x.reshape(x.shape[1], -1), x.t() @ x

    calls = [(torch.randn(n, 4) if i % 2 else torch.randn(4, n).t(),) for i, n in enumerate((2, 3, 5, 6, 7))]
    _differential(fn, calls)


_SHAPES = {
    "returned shape": lambda x: (x.shape, x.size(), x.sum(0).shape),
    "isinstance Size": lambda x: isinstance(x.shape, torch.Size),
    "text of a shape": lambda x: (str(x.shape), repr(x.size())),
    "shape compared": lambda x: x.shape == torch.Size([5, 3]),
}


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("fn", _SHAPES.values(), ids=_SHAPES.keys())
def test_a_shape_is_a_torch_size(fn: Callable, dynamic: bool) -> None:
    """A proxy's shape was a tuple: ``isinstance(x.shape, torch.Size)`` was False, ``str(x.shape)``
    gave ``'(2, 3)'`` and a returned shape was a tuple, with static shapes too."""
    _differential(fn, [(torch.randn(n, 3),) for n in (2, 5, 4)], dynamic=dynamic)
