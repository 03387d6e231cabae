"""Which forward values the backward recomputes (the ``rematerialization`` option), against eager.

With the torch executor alone every recomputed operation is a kernel of its own, so by default only
views are recomputed and the backward reads what eager's saves; a fusion executor runs recomputed
elementwise work inside the backward's fused kernels, so there it is recomputed to save memory.
"""

from __future__ import annotations

import pytest
import torch
from test_hf_regions import NvFuserClaimsOnCpu

import thunder
from thunder.core.symbol import BoundSymbol


class RMSNormSwiGLU(torch.nn.Module):
    """A Llama block's MLP half, written as Hugging Face writes it: RMSNorm in float32, then SwiGLU."""

    def __init__(self, width: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.norm_weight = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.gate = torch.nn.Linear(width, hidden, bias=False)
        self.up = torch.nn.Linear(width, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = self.norm_weight * h.to(x.dtype)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def _recomputed(jitted) -> list[BoundSymbol]:
    """The backward's ops that recompute a value the forward made."""
    forward = thunder.last_traces(jitted)[1]
    made = {p.name for b in forward.bound_symbols for p in b.proxy_outputs()}
    backward = thunder.last_backward_traces(jitted)[0]
    return [b for b in backward.bound_symbols if any(p.name in made for p in b.proxy_outputs())]


def _check_against_eager(dtype: torch.dtype, **options) -> thunder.core.pipeline.JittedFunction:
    torch.manual_seed(0)
    model = RMSNormSwiGLU().to(dtype)
    jitted = thunder.jit(model, **options)
    for _ in range(3):  # changing inputs, one compile
        x = torch.randn(4, 16, dtype=dtype, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        model.zero_grad(set_to_none=True)
        expected = model(x_eager)
        expected.sum().backward()
        expected_grads = [p.grad for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        actual = jitted(x)
        actual.sum().backward()
        tolerance = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(actual, expected, **tolerance)
        torch.testing.assert_close(x.grad, x_eager.grad, **tolerance)
        for a, e in zip([p.grad for p in model.parameters()], expected_grads):
            torch.testing.assert_close(a, e, **tolerance)
    assert thunder.cache_misses(jitted) == 1
    return jitted


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_executor_alone_recomputes_only_views(dtype: torch.dtype) -> None:
    jitted = _check_against_eager(dtype, executors=["torch"])
    assert all("view" in b.symbol.tags for b in _recomputed(jitted)), thunder.last_backward_traces(jitted)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_save_memory_recomputes_elementwise_work_unfused(dtype: torch.dtype) -> None:
    jitted = _check_against_eager(dtype, executors=["torch"], rematerialization="save memory")
    recomputed = _recomputed(jitted)
    assert any("elementwise" in b.symbol.tags for b in recomputed), thunder.last_backward_traces(jitted)[0]
    default = _check_against_eager(dtype, executors=["torch"])
    assert (
        thunder.compile_stats(jitted).last_saved_for_backward_bytes
        < thunder.compile_stats(default).last_saved_for_backward_bytes
    )


def test_off_recomputes_nothing() -> None:
    jitted = _check_against_eager(torch.float32, rematerialization="off")
    assert _recomputed(jitted) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_fusion_executor_recomputes_elementwise_work_by_default(dtype: torch.dtype) -> None:
    jitted = _check_against_eager(dtype, executors=[NvFuserClaimsOnCpu()])
    assert any("elementwise" in b.symbol.tags for b in _recomputed(jitted)), thunder.last_backward_traces(
        jitted
    )[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_fusion_executor_after_the_torch_executor_fuses_nothing_so_nothing_is_recomputed(dtype) -> None:
    # executors=["torch"] on a CUDA machine lists nvFuser after torch: torch claims every op first
    jitted = _check_against_eager(dtype, executors=["torch", NvFuserClaimsOnCpu()])
    assert all("view" in b.symbol.tags for b in _recomputed(jitted)), thunder.last_backward_traces(jitted)[0]


def test_a_saved_view_does_not_keep_its_base_alive_through_the_backward() -> None:
    # x @ x.T saves x.T for the backward; recomputing the view lets x's intermediates go at their del
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x @ x.T)
        return (y @ y.T).sum()

    jitted = thunder.jit(fn, executors=["torch"])
    x = torch.randn(8, 8, requires_grad=True)
    jitted(x).backward()
    forward = thunder.last_traces(jitted)[-1]
    saved = forward.output[1] if isinstance(forward.output, tuple) else ()
    producers = {p.name: b for b in forward.bound_symbols for p in b.proxy_outputs()}
    assert not any("view" in producers[p.name].symbol.tags for p in saved if p.name in producers), forward
    expected = x.detach().clone().requires_grad_()
    fn(expected).backward()
    torch.testing.assert_close(x.grad, expected.grad)


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="rematerialization"):
        thunder.jit(lambda x: x, rematerialization="sometimes")


def test_a_backward_that_saves_only_numbers() -> None:
    """``x * n`` with ``n`` a symbolic value saves no tensor for the backward; the min cut had no
    sink and crashed (networkx: node sink not in graph)."""

    def fn(x, n):
        return x * n + n

    jitted = thunder.jit(fn, cache="symbolic values")
    for n in (2, 3):
        x = torch.randn(4, 3, requires_grad=True)
        (grad,) = torch.autograd.grad(jitted(x, n).sum(), x)
        torch.testing.assert_close(grad, torch.full_like(x, float(n)))
    assert thunder.cache_misses(jitted) == 1
