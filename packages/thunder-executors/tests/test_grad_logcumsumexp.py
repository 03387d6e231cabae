"""torch.logcumsumexp through ``thunder.jit``, forward and backward, against eager (issue 21).

The symbol's gradient rule and its decomposition (a scan of logaddexp, run when only prims are
available) must hold where ``log(cumsum(exp(x - max)))`` does not: a slice spanning more than ~700
(the prefix underflowed: -inf values, NaN gradients), -inf entries, dims of size 1, and every
OpInfo sample. Float64 results compare with eager's. Float32 results compare with eager's float64
results: eager's own float32 gradient is off by 2e-3 on the OpInfo sample holding 1e4 (it takes
``exp(x - out)`` with ``out`` rounded to float32), thunder's by 2e-7.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import thunder
import thunder.executors.torchex as tx

INF = float("inf")

EDGE_CASES: dict[str, tuple[list, int]] = {
    "large_magnitudes": ([-1000.0, 0.0, 1000.0], 0),
    "spread_of_2e4": ([[-1e4, 3.0, -2.0], [5.0, 1e4, -1e4]], 1),
    "neg_inf_inside": ([-INF, 0.0, -INF, 1.0], 0),
    "neg_inf_first": ([[-INF, 2.0, 1.0], [3.0, -INF, -1.0]], 1),
    "dim_of_size_1": ([[[0.5, -1.0, 2.0]], [[4.0, 1e3, -3.0]]], 1),
    "length_9": ([3.0, -1.0, 7.0, 2.0, -800.0, 0.25, 5.0, -2.0, 1.0], 0),
    "0d": (2.0, 0),
}


def _prims_only_executor() -> tx.TorchExecutor:
    executor = tx.TorchExecutor("prims_only")  # forces the decomposition of logcumsumexp
    executor.implementations = {
        k: v for k, v in tx.executor.implementations.items() if k.startswith("prims.")
    }
    return executor


EXECUTORS = {"torch": tx.executor, "prims": _prims_only_executor()}


def _opinfo_samples(dtype: torch.dtype) -> Iterator[tuple[torch.Tensor, int]]:
    (opinfo,) = [o for o in op_db if o.name == "logcumsumexp"]
    torch.manual_seed(0)
    for sample in opinfo.sample_inputs("cpu", dtype):
        yield sample.input, *sample.args


def _value_and_grad(
    fn: Callable, x: torch.Tensor, cotangent: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    (grad,) = torch.autograd.grad(y, x, cotangent.to(y.dtype))
    return y.detach(), grad


def _check(x: torch.Tensor, dim: int, executor: str) -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(t, dim)

    cotangent = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    expected = _value_and_grad(fn, x.double(), cotangent)
    actual = _value_and_grad(thunder.jit(fn, executors=[EXECUTORS[executor]]), x, cotangent)
    assert actual[0].dtype == actual[1].dtype == x.dtype
    torch.testing.assert_close(actual, tuple(t.to(x.dtype) for t in expected), equal_nan=True)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_opinfo_samples(dtype: torch.dtype, executor: str) -> None:
    for x, dim in _opinfo_samples(dtype):
        _check(x, dim, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", EDGE_CASES)
def test_edge_cases(case: str, dtype: torch.dtype, executor: str) -> None:
    values, dim = EDGE_CASES[case]
    _check(torch.tensor(values, dtype=dtype), dim, executor)


def test_eager_float64_edge_cases_are_reproduced_exactly() -> None:
    """Where eager's float64 gradient is NaN (a -inf entry with only -inf before it: the derivative
    of ``log(exp(-inf))`` is 0/0), thunder's is too; everywhere else both are finite and agree."""
    x = torch.tensor([-INF, -INF, 0.0, -INF, 2.0], dtype=torch.float64)
    cotangent = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0], dtype=torch.float64)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(t, 0)

    expected = _value_and_grad(fn, x, cotangent)
    actual = _value_and_grad(thunder.jit(fn), x, cotangent)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert expected[1][2:].isfinite().all()


def test_half_precision_forward() -> None:
    x = torch.tensor([[-300.0, 1.0, 2.5, -0.5], [7.0, 7.0, -7.0, 60.0]], dtype=torch.bfloat16)
    for executor in EXECUTORS.values():
        actual = thunder.jit(lambda t: torch.logcumsumexp(t, 1), executors=[executor])(x)
        torch.testing.assert_close(actual, torch.logcumsumexp(x.double(), 1).to(x.dtype))
