"""The ``triton_norms`` executor: layer-norm and RMS-norm backwards as a Triton kernel.

On the CPU the kernel runs in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``). Gradients
are held to float64's: at most twice eager's distance from them, plus a unit in the last place.
"""

from __future__ import annotations

import copy

import pytest
import torch

import thunder

pytest.importorskip("triton", reason="triton is not installed (the `triton` extra has it)")

from thunder.executors.triton import norm_backward  # noqa: E402


class LlamaRMSNorm(torch.nn.Module):
    """Hugging Face's Llama norm, op for op (thunder-core's transforms/rms_norms.py makes it one symbol)."""

    def __init__(self, size: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


class Block(torch.nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.norm = LlamaRMSNorm(size)
        self.linear = torch.nn.Linear(size, size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(self.norm(x))


def _assert_as_close_as_eager(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> None:
    assert got.dtype == eager.dtype and got.shape == eager.shape
    error, eager_error = ((t.double() - exact).abs().max().item() for t in (got, eager))
    hair = torch.finfo(got.dtype).eps * max(exact.abs().max().item(), 1.0)  # a unit in the last place
    assert error <= 2 * eager_error + hair, (error, eager_error)


def _reference(kind: str, x: torch.Tensor, weight, bias, g: torch.Tensor) -> list:
    """Eager's gradients in ``x``'s dtype and in float64: (eager, exact) per wanted input."""
    results = []
    for dtype in (x.dtype, torch.float64):
        leaves = [t.detach().to(dtype).requires_grad_() for t in (x, weight, bias) if t is not None]
        xs, *params = leaves
        w = params[0] if weight is not None else None
        b = params[-1] if bias is not None else None
        if kind == "layer":
            out = torch.nn.functional.layer_norm(xs, (x.shape[-1],), w, b, 1e-5)
        else:
            out = torch.nn.functional.rms_norm(xs, (x.shape[-1],), w, 1e-6)
        results.append(torch.autograd.grad(out, leaves, g.to(dtype)))
    return list(zip(*results))


def _kernel(kind: str, x: torch.Tensor, weight, bias, g: torch.Tensor) -> list:
    x32 = x.float()
    if kind == "layer":
        mean = x32.mean(-1, keepdim=True)
        rstd = torch.rsqrt(x32.var(-1, unbiased=False, keepdim=True) + 1e-5)
        grads = norm_backward.layer_norm_backward(
            g, x, (x.shape[-1],), mean, rstd, weight, bias, (True, weight is not None, bias is not None)
        )
    else:
        rstd = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
        grads = norm_backward.rms_norm_backward(
            g, x, (x.shape[-1],), rstd, weight, (True, weight is not None)
        )
    return [t for t in grads if t is not None]


def _check_kernel(kind: str, dtype: torch.dtype, shape: tuple, parameters: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype) * 3 + 1
    g = torch.randn(shape, dtype=dtype)
    weight = torch.rand(shape[-1], dtype=dtype) + 0.5 if parameters != "none" else None
    bias = (
        torch.randn(shape[-1], dtype=dtype) if parameters == "weight and bias" and kind == "layer" else None
    )
    got = _kernel(kind, x, weight, bias, g)
    expected = _reference(kind, x, weight, bias, g)
    assert len(got) == len(expected)
    for result, (eager, exact) in zip(got, expected):
        _assert_as_close_as_eager(result, eager, exact)


@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(3, 5, 48), (2, 1)], ids=str)
@pytest.mark.parametrize("parameters", ["weight and bias", "weight", "none"])
def test_kernel_matches_eager_against_float64(
    kind: str, dtype: torch.dtype, shape: tuple, parameters: str
) -> None:
    """48 columns and 1: rows that do not fill a power-of-two block."""
    _check_kernel(kind, dtype, shape, parameters)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_programs_of_several_rows_and_a_shorter_last_one(kind: str) -> None:
    """1100 rows: three rows a program (about four programs per SM), the last program with two."""
    _check_kernel(kind, torch.bfloat16, (1100, 33), "weight and bias")


def test_only_the_wanted_gradients_are_computed() -> None:
    x, g, weight = torch.randn(6, 16), torch.randn(6, 16), torch.rand(16) + 0.5
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    grad_x, grad_weight = norm_backward.rms_norm_backward(g, x, (16,), rstd, weight, (False, True))
    assert grad_x is None and grad_weight is not None
    grad_x, grad_weight = norm_backward.rms_norm_backward(g, x, (16,), rstd, weight, (True, False))
    assert grad_x is not None and grad_weight is None


def test_no_rows_gives_an_empty_input_gradient_and_zero_parameter_gradients() -> None:
    x = torch.randn(0, 8)
    grads = norm_backward.layer_norm_backward(
        x, x, (8,), torch.empty(0, 1), torch.empty(0, 1), torch.ones(8), torch.zeros(8), (True, True, True)
    )
    assert grads[0].shape == (0, 8) and grads[1].tolist() == [0.0] * 8 and grads[2].tolist() == [0.0] * 8


def _backward_text(jitted) -> str:
    return str(thunder.last_backward_traces(jitted)[-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_training_through_the_executor_matches_eager_over_calls(dtype: torch.dtype) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 8)).to(
        dtype
    )
    reference = copy.deepcopy(model).double()
    jitted = thunder.jit(model, executors=["triton_norms"])
    for rows in (5, 5, 9):
        x = torch.randn(rows, 32, dtype=dtype)
        out = jitted(x)
        out.float().square().sum().backward()
        eager_model = copy.deepcopy(model)
        eager_model.zero_grad(set_to_none=True)
        eager_model(x).float().square().sum().backward()
        exact = reference(x.double())
        exact.square().sum().backward()
        for p, e, r in zip(model.parameters(), eager_model.parameters(), reference.parameters()):
            _assert_as_close_as_eager(p.grad, e.grad, r.grad)
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
    assert "layer_norm_backward(" in _backward_text(jitted) and "executors.norms import" in _backward_text(
        jitted
    )


def test_hugging_face_rms_norm_training_through_the_executor_matches_eager() -> None:
    torch.manual_seed(0)
    model = Block(32)
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
    reference = copy.deepcopy(model)
    jitted = thunder.jit(model, executors=["triton_norms"])
    for _ in range(3):
        x = torch.randn(2, 7, 32, requires_grad=True)
        reference_x = x.detach().clone().requires_grad_()
        jitted(x).square().sum().backward()
        reference(reference_x).square().sum().backward()
        torch.testing.assert_close(x.grad, reference_x.grad, rtol=1e-5, atol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5)
    backward = _backward_text(jitted)
    assert "rms_norm_backward(" in backward and "executors.norms import" in backward
    assert "addend=" in backward  # the residual's gradient is added in the kernel (norm_backward_adds.py)


class LayerNormBlock(torch.nn.Module):
    """GPT-2's pre-norm residual: ``x + mlp(ln(x))``."""

    def __init__(self, size: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(size)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(size, 2 * size), torch.nn.GELU(), torch.nn.Linear(2 * size, size)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_residual_blocks_add_their_gradient_in_the_kernel_and_match_eager(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(LayerNormBlock(32), LayerNormBlock(32)).to(dtype)
    exact_model = copy.deepcopy(model).double()
    jitted = thunder.jit(model, executors=["triton_norms"])
    for rows in (6, 6, 10):
        x = torch.randn(2, rows, 32, dtype=dtype, requires_grad=True)
        exact_x = x.detach().double().requires_grad_()
        g = torch.randn(2, rows, 32, dtype=dtype)
        eager_model = copy.deepcopy(model)
        eager_x = x.detach().clone().requires_grad_()
        jitted(x).backward(g)
        eager_model(eager_x).backward(g)
        exact_model(exact_x).backward(g.double())
        _assert_as_close_as_eager(x.grad, eager_x.grad, exact_x.grad)
        for p, e, r in zip(model.parameters(), eager_model.parameters(), exact_model.parameters()):
            _assert_as_close_as_eager(p.grad, e.grad, r.grad)
        model.zero_grad(set_to_none=True)
        exact_model.zero_grad(set_to_none=True)
    assert _backward_text(jitted).count("addend=") == 2


def test_without_an_executor_that_takes_the_addend_the_add_stays() -> None:
    model = LayerNormBlock(16)
    jitted = thunder.jit(model, executors=["torch"])
    x = torch.randn(3, 16, requires_grad=True)
    jitted(x).sum().backward()
    assert "addend" not in _backward_text(jitted)


def test_a_weight_of_another_dtype_is_left_to_the_other_executors() -> None:
    norm = LlamaRMSNorm(16)
    x = torch.randn(4, 16, dtype=torch.bfloat16, requires_grad=True)  # weight float32: refused
    jitted = thunder.jit(norm, executors=["triton_norms"])
    out = jitted(x)
    expected = norm(x)
    torch.testing.assert_close(out, expected)
    got = torch.autograd.grad(out.float().sum(), (x, norm.weight))
    want = torch.autograd.grad(expected.float().sum(), (x, norm.weight))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert "executors.norms import" not in _backward_text(jitted)


def test_it_takes_the_backward_from_a_fusion_executor_listed_first() -> None:
    """``beats_fusion``: after a fusion executor that could fuse the backward's pieces, it still
    claims the symbol (checked on the claims, as nvFuser's regions are on the CPU)."""
    from test_nvfuser_regions import AnyDeviceNvFuser

    from thunder.core.transforms.claim_executors import claim_executors
    from thunder.executors.norms import executor as norms_executor
    from thunder.executors.torchex import executor as torch_executor

    norm = torch.nn.LayerNorm(64).to(torch.bfloat16)
    jitted = thunder.jit(norm, executors=["torch"])
    jitted(torch.randn(4, 8, 64, dtype=torch.bfloat16, requires_grad=True)).sum().backward()
    backward = thunder.last_backward_traces(jitted)[0]
    fusion = AnyDeviceNvFuser("nvfuser_on_cpu_for_norms")
    claimed = claim_executors(backward, [fusion, norms_executor, torch_executor])
    names = [b.symbol.id for b in claimed.bound_symbols]
    assert "triton_norms.layer_norm_backward" in names, claimed
    assert not any(name.startswith("nvfuser_on_cpu_for_norms") for name in names), claimed
