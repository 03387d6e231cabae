"""Operators called with keyword arguments as PyTorch documents them, through ``thunder.jit``
(issue 21): functions and tensor methods, forward and backward against eager. That every symbol's
parameters are torch's is checked without running anything in thunder-core's test_signatures.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

CASES: dict[str, Callable[..., torch.Tensor]] = {
    "mul_other": lambda x, y: torch.mul(x, other=2.0),
    "mul_input_other": lambda x, y: torch.mul(input=x, other=y),
    "method_mul_other": lambda x, y: x.mul(other=2),
    "method_multiply": lambda x, y: x.multiply(other=y),
    "add_alpha": lambda x, y: torch.add(x, other=y, alpha=3),
    "method_add_alpha": lambda x, y: x.add(other=y, alpha=0.5),
    "method_sub_alpha": lambda x, y: x.sub(other=y, alpha=2),
    "rsub": lambda x, y: torch.rsub(input=x, other=y, alpha=2),
    "div_rounding": lambda x, y: torch.div(input=x, other=y.abs() + 1, rounding_mode="floor"),
    "pow_exponent": lambda x, y: torch.pow(x.abs() + 1, exponent=y),
    "method_pow_exponent": lambda x, y: (x.abs() + 1).pow(exponent=2),
    "true_divide": lambda x, y: torch.true_divide(input=x, other=y.abs() + 1),
    "maximum": lambda x, y: torch.maximum(input=x, other=y),
    "atan2": lambda x, y: torch.atan2(input=x, other=y),
    "where": lambda x, y: torch.where(x > 0, input=x, other=y),
    "exp_input": lambda x, y: torch.exp(input=x),
    "method_clamp": lambda x, y: x.clamp(min=-0.5, max=0.5),
    "sum_dim_keepdim": lambda x, y: torch.sum(input=x, dim=1, keepdim=True),
    "method_sum": lambda x, y: x.sum(dim=0, keepdim=False),
    "mean_dim": lambda x, y: x.mean(dim=-1),
    "softmax_dim": lambda x, y: torch.softmax(x, dim=1),
    "select": lambda x, y: torch.select(input=x, dim=1, index=0),
    "unflatten": lambda x, y: torch.unflatten(input=x, dim=1, sizes=(2, 2)),
    "ldexp": lambda x, y: torch.ldexp(input=x, other=torch.ones_like(x)),
    "lerp": lambda x, y: torch.lerp(input=x, end=y, weight=0.3),
    "method_divide": lambda x, y: x.divide(other=y.abs() + 1, rounding_mode="trunc"),
    "addmm": lambda x, y: torch.addmm(input=x, mat1=y, mat2=x.T @ y, beta=0.5, alpha=2),
    "outer": lambda x, y: torch.outer(input=x[0], vec2=y[0]),
    "cosine_similarity": lambda x, y: F.cosine_similarity(x1=x, x2=y, dim=1),
    "logcumsumexp": lambda x, y: torch.logcumsumexp(input=x, dim=1),
}


@pytest.mark.parametrize("name", CASES)
def test_keyword_arguments(name: str) -> None:
    fn = CASES[name]
    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    inputs = [x.clone().requires_grad_(), y.clone().requires_grad_()]
    reference = [x.clone().requires_grad_(), y.clone().requires_grad_()]
    actual, expected = thunder.jit(fn)(*inputs), fn(*reference)
    torch.testing.assert_close(actual, expected)
    if not expected.requires_grad:
        return
    grad = torch.randn_like(expected)
    actual_grads = torch.autograd.grad(actual, inputs, grad, allow_unused=True)
    expected_grads = torch.autograd.grad(expected, reference, grad, allow_unused=True)
    for a, e, t in zip(actual_grads, expected_grads, inputs):
        torch.testing.assert_close(
            torch.zeros_like(t) if a is None else a, torch.zeros_like(t) if e is None else e
        )
