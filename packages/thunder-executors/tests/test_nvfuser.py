"""The nvFuser executor against eager PyTorch, forward and backward (CUDA with nvFuser only)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder
from thunder.executors.nvfuser import executor as nvfuser_executor

available, reason = nvfuser_executor.is_available()
if not available:
    print(f"skipping the nvFuser tests: {reason}")
    pytest.skip(f"the nvFuser executor is unavailable: {reason}", allow_module_level=True)

DEVICE = "cuda"
DTYPES = [torch.float32, torch.bfloat16]
F = torch.nn.functional
ROWS, COLS = 16, 129


def _randn(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


CASES: dict[str, tuple[Callable, Callable[[torch.dtype], list]]] = {
    "bias_gelu": (lambda x, b: F.gelu(x + b, approximate="tanh"), lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt)]),
    "elementwise": (lambda x, y: torch.exp(-x.abs()) * torch.tanh(y) + torch.where(x > 0, x, -y), lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(ROWS, COLS, dtype=dt)]),
    "reductions": (lambda x: x.sum(-1) + x.amax(-1) * x.mean(-1) + torch.var(x, -1) + x.sum(0).sum(), lambda dt: [_randn(ROWS, COLS, dtype=dt)]),
    "softmax": (lambda x: torch.softmax(x, -1), lambda dt: [_randn(ROWS, COLS, dtype=dt)]),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), lambda dt: [_randn(ROWS, COLS, dtype=dt)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (COLS,), w, b), lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt), _randn(COLS, dtype=dt)]),
    "rms_norm": (lambda x, w: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w, lambda dt: [_randn(ROWS, COLS, dtype=dt), _randn(COLS, dtype=dt)]),
    # spelled as its math: F.cross_entropy on CUDA is one claimed kernel pair (the Triton kernels)
    "cross_entropy": (lambda x, t: F.nll_loss(F.log_softmax(x, -1), t), lambda dt: [_randn(ROWS, COLS, dtype=dt), torch.randint(0, COLS, (ROWS,), device=DEVICE)]),
    # a rotary embedding: two slices, a negation and a cat (pad and slice in the backward)
    "rotary": (lambda x, c, s: x * c + torch.cat((-x[..., COLS // 2:], x[..., : COLS // 2]), -1) * s,
               lambda dt: [_randn(2, ROWS, COLS - 1, dtype=dt), _randn(ROWS, COLS - 1, dtype=dt), _randn(ROWS, COLS - 1, dtype=dt)]),
    "transposed_input": (lambda x, y: torch.softmax(x.t(), -1) * y, lambda dt: [_randn(COLS, ROWS, dtype=dt), _randn(ROWS, COLS, dtype=dt)]),
}  # fmt: skip


def _assert_close_to_eager(
    actual: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype
) -> None:
    if dtype == torch.float32:
        torch.testing.assert_close(actual, eager, rtol=1e-4, atol=1e-5)
        return
    eager_error = (eager.double() - exact).abs()
    allowed = 4 * eager_error.max() + 2**-6 * exact.abs().clamp(min=1.0)
    error = (actual.double() - exact).abs()
    assert bool((error <= allowed).all()), (
        f"max error {error.max().item():.4g}, eager's {eager_error.max().item():.4g}"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("name", list(CASES))
def test_fusions_match_eager_forward_and_backward(name: str, dtype: torch.dtype) -> None:
    fn, make_inputs = CASES[name]
    torch.manual_seed(0)
    leaves = [x.requires_grad_() if x.is_floating_point() else x for x in make_inputs(dtype)]
    jitted = thunder.jit(fn, executors=["nvfuser"])
    actual, eager = jitted(*leaves), fn(*leaves)
    exact_inputs = [x.detach().double().requires_grad_() if x.is_floating_point() else x for x in leaves]
    exact = fn(*exact_inputs)
    _assert_close_to_eager(actual, eager.detach(), exact.detach(), dtype)
    grad = torch.randn_like(eager)
    inputs = [x for x in leaves if x.requires_grad]
    for a, e, x in zip(
        torch.autograd.grad(actual, inputs, grad),
        torch.autograd.grad(eager, inputs, grad),
        torch.autograd.grad(exact, [x for x in exact_inputs if x.requires_grad], grad.double()),
    ):
        _assert_close_to_eager(a, e, x, dtype)
    for trace in (thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]):
        # or PyTorch's RMS-norm backward, which runs beside nvFuser (torch_kernels.py: beats_fusion)
        assert "nvFusion0(" in str(trace) or "= rms_norm_backward(" in str(trace), trace
        for region in (b for b in trace.bound_symbols if b.symbol.name.startswith("nvFusion")):
            # a region that failed in nvFuser would have run on torch (core/fusion_fallback.py)
            assert getattr(region.symbol.fn, "error", None) is None, region.symbol.fn.error


def test_rotary_embedding_is_one_region_forward_and_backward() -> None:
    fn, make_inputs = CASES["rotary"]
    x, cos, sin = make_inputs(torch.bfloat16)
    x.requires_grad_()
    jitted = thunder.jit(fn, executors=["nvfuser"])
    jitted(x, cos, sin).sum().backward()
    for trace in (thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]):
        called = [b.symbol.name for b in trace.bound_symbols if b.symbol.name not in ("del", "return")]
        assert called.count("nvFusion0") == 1 and not any(name.startswith("nvFusion1") for name in called), (
            str(trace)
        )
        assert not {"slice_prim", "cat", "pad"} & set(called), str(trace)


def test_definitions_are_cached_per_layout() -> None:
    fn = lambda a, b: (a * b).exp() + 1.0  # noqa: E731
    jitted = thunder.jit(fn, executors=["nvfuser"])
    a, b = _randn(8, 16, dtype=torch.float32), _randn(8, 16, dtype=torch.float32)
    torch.testing.assert_close(jitted(a, b), fn(a, b))
    transposed = _randn(16, 8, dtype=torch.float32).t()
    torch.testing.assert_close(jitted(transposed, b), fn(transposed, b))
    jitted(a, b)
    trace = thunder.last_traces(jitted)[-1]
    runner = next(b for b in trace.bound_symbols if b.symbol.name == "nvFusion0").symbol.fn
    assert len(runner.definitions) == 2


def test_mlp_training_trace_shows_nvfusion_regions_with_prims() -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(128, 10)
    ).to(DEVICE)
    jitted = thunder.jit(model, executors=["nvfuser"])
    x = torch.randn(8, 784, device=DEVICE)
    jitted(x).sum().backward()
    forward = str(thunder.last_traces(jitted)[-1])
    assert "nvFusion0(" in forward and "# t" in forward and "prims." in forward


def test_low_rank_outputs_beside_a_softmax_are_exact_whatever_memory_held() -> None:
    """A region returning ``~mask`` (the causal mask a training step saves) beside a softmax of
    higher rank gives exactly eager's values, also when the allocator hands out blocks that held other
    data (NaNs here); see ``side_outputs`` in ``nvfuser/stage_groups.py``."""

    def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = ~mask
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), -1), hidden

    jfn = thunder.jit(masked_softmax, executors=["nvfuser"])
    scores = _randn(2, 4, 16, 16, dtype=torch.float32)
    mask = torch.ones(16, 16, dtype=torch.bool, device=DEVICE).tril()
    expected = masked_softmax(scores, mask)
    for _ in range(5):
        junk = [
            torch.full((n,), float("nan"), device=DEVICE) for n in (64, 256, 1024, 4096) for _ in range(8)
        ]
        del junk
        probabilities, hidden = jfn(scores, mask)
        assert torch.equal(hidden, expected[1])
        assert torch.equal(hidden.view(torch.uint8), expected[1].view(torch.uint8))  # bytes 0 and 1 only
        torch.testing.assert_close(probabilities, expected[0])
    assert "nvFusion0(" in str(thunder.last_traces(jfn)[-1])
