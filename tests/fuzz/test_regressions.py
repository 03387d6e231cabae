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


@pytest.mark.xfail(
    strict=True,
    reason="ltorch.clone returns its input proxy (a functional trace elides copies), so a jitted "
    "``a.clone()`` of an input is the input itself: writes to it reach the caller's tensor. Reported to "
    "the lead: needs a copy that survives to the execution trace (a prim or a rule at the outputs).",
)
def test_clone_of_an_input_is_a_new_tensor() -> None:
    x = torch.ones(3)
    out = thunder.jit(lambda a: a.clone())(x)
    assert out is not x and out.data_ptr() != x.data_ptr()


@pytest.mark.xfail(
    strict=True,
    reason="found by the fuzzer: ``v = a.clone(); v.copy_(a)`` makes ``v`` the input ``a`` itself "
    "(copy_'s functional value is its source): the same clone/copy aliasing as above.",
)
def test_copy_into_a_clone_does_not_alias_the_source() -> None:
    def fn(a: torch.Tensor) -> tuple:
        v = a.clone()
        v.copy_(a)
        return v, a

    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v, a = thunder.jit(fn)(x)
    assert v is not a and not v.requires_grad
