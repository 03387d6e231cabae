"""The Triton GEMV (``triton/gemv.py``), its executor (``gemv.py``) and the grouping of one-row
linears (``core/transforms/group_linears.py``), against eager PyTorch.

On the CPU the kernel runs in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``), and the
executor is named explicitly; on a CUDA machine it is a default executor and runs compiled.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

pytest.importorskip("triton")

from thunder.executors.triton.gemv import gemv, gemv_config  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EXECUTORS = ["triton_gemv", "torch"]


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual.double() - expected).norm() / expected.norm()).item()


@pytest.mark.parametrize(
    "k, rows, bias, config",
    [
        (64, [16], False, None),
        (100, [5, 7, 3], False, (2, 32, 4)),  # K not a multiple of the step: masked steps
        (256, [8, 9], True, (4, 64, 4)),  # a block of rows past the end of the second weight
        (96, [33], True, (1, 32, 4)),
        (512, [40, 8, 8], True, None),
    ],
)
def test_kernel_matches_float64_reference(k: int, rows: list[int], bias: bool, config) -> None:
    for _ in range(2):  # fresh inputs each time
        x = torch.randn(1, 1, k, device=DEVICE)
        weights = [torch.randn(n, k, device=DEVICE) for n in rows]
        biases = [torch.randn(n, device=DEVICE) for n in rows] if bias else None
        outputs = gemv(x, weights, biases, config)
        for index, (out, w) in enumerate(zip(outputs, weights)):
            expected = F.linear(x.double(), w.double(), None if biases is None else biases[index].double())
            assert out.shape == expected.shape and out.dtype == x.dtype
            assert _relative_error(out, expected) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kernel_half_precision_rounds_once(dtype: torch.dtype) -> None:
    x = torch.randn(1, 128, device=DEVICE, dtype=dtype)
    w = torch.randn(24, 128, device=DEVICE, dtype=dtype)
    (out,) = gemv(x, [w])
    expected = F.linear(x.double(), w.double())
    assert out.dtype == dtype and _relative_error(out, expected) < 1e-2


def test_repeated_launches_with_other_alignments_and_sizes() -> None:
    """After the first call a compiled kernel is launched directly (on CUDA): a misaligned input or
    output, other sizes or dtypes must each get a kernel specialized for them, never a reused one."""
    buffer = torch.randn(4 * 512 + 8, device=DEVICE)
    for start, rows, k, dtype in [
        (0, [40, 8, 8], 512, torch.float32),
        (0, [40, 8, 8], 512, torch.float32),
        (1, [40, 8, 8], 512, torch.float32),  # x not 16-byte aligned
        (0, [41, 7, 9], 512, torch.float32),
        (0, [40, 8, 8], 512, torch.float16),
        (2, [17], 256, torch.float32),
    ]:
        x = (
            buffer[start : start + k].to(dtype).reshape(1, k)
            if dtype != torch.float32
            else buffer[start : start + k]
        )
        weights = [torch.randn(n, k, device=DEVICE, dtype=dtype) for n in rows]
        biases = [torch.randn(n, device=DEVICE, dtype=dtype) for n in rows]
        for out, w, b in zip(gemv(x, weights, biases), weights, biases):
            expected = F.linear(x.double(), w.double(), b.double())
            assert _relative_error(out, expected) < (1e-5 if dtype == torch.float32 else 1e-2)


def test_config_steps_divide_the_reduction() -> None:
    for k, rows in [(2048, 2560), (4096, 28672), (5632, 2048), (14336, 4096), (100, 12), (4096, 128256)]:
        block_n, block_k, warps = gemv_config(k, rows)
        assert block_n in (1, 2) and warps in (4, 8)
        assert k % block_k == 0 or block_k >= min(1024, k)


def test_kernel_refuses_mixed_biases_and_large_groups() -> None:
    x = torch.randn(1, 8, device=DEVICE)
    w = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(ValueError, match="every weight or for none"):
        gemv(x, [w, w], [torch.randn(4, device=DEVICE), None])
    with pytest.raises(ValueError, match="1 to 3 weights"):
        gemv(x, [w] * 4)


class _DecodeBlock(torch.nn.Module):
    """A Llama-like block's projections: q/k/v of one input, gate/up (with bias) of another."""

    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.q = torch.nn.Linear(d, d, bias=False)
        self.k = torch.nn.Linear(d, 16, bias=False)
        self.v = torch.nn.Linear(d, 16, bias=False)
        self.gate = torch.nn.Linear(d, 96)
        self.up = torch.nn.Linear(d, 96)
        self.down = torch.nn.Linear(96, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        mixed = x + q * (k.sum(-1, keepdim=True) + v.mean(-1, keepdim=True))
        return self.down(F.silu(self.gate(mixed)) * self.up(mixed))


def _lines(jitted) -> list[str]:
    return str(thunder.last_traces(jitted)[-1]).splitlines()


def test_decode_block_matches_eager_over_calls_and_groups_projections() -> None:
    torch.manual_seed(0)
    model = _DecodeBlock().to(DEVICE)
    jitted = thunder.jit(model, executors=EXECUTORS)
    with torch.no_grad():
        for shape in [(1, 1, 64), (1, 1, 64), (1, 64), (3, 1, 64), (1, 1, 64)]:
            x = torch.randn(shape, device=DEVICE)
            torch.testing.assert_close(jitted(x), model(x))
            lines = _lines(jitted)
            grouped = [line for line in lines if "gemv_linears(" in line]
            gated = [line for line in lines if "gemv_gated_linears(" in line]
            if x.numel() == 64:  # one row: q/k/v one launch, gate/up and product another, down alone
                assert len(grouped) == 1 and len(gated) == 1, lines
                assert "(q_weight, k_weight, v_weight)" in grouped[0]
                assert "gate_weight, up_weight" in gated[0]
                assert sum("gemv_linear(" in line for line in lines) == 1
            else:  # several rows: cuBLAS's matmuls
                assert not grouped and not gated and not any("gemv_linear(" in line for line in lines)


def test_weights_changed_in_place_between_calls_are_read_again() -> None:
    torch.manual_seed(0)
    model = _DecodeBlock().to(DEVICE)
    jitted = thunder.jit(model, executors=EXECUTORS)
    x = torch.randn(1, 64, device=DEVICE)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(jitted(x), model(x))
            for p in model.parameters():
                p.mul_(1.5).add_(0.01)


def test_non_contiguous_weight_falls_back_to_torch() -> None:
    weight = torch.randn(48, 32, device=DEVICE)
    transposed = torch.randn(32, 48, device=DEVICE).t()  # (48, 32), not contiguous

    def fn(x, a, b):
        return F.linear(x, a), F.linear(x, b)

    jitted = thunder.jit(fn, executors=EXECUTORS)
    x = torch.randn(1, 32, device=DEVICE)
    for actual, expected in zip(jitted(x, weight, transposed), fn(x, weight, transposed)):
        torch.testing.assert_close(actual, expected)


def test_groups_take_at_most_three_and_wait_for_computed_weights() -> None:
    def fn(x, w0, w1, w2, w3, w4):
        a, b = F.linear(x, w0), F.linear(x, w1)
        w5 = w4 * 2  # made after the first group began: its linear starts the next group
        c, d, e = F.linear(x, w5), F.linear(x, w2), F.linear(x, w3)
        f = F.linear(x, w4)  # that group is full
        return a, b, c, d, e, f, F.linear(x.relu(), w0)

    weights = [torch.randn(8, 16, device=DEVICE) for _ in range(5)]
    x = torch.randn(1, 16, device=DEVICE)
    jitted = thunder.jit(fn, executors=EXECUTORS)
    for actual, expected in zip(jitted(x, *weights), fn(x, *weights)):
        torch.testing.assert_close(actual, expected)
    lines = _lines(jitted)
    grouped = [line for line in lines if "gemv_linears(" in line]
    assert len(grouped) == 2 and "(w0, w1)" in grouped[0], lines
    assert ", w2, w3)" in grouped[1]
    assert sum("gemv_linear(" in line for line in lines) == 2  # w4's, and relu(x)'s linear


def test_grouping_needs_an_executor_that_claims_it() -> None:
    model = _DecodeBlock().to(DEVICE)
    jitted = thunder.jit(model, executors=["torch"])
    x = torch.randn(1, 64, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(jitted(x), model(x))
    assert not any("linears" in line for line in _lines(jitted))


def test_training_forward_is_not_grouped_and_gradients_match() -> None:
    torch.manual_seed(0)
    model = _DecodeBlock().to(DEVICE)
    jitted = thunder.jit(model, executors=EXECUTORS)
    x = torch.randn(1, 64, device=DEVICE, requires_grad=True)
    jitted(x).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    model(x).sum().backward()
    for actual, expected in zip(grads, [p.grad for p in model.parameters()] + [x.grad]):
        torch.testing.assert_close(actual, expected)


def test_linears_are_grouped_in_a_trace_with_symbolic_sizes_elsewhere() -> None:
    """A decode step with a growing cache: the cache's length is symbolic from the second compile on,
    the one-row projections are not, and they still run as one launch."""

    def fn(x, wq, wk, cache):
        q, k = F.linear(x, wq), F.linear(x, wk)
        return torch.cat([cache, k[None]], 0).sum(0) + q

    wq, wk = torch.randn(16, 32, device=DEVICE), torch.randn(16, 32, device=DEVICE)
    jitted = thunder.jit(fn, executors=EXECUTORS)
    for length in (3, 4, 6, 9):
        x, cache = torch.randn(1, 32, device=DEVICE), torch.randn(length, 1, 16, device=DEVICE)
        torch.testing.assert_close(jitted(x, wq, wk, cache), fn(x, wq, wk, cache))
    assert thunder.cache_misses(jitted) <= 3  # static, then symbolic
    assert any("gemv_linears(" in line for line in _lines(jitted))
