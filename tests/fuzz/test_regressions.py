"""Programs the fuzzer found failing, kept as explicit examples (fixed, or xfail with the reason)."""

from __future__ import annotations

import pytest
import torch
from fuzz_check import check_program
from fuzz_programs import Program

import thunder


def _program(body: str, shapes: list, *, grads: bool, dtype: torch.dtype = torch.float32) -> Program:
    params = ", ".join([chr(ord("a") + i) for i in range(len(shapes))] + ["k"])
    lines = ["def make(c):", f"    def f({params}):"] + [f"        {line}" for line in body.splitlines()]
    return Program("\n".join(lines + ["    return f"]) + "\n", shapes, dtype, 0, 0.25, (), grads)


def test_input_updated_in_place_and_returned_is_the_input_itself() -> None:
    # Found by the fuzzer: under no_grad, ``a.add_(1); return a`` returned a new tensor (requires_grad
    # False) where eager returns ``a`` itself; writes to the result did not reach the caller's tensor.
    check_program(_program("a.add_(1)\nreturn (a,)", [(1,)], grads=False), seed=0)

    def fn(a: torch.Tensor) -> torch.Tensor:
        a.mul_(2)
        return a

    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        out = thunder.jit(fn)(x)
    assert out is x and out.requires_grad
    y = torch.ones(3)
    assert thunder.jit(fn)(y) is y and torch.equal(y, torch.full((3,), 2.0))


def test_clone_of_an_input_then_updated_in_place_keeps_the_old_value() -> None:
    # Found by the long run: the functional clone is the input itself, and the epilogue then wrote the
    # update into it, so ``v`` came back as ``a + 1`` (silently wrong). Fixed: such an output is
    # snapshotted (``inplace.snapshot``) before the epilogue's copy.
    body = "v0 = torch.neg(a)\nv1 = a.clone(); v1.copy_(a)\nv2 = torch.neg(a)\na.add_(1)\nreturn (v1, v2, a,)"
    check_program(_program(body, [(1,)], grads=False), seed=0)

    def fn(a: torch.Tensor) -> tuple:
        v = a.clone()
        a.add_(1)
        return v, a

    x = torch.zeros(2)
    v, a = thunder.jit(fn)(x)
    assert torch.equal(v, torch.zeros(2)) and a is x and torch.equal(x, torch.ones(2))


def test_clone_of_an_input_is_a_new_tensor() -> None:
    """clone once returned its input proxy, so a jitted ``a.clone()`` was the caller's tensor itself."""
    x = torch.ones(3)
    out = thunder.jit(lambda a: a.clone())(x)
    assert out is not x and out.data_ptr() != x.data_ptr()


def test_copy_into_a_clone_does_not_alias_the_source() -> None:
    # found by the fuzzer: ``v = a.clone(); v.copy_(a)`` made ``v`` the input ``a`` itself (copy_'s
    # functional value is its source); a copy now (inplace._copies_of_written_inputs)
    def fn(a: torch.Tensor) -> tuple:
        v = a.clone()
        v.copy_(a)
        return v, a

    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v, a = thunder.jit(fn)(x)
    assert v is not a and not v.requires_grad


@pytest.mark.parametrize("op", [torch.maximum, torch.minimum])
def test_maximum_minimum_gradient_against_nan_and_ties(op) -> None:  # noqa: ANN001
    # Found by the long run: ``torch.maximum(a, b.var(0))`` over one element (var is NaN) gave ``a`` no
    # gradient; eager gives an input all of it unless it loses the comparison (NaN: no comparison holds).
    check_program(
        _program(
            f"v1 = b.var(0, keepdim=True)\nv4 = torch.{op.__name__}(a, v1)\nreturn (v4, a, b,)",
            [(1, 1, 1), (1, 1, 1)],
            grads=True,
        ),
        seed=0,
    )
    nan = float("nan")
    a = torch.tensor([1.0, 2.0, 3.0, nan, 5.0], requires_grad=True)
    b = torch.tensor([2.0, 2.0, 1.0, 1.0, nan], requires_grad=True)
    expected = torch.autograd.grad(op(a, b), [a, b], torch.ones(5))
    actual = torch.autograd.grad(thunder.jit(op)(a, b), [a, b], torch.ones(5))
    torch.testing.assert_close(actual, expected)


