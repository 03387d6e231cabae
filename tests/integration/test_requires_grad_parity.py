"""Outputs' ``requires_grad``, ``is_leaf`` and ``grad_fn`` are eager's, in either grad mode.

A sweep over common ops, in-place ops, detach and grad-mode regions inside the program, with inputs
that require grad or not, each called twice with new inputs. What it found: outputs computed under
``torch.no_grad()`` inside the program required grad; ``x.type_as(y)`` required grad when only ``y``
did; an input returned as is (``return x``, ``x.float()``) came back as a new non-leaf tensor;
``torch.empty(n).copy_(x)`` returned ``x`` itself; ``y.zero_()``/``y.fill_(v)`` of a tensor that
requires grad lost it. What thunder cannot reproduce raises (the last tests).
"""

from __future__ import annotations

import itertools

import pytest
import torch

import thunder


def _no_grad_inside(x, y):
    with torch.no_grad():
        a = x * 2
    return a + 0, a


def _set_row(x, y):
    z = torch.zeros(2, 3)
    z[0] = x[0]
    return z


PROGRAMS = {
    "add": lambda x, y: x + y,
    "detach": lambda x, y: x.detach(),
    "detach then mul": lambda x, y: x.detach() * y,
    "return input": lambda x, y: x,
    "return view of input": lambda x, y: x[0],
    "in-place on a new tensor": lambda x, y: (x * 1).add_(y),
    "zeros": lambda x, y: torch.zeros(3),
    "ones_like": lambda x, y: torch.ones_like(x),
    "argmax": lambda x, y: x.argmax(),
    "long": lambda x, y: x.long(),
    "compare": lambda x, y: x == y,
    "no_grad inside": _no_grad_inside,
    "to same dtype": lambda x, y: x.to(torch.float32),
    "contiguous": lambda x, y: x.contiguous(),
    "float": lambda x, y: x.float(),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "new_zeros": lambda x, y: x.new_zeros(3),
    "copy into a new tensor": lambda x, y: torch.empty(2, 3).copy_(x),
    "zero_": lambda x, y: (x * 1).zero_(),
    "fill_": lambda x, y: (x * 1).fill_(2.0),
    "copy_ of a constant": lambda x, y: (x * 1).copy_(torch.ones(2, 3)),
    "set a row": _set_row,
    "type_as": lambda x, y: x.type_as(y),
    "expand_as": lambda x, y: x[:1].expand_as(y),
    "view_as": lambda x, y: x.view_as(y),
    "stack": lambda x, y: torch.stack([x.detach(), y]),
}


def _properties(out):
    outputs = out if isinstance(out, tuple) else (out,)
    return [(t.requires_grad, t.is_leaf, t.grad_fn is None) for t in outputs]


def _inputs(x_requires_grad: bool, y_requires_grad: bool):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    return x.requires_grad_(x_requires_grad), y.requires_grad_(y_requires_grad)


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("grad_mode", [torch.enable_grad, torch.no_grad], ids=["grad", "no_grad"])
def test_requires_grad_as_in_eager(name: str, grad_mode) -> None:
    fn = PROGRAMS[name]
    for x_requires_grad, y_requires_grad in itertools.product((False, True), repeat=2):
        jitted = thunder.jit(fn)
        for _ in range(2):
            with grad_mode():
                x, y = _inputs(x_requires_grad, y_requires_grad)
                expected = fn(x, y)
                expected_properties = _properties(expected)
                expected_identity = [
                    o is x for o in (expected if isinstance(expected, tuple) else (expected,))
                ]
                x, y = _inputs(x_requires_grad, y_requires_grad)
                actual = jitted(x, y)
            assert _properties(actual) == expected_properties, (x_requires_grad, y_requires_grad)
            assert [o is x for o in (actual if isinstance(actual, tuple) else (actual,))] == expected_identity
            for a, e in zip(
                actual if isinstance(actual, tuple) else (actual,),
                expected if isinstance(expected, tuple) else (expected,),
            ):
                assert a.shape == e.shape and a.dtype == e.dtype


def test_a_new_tensor_holding_an_input_is_its_own() -> None:
    jitted = thunder.jit(lambda x: torch.empty(3).copy_(x))
    for start in (0.0, 1.0):
        x = torch.full((3,), start)
        out = jitted(x)
        assert out is not x and out.data_ptr() != x.data_ptr()
        x.add_(1)
        torch.testing.assert_close(out, torch.full((3,), start))


def test_zero_gradient_through_an_overwritten_tensor() -> None:
    def fn(x):
        y = x * 2
        y.zero_()
        return y + x

    x, expected_x = torch.randn(3, requires_grad=True), None
    expected_x = x.detach().clone().requires_grad_()
    thunder.jit(fn)(x).sum().backward()
    fn(expected_x).sum().backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


def test_factory_requiring_grad_is_refused_in_grad_mode() -> None:
    with pytest.raises(NotImplementedError, match=r"zeros\(\.\.\., requires_grad=True\)"):
        thunder.jit(lambda x: torch.zeros(3, requires_grad=True) * x)(torch.ones(3))
    with torch.no_grad():  # eager records nothing either: the leaf as eager makes it
        out = thunder.jit(lambda x: torch.zeros(3, requires_grad=True))(torch.ones(3))
    assert out.requires_grad and out.is_leaf


def test_writing_a_value_that_requires_grad_into_an_input_is_refused() -> None:
    x, y = torch.zeros(3), torch.ones(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="writes a value that requires grad into its input x"):
        thunder.jit(lambda x, y: x.mul_(y))(x, y)


def test_enable_grad_inside_a_no_grad_call_is_refused() -> None:
    def fn(x):
        with torch.enable_grad():
            return x * 2

    with torch.no_grad(), pytest.raises(NotImplementedError, match="under torch.enable_grad"):
        thunder.jit(fn)(torch.ones(3, requires_grad=True))


def _branch_on_no_grad_flag(x):
    with torch.no_grad():
        y = x * 2
    return x * 3 if y.requires_grad else x * 5


def _branch_on_detached_flag(x):
    y = x.detach() * 2
    return x * 3 if y.requires_grad else x * 5


def _branch_on_type_as_flag(x):
    y = torch.ones(3).type_as(x)
    return x * 3 if y.requires_grad else x * 5


@pytest.mark.parametrize("fn", [_branch_on_no_grad_flag, _branch_on_detached_flag, _branch_on_type_as_flag])
def test_the_program_reads_eagers_requires_grad(fn) -> None:
    """The flag the program reads while tracing is eager's (metas propagated it whatever the grad mode)."""
    jitted = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3, requires_grad=True)
        torch.testing.assert_close(jitted(x), fn(x))
