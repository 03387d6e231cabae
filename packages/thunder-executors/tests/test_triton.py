"""The Triton executor's generated kernels against eager PyTorch, forward and backward.

Without CUDA the kernels run in Triton's interpreter on the CPU: ``TRITON_INTERPRET`` must be set
before the first kernel is decorated, so it is set here, at import. With CUDA they run on the GPU.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

import thunder  # noqa: E402
import thunder.torch as ltorch  # noqa: E402
from thunder.core import prims  # noqa: E402

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed (pip install 'thunder[triton]')", allow_module_level=True)

from thunder.executors.triton import executor as triton_executor  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
available, reason = triton_executor.is_available()
if not available:
    pytest.skip(f"the Triton executor is unavailable: {reason}", allow_module_level=True)

DTYPES = [torch.float32, torch.bfloat16]
F = torch.nn.functional


def _gelu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + b, approximate="tanh") * torch.sigmoid(x)


def _elementwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (
        torch.exp(-x.abs()) * torch.tanh(y)
        + torch.sin(x) / (2.0 + torch.cos(y))
        - F.silu(x) * (y.abs() + 0.5).rsqrt().clamp(0, 1)
    )


def _where_mask(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0.1, x * y, -y).relu() + torch.maximum(x, y)


def _convert(x: torch.Tensor) -> torch.Tensor:
    return (x.float() * 3.0).to(x.dtype) + x.float().exp().sum(-1, keepdim=True).to(x.dtype)


def _sum_mean_amax(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1) + x.mean(-1) * x.amax(-1) - x.amin(-1)


def _reduce_dim0(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0) * 0.5 + x.amax(0)


def _var(x: torch.Tensor) -> torch.Tensor:
    return torch.var(x, -1) + torch.var(x, 0, correction=0).sum()


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1) * 2.0


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, -1)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * w


def _cross_entropy(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # spelled as its math: F.cross_entropy on CUDA is one claimed kernel pair, not a fusion region
    return F.nll_loss(F.log_softmax(x, -1), target)


def _strided(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.t(), -1) + y[:, ::2].exp()


ROWS, COLS = 5, 37  # not powers of two: the masks matter

# name -> (function, input factory(dtype), float inputs that require grad)
CASES: dict[str, tuple[Callable, Callable[[torch.dtype], list], bool]] = {
    "elementwise": (_elementwise, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(ROWS, COLS, dtype=dt)], True),
    "broadcast_bias_gelu": (_gelu_bias, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt)], True),
    "where_mask": (_where_mask, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(ROWS, COLS, dtype=dt)], True),
    "convert": (_convert, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "sum_mean_amax": (_sum_mean_amax, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "reduce_dim0": (_reduce_dim0, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "var": (_var, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "softmax": (_softmax, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "log_softmax": (_log_softmax, lambda dt: [_randn(ROWS, COLS, dtype=dt)], True),
    "layer_norm": (_layer_norm, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt), _randn(COLS, dtype=dt)], True),
    "rms_norm": (_rms_norm, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt)], True),
    "cross_entropy": (_cross_entropy, lambda dt: [_randn(ROWS, COLS, dtype=dt), torch.randint(0, COLS, (ROWS,), device=DEVICE)], True),
    "strided_inputs": (_strided, lambda dt: [_randn(COLS, ROWS, dtype=dt), _randn(ROWS, 2 * COLS, dtype=dt)], True),
}  # fmt: skip


def _randn(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


def _assert_close_to_eager(
    actual: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype
) -> None:
    """float32: close to eager. 16-bit: no further from the float64 result than eager is (plus one rounding)."""
    if dtype == torch.float32:
        torch.testing.assert_close(actual, eager, rtol=1e-4, atol=1e-5)
        return
    eager_error = (eager.double() - exact).abs()
    allowed = 4 * eager_error.max() + 2**-6 * exact.abs().clamp(min=1.0)  # two roundings of intermediates
    error = (actual.double() - exact).abs()
    assert bool((error <= allowed).all()), (
        f"max error {error.max().item():.4g}, eager's {eager_error.max().item():.4g}"
    )


def _run_case(name: str, dtype: torch.dtype, executors: list[str]) -> thunder.ThunderModule | Callable:
    fn, make_inputs, differentiable = CASES[name]
    torch.manual_seed(0)
    inputs = make_inputs(dtype)
    leaves = [x.requires_grad_() if x.is_floating_point() and differentiable else x for x in inputs]
    jitted = thunder.jit(fn, executors=executors)
    actual = jitted(*leaves)
    eager = fn(*leaves)
    exact_inputs = [x.detach().double().requires_grad_() if x.is_floating_point() else x for x in leaves]
    exact = fn(*exact_inputs)
    _assert_close_to_eager(actual, eager.detach(), exact.detach(), dtype)

    grad_output = torch.randn_like(eager)
    differentiable_inputs = [x for x in leaves if x.requires_grad]
    actual_grads = torch.autograd.grad(actual, differentiable_inputs, grad_output)
    eager_grads = torch.autograd.grad(eager, differentiable_inputs, grad_output)
    exact_grads = torch.autograd.grad(
        exact, [x for x in exact_inputs if x.requires_grad], grad_output.double()
    )
    for a, e, x in zip(actual_grads, eager_grads, exact_grads):
        _assert_close_to_eager(a, e, x, dtype)
    return jitted


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("name", list(CASES))
def test_generated_kernels_match_eager_forward_and_backward(name: str, dtype: torch.dtype) -> None:
    jitted = _run_case(name, dtype, ["triton"])
    forward = str(thunder.last_traces(jitted)[-1])
    backward = str(thunder.last_backward_traces(jitted)[-1])
    assert "TritonFusion0(" in forward, forward
    assert "TritonFusion0(" in backward, backward
    assert "# t" in forward and "prims." in forward  # the region's prims print as comments


def test_region_prints_with_prims_in_comments() -> None:
    x = torch.randn(4, 8, device=DEVICE)
    jitted = thunder.jit(lambda a: torch.softmax(a, -1), executors=["triton"])
    torch.testing.assert_close(jitted(x), torch.softmax(x, -1))
    trace = str(thunder.last_traces(jitted)[-1])
    assert "= TritonFusion0(a)" in trace
    assert "# t" in trace and "prims.amax" in trace and "prims.exp" in trace


def test_kernels_are_cached_per_layout() -> None:
    fn = lambda a, b: (a * b).exp() + 1.0  # noqa: E731
    jitted = thunder.jit(fn, executors=["triton"])
    a, b = torch.randn(6, 9, device=DEVICE), torch.randn(6, 9, device=DEVICE)
    torch.testing.assert_close(jitted(a, b), fn(a, b))
    transposed = torch.randn(9, 6, device=DEVICE).t()  # same shape, other strides: a second kernel
    torch.testing.assert_close(jitted(transposed, b), fn(transposed, b))
    runner = _runner_of(jitted)
    kernels = [step for step in runner.steps if hasattr(step, "compiled")]
    assert sum(len(k.compiled) for k in kernels) == 2
    jitted(a, b)
    assert sum(len(k.compiled) for k in kernels) == 2


def _runner_of(jitted: Callable) -> Any:
    trace = thunder.last_traces(jitted)[-1]
    fused = [b for b in trace.bound_symbols if b.symbol.name.startswith("TritonFusion")]
    return fused[0].symbol.fn


def test_unsupported_prims_are_left_to_torch() -> None:
    def fn(a: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(a.exp(), 1).gather(1, index) * 2.0

    a, index = torch.randn(3, 5, device=DEVICE), torch.tensor([[0], [2], [4]], device=DEVICE)
    jitted = thunder.jit(fn, executors=["triton"])
    torch.testing.assert_close(jitted(a, index), fn(a, index))
    trace = str(thunder.last_traces(jitted)[-1])
    assert "TritonFusion" in trace and "cumsum" in trace


def test_claims_follow_the_tables() -> None:
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import Trace, tracectx

    trace = Trace()
    with tracectx(trace):
        x = TensorProxy(shape=(4, 8), dtype=torch.float32, device=DEVICE)
        i = TensorProxy(shape=(4, 8), dtype=torch.int64, device=DEVICE)
        column = TensorProxy(shape=(4, 1), dtype=torch.float32, device=DEVICE)
        claimed = [prims.exp(x), prims.div(x, 2.0), prims.sum(x, (1,)), prims.var(x, (1,), correction=1),
                   prims.add(i, 1), prims.reshape(column, (4,)), prims.pow(x, 2.0)]  # fmt: skip
        refused = [prims.div(i, 2), prims.cumsum(x, 1), prims.reshape(x, (8, 4)), prims.sum(column, (1,)),
                   prims.pow(x, 1.7)]  # fmt: skip
    by_output = {b.output.name: b for b in trace.bound_symbols}
    assert all(triton_executor.can_fuse(by_output[p.name]) for p in claimed)
    assert not any(triton_executor.can_fuse(by_output[p.name]) for p in refused)
    assert ltorch is not None


def test_executor_is_registered_and_reports_availability() -> None:
    from thunder.core.executor import get_executor

    assert get_executor("triton") is triton_executor
    assert triton_executor.is_available() == (True, "")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_larger_rows_loop_over_columns(dtype: torch.dtype) -> None:
    x = torch.randn(3, 9000, device=DEVICE, dtype=dtype, requires_grad=True)
    jitted = thunder.jit(_log_softmax, executors=["triton"])
    actual, eager, exact = jitted(x), _log_softmax(x), _log_softmax(x.detach().double())
    _assert_close_to_eager(actual, eager.detach(), exact, dtype)
