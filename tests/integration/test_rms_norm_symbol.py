"""Hugging Face's RMS norm, written op for op, is differentiated as one symbol (core/transforms/rms_norms.py).

Each case calls one jitted module several times with new inputs and compares its output and
gradients with eager's. On the CPU the backward symbol runs its decomposition, which rounds where
eager's autograd rounds; on CUDA with a fusion executor first, PyTorch's fused kernel runs it.
"""

from __future__ import annotations

import copy

import pytest
import torch

import thunder


class LlamaRMSNorm(torch.nn.Module):
    """Hugging Face's ``LlamaRMSNorm.forward``, as transformers writes it."""

    def __init__(self, size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class Block(torch.nn.Module):
    """A residual connection around a normed linear, as in a decoder layer."""

    def __init__(self, size: int):
        super().__init__()
        self.norm = LlamaRMSNorm(size)
        self.linear = torch.nn.Linear(size, size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(self.norm(x))


class VarianceToo(LlamaRMSNorm):
    """A norm whose variance is also returned: its ops stay as written."""

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        normalized = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * normalized.to(hidden_states.dtype), variance


_TOLERANCE = {torch.float32: {}, torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2}}


def _randomized(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    module = module.to(dtype)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.uniform_(0.5, 1.5)
    return module


def _grads(module: torch.nn.Module, output: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> list:
    wanted = [t for t in (x, *module.parameters()) if t.requires_grad]
    return list(torch.autograd.grad(output, wanted, g))


def _check_calls(
    module: torch.nn.Module, dtype: torch.dtype, x_requires_grad: bool = True
) -> thunder.ThunderModule:
    jitted = thunder.jit(module)
    for call in range(3):
        x = (torch.randn(2, 5 + call % 2, 32, dtype=dtype) * (call + 1)).requires_grad_(x_requires_grad)
        g = torch.randn(x.shape, dtype=dtype)
        out, expected = jitted(x), module(x)
        torch.testing.assert_close(out, expected, **_TOLERANCE[dtype])
        for got, want in zip(_grads(module, out, x, g), _grads(module, expected, x, g)):
            torch.testing.assert_close(got, want, **_TOLERANCE[dtype])
    return jitted


def _differentiated_as_one_symbol(jitted: thunder.ThunderModule) -> bool:
    forward = thunder.last_traces(jitted)
    return any("rms_norm_with_rstd" in str(t) for t in forward) and "RMS norms as one symbol" in "".join(
        str(t) for t in forward
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_llama_norm_matches_eager_over_calls_and_is_one_symbol(dtype: torch.dtype) -> None:
    jitted = _check_calls(_randomized(LlamaRMSNorm(32), dtype), dtype)
    assert _differentiated_as_one_symbol(jitted)
    backward = str(thunder.last_backward_traces(jitted)[0])
    assert "rms_norm_backward" in backward and "rsqrt" not in backward  # rstd is read, not recomputed


def test_a_float64_input_is_normalized_in_float32_as_the_user_wrote() -> None:
    """``hidden_states.to(torch.float32)`` of a float64 input: eager computes the norm in float32; so
    must the symbol (a float64 computation would be a different, if closer, answer)."""
    module = _randomized(LlamaRMSNorm(32), torch.float64)
    jitted = thunder.jit(module)
    for _ in range(2):
        x = torch.randn(3, 32, dtype=torch.float64, requires_grad=True)
        g = torch.randn(3, 32, dtype=torch.float64)
        out, expected = jitted(x), module(x)
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        for got, want in zip(_grads(module, out, x, g), _grads(module, expected, x, g)):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
            assert got.dtype == want.dtype
    assert _differentiated_as_one_symbol(jitted)


def test_products_that_are_no_norm_differentiate_as_before() -> None:
    """Every multiplication is asked whether it ends a norm: 0-dim operands and results among them
    (a scalar times a tensor, two scalars) raised IndexError once."""

    def products(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a * b).sum() * c + (c * c) * b.mean()

    jitted = thunder.jit(products)
    for size in (3, 4):
        inputs = [torch.randn(()), torch.randn(size), torch.randn(())]
        a, b, c = (t.requires_grad_() for t in inputs)
        out, expected = jitted(a, b, c), products(a, b, c)
        torch.testing.assert_close(out, expected)
        for got, want in zip(torch.autograd.grad(out, (a, b, c)), torch.autograd.grad(expected, (a, b, c))):
            torch.testing.assert_close(got, want)


def test_norm_inside_a_residual_block_matches_eager() -> None:
    jitted = _check_calls(_randomized(Block(32), torch.float32), torch.float32)
    assert _differentiated_as_one_symbol(jitted)


def test_only_the_weight_or_only_the_input_requires_grad() -> None:
    _check_calls(_randomized(LlamaRMSNorm(32), torch.float32), torch.float32, x_requires_grad=False)
    frozen = _randomized(LlamaRMSNorm(32), torch.float32)
    frozen.weight.requires_grad_(False)
    _check_calls(frozen, torch.float32)


def test_a_norm_whose_variance_is_read_elsewhere_keeps_its_ops() -> None:
    module = _randomized(VarianceToo(32), torch.float32)
    jitted = thunder.jit(module)
    for _ in range(2):
        x = torch.randn(3, 32, requires_grad=True)
        g = torch.randn(3, 32)
        (out, variance), (expected, expected_variance) = jitted(x), module(x)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(variance, expected_variance)
        got = torch.autograd.grad((out, variance), (x, module.weight), (g, torch.ones_like(variance)))
        want = torch.autograd.grad(
            (expected, expected_variance), (x, module.weight), (g, torch.ones_like(variance))
        )
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
    assert not _differentiated_as_one_symbol(jitted)


def test_f_rms_norm_matches_eager_with_and_without_weight() -> None:
    def normed(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (16,), weight, 1e-6) * 2

    jitted = thunder.jit(normed)
    for with_weight in (True, True, False):
        x = torch.randn(4, 16, requires_grad=True)
        weight = torch.rand(16, requires_grad=True) + 0.5 if with_weight else None
        g = torch.randn(4, 16)
        out, expected = jitted(x, weight), normed(x, weight)
        torch.testing.assert_close(out, expected)
        inputs = (x,) if weight is None else (x, weight)
        for a, b in zip(torch.autograd.grad(out, inputs, g), torch.autograd.grad(expected, inputs, g)):
            torch.testing.assert_close(a, b)


def _whole_step_of(module: torch.nn.Module, optimizer: torch.optim.Optimizer):
    def step(x: torch.Tensor) -> torch.Tensor:
        loss = module(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


def test_a_whole_step_with_backward_inside_differentiates_the_norm_as_one_symbol() -> None:
    module = _randomized(Block(32), torch.float32)
    reference = copy.deepcopy(module)
    jitted = thunder.jit(_whole_step_of(module, torch.optim.AdamW(module.parameters(), lr=0.01)))
    eager = _whole_step_of(reference, torch.optim.AdamW(reference.parameters(), lr=0.01))
    for _ in range(4):
        x = torch.randn(3, 5, 32)
        torch.testing.assert_close(jitted(x), eager(x).detach())
        for p, q in zip(module.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    assert any("rms_norm_with_rstd" in str(t) for t in thunder.last_traces(jitted))


def test_a_norm_value_read_after_an_inner_backward_is_still_computed() -> None:
    """The program so far becomes one symbol at ``loss.backward()``; what the program reads later of
    the norm's ops (here its variance) must still exist."""
    norm = _randomized(LlamaRMSNorm(16), torch.float32)
    reference = copy.deepcopy(norm)

    def step_of(module: LlamaRMSNorm):
        def step(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = x.to(torch.float32)
            variance = h.pow(2).mean(-1, keepdim=True)
            row = module.weight * (h * torch.rsqrt(variance + module.variance_epsilon)).to(x.dtype)
            row.square().sum().backward()
            return row.detach(), variance * 2

        return step

    jitted, eager = thunder.jit(step_of(norm)), step_of(reference)
    for _ in range(2):
        x = torch.randn(4, 16)
        for got, want in zip(jitted(x), eager(x)):
            torch.testing.assert_close(got, want)
        torch.testing.assert_close(norm.weight.grad, reference.weight.grad)
    assert any("rms_norm_with_rstd" in str(t) for t in thunder.last_traces(jitted))


def _assert_as_close_as_eager(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> None:
    """``got`` is at most twice as far from float64's ``exact`` as eager's result is (plus a hair)."""
    error, eager_error = ((t.double() - exact).abs().max().item() for t in (got, eager))
    assert error <= 2 * eager_error + 1e-3 * exact.abs().max().item(), (error, eager_error)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="PyTorch's fused RMS-norm backward is CUDA-only")
def test_on_cuda_pytorchs_fused_backward_runs_it_beside_the_fusion_executor() -> None:
    """bf16 results of 256-wide sums differ from eager's by a unit in the last place here and there
    (the kernel rounds once, eager's autograd after each op; the matmuls' own orders): both are
    measured against float64's."""
    module = _randomized(Block(256), torch.bfloat16).cuda()
    exact_module = copy.deepcopy(module).double()
    jitted = thunder.jit(module)
    for _ in range(3):
        x = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn_like(x)
        exact_x = x.detach().double().requires_grad_()
        out, expected, exact = jitted(x), module(x), exact_module(exact_x)
        _assert_as_close_as_eager(out, expected, exact)
        exact_grads = _grads(exact_module, exact, exact_x, g.double())
        for got, want, truth in zip(_grads(module, out, x, g), _grads(module, expected, x, g), exact_grads):
            _assert_as_close_as_eager(got, want, truth)
    backward = str(thunder.last_backward_traces(jitted)[-1])
    assert "rms_norm_backward(" in backward, backward