def test_a_result_made_from_a_comparison_does_not_require_grad() -> None:
    # Found by the fuzzer (its promotion family): ``(a > 0) + 0.5`` of an ``a`` that requires grad came
    # back with requires_grad True, and ``(a > 0).requires_grad`` read True inside the program, where
    # eager's bool (or integer) result never requires grad, nor what is made from it alone.
    check_program(_program("v0 = (a > 0) + 0.5\nreturn (v0, a, b,)", [(1,), (1,)], grads=False), seed=0)
    programs = [
        lambda a: (a > 0) + 0.5,
        lambda a: torch.where(a > 0, 1.0, 0.0),
        lambda a: a.long() * 0.5,
        lambda a: (a > 0) * a,
        lambda a: torch.tensor([(a > 0).requires_grad, ((a > 0) + 0.5).requires_grad, (a * 2).requires_grad]),
    ]
    for fn in programs:
        a = torch.randn(3, requires_grad=True)
        expected, actual = fn(a), thunder.jit(fn)(a)
        torch.testing.assert_close(actual, expected)
        assert actual.requires_grad == expected.requires_grad


def test_copy_into_another_dtype_and_shifts_work_as_in_eager() -> None:
    # Found probing the fuzzer's new families: ``x.copy_(src)`` into an integer tensor from a float one
    # raised "result type Float can't be cast" (eager's copy_ converts any dtype), and ``x << 2`` of a
    # tensor was a TypeError (the proxy lacked the shift operators).
    def copy_into(x, y):
        x.copy_(y)
        return x * 2

    x, expected_x = torch.arange(6).reshape(2, 3), torch.arange(6).reshape(2, 3)
    y = torch.linspace(-2.5, 2.5, 6).reshape(2, 3)
    torch.testing.assert_close(thunder.jit(copy_into)(x, y), copy_into(expected_x, y))
    torch.testing.assert_close(x, expected_x)
    flags = torch.zeros(2, 3, dtype=torch.bool)
    torch.testing.assert_close(thunder.jit(copy_into)(flags.clone(), y), copy_into(flags.clone(), y))
    for fn in (lambda x: x << 2, lambda x: x >> 1, lambda x: 1 << x.abs(), lambda x: (x << 1) + (x >> 1)):
        x = torch.arange(-3, 3)
        torch.testing.assert_close(thunder.jit(fn)(x), fn(x))


def test_a_tensor_of_its_own_does_not_share_the_inputs_memory() -> None:
    # Found by the fuzzer (its aliased_writes family): ``v = a.clone(); v[None] = a`` returned a view of
    # ``a`` (the write's value is ``a`` broadcast and reshaped back, which runs as views), so the
    # caller's writes to ``v`` changed ``a``, and under no_grad ``v`` required grad as ``a`` does.
    # ``x.to(x.dtype, copy=True)`` returned ``x`` itself.
    check_program(_program("v0 = a.clone(); v0[None] = a\nreturn (v0, a,)", [(1,)], grads=False), seed=0)

    def whole_writes(a):
        v, w, u = a.clone(), a.clone(), a.clone()
        v[None] = a
        w[...] = a
        u.t()[:] = a.t()
        return v, w, u, a.to(torch.float32, copy=True), a.to(dtype=torch.float32, copy=True)

    a = torch.arange(6.0).reshape(2, 3)
    for actual, expected in zip(thunder.jit(whole_writes)(a), whole_writes(a)):
        torch.testing.assert_close(actual, expected)
        assert actual.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        assert not thunder.jit(whole_writes)(x[None].expand(2, 3).clone())[0].requires_grad


def test_out_with_an_argument_that_requires_grad_raises_as_in_eager() -> None:
    # Found by the fuzzer, once a call eager refuses had to be refused by thunder too:
    # ``torch.mul(a, 2, out=v)`` of an ``a`` that requires grad returned a result.
    def fn(a):
        v = torch.empty_like(a)
        torch.mul(a, 2, out=v)
        return v

    a = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        fn(a)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        thunder.jit(fn)(a)
    with torch.no_grad():
        torch.testing.assert_close(thunder.jit(fn)(a), fn(a))


def test_out_that_is_also_an_operand_of_another_shape_raises_as_in_eager() -> None:
    # Found by the long run once out= of another shape resized (inplace.resize):
    # ``v = a.clone(); torch.add(v, b, out=v)`` with ``b`` broadcasting ``v`` to more elements returned
    # the sum, where eager refuses to resize an operand ("output with shape [1] doesn't match the
    # broadcast shape [1, 1]").
    body = "v1 = a.clone(); torch.add(v1, b, out=v1)\nreturn (v1, a, b,)"
    check_program(_program(body, [(1,), (1, 1)], grads=False), seed=0)


def test_an_update_by_a_view_overlapping_it_raises_as_in_eager() -> None:
    # Found by the long run: ``v2 = a[..., ::2]; a.sub_(v2)`` of a (1, 1, 1) input returned the
    # difference, where eager refuses the partial overlap of two dense views of one memory (their
    # strides differ) with "some elements of the input tensor and the written-to tensor refer to a
    # single memory location" (inplace.check_write_overlap).
    body = "v2 = a[..., ::2]\na.sub_(v2)\nreturn (v2, a, b,)"
    check_program(_program(body, [(1, 1, 1), (1,)], grads=False, dtype=torch.float64), seed=0)
