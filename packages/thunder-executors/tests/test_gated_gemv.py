"""A gated MLP's ``silu(gate(x)) * up(x)`` of one row as one launch: the Triton kernel
(``triton/gemv.py``'s ``gated_gemv``), its executor (``gemv.py``) and the transform that folds the
ops into ``gated_linears`` (``core/transforms/fold_gated_linears.py``), against eager PyTorch.

On the CPU the kernel runs in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``), which
truncates float32 to 16-bit floats where a GPU rounds to nearest: 16-bit results are compared within
a few units in the last place there.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

pytest.importorskip("triton")

from thunder.executors.triton.gemv import gated_gemv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EXECUTORS = ["triton_gemv", "torch"]


def _eager(x, wg, wu, bg=None, bu=None):
    return F.silu(F.linear(x, wg, bg)) * F.linear(x, wu, bu)


@pytest.mark.parametrize("k, n, bias", [(64, 48, False), (100, 33, True), (512, 96, False), (256, 130, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_kernel_matches_eager(k: int, n: int, bias: bool, dtype: torch.dtype) -> None:
    for _ in range(2):  # the second launch is the direct one on CUDA
        x = torch.randn(1, 1, k, device=DEVICE, dtype=dtype)
        wg, wu = (torch.randn(n, k, device=DEVICE, dtype=dtype) / k**0.5 for _ in range(2))
        bg, bu = (torch.randn(n, device=DEVICE, dtype=dtype) if bias else None for _ in range(2))
        out = gated_gemv(x, wg, wu, bg, bu)
        expected = _eager(
            x.double(), wg.double(), wu.double(), *(b.double() if bias else None for b in (bg, bu))
        )
        assert out.shape == (1, 1, n) and out.dtype == dtype
        tolerance = 1e-5 if dtype == torch.float32 else 3e-2
        torch.testing.assert_close(out.double(), expected, rtol=tolerance, atol=tolerance)


class _GatedMLP(torch.nn.Module):
    def __init__(self, width: int = 32, hidden: int = 48, bias: bool = False, swapped: bool = False):
        super().__init__()
        self.gate_proj = torch.nn.Linear(width, hidden, bias=bias)
        self.up_proj = torch.nn.Linear(width, hidden, bias=bias)
        self.down_proj = torch.nn.Linear(hidden, width, bias=bias)
        self.swapped = swapped

    def forward(self, x):
        gate, up = F.silu(self.gate_proj(x)), self.up_proj(x)
        return self.down_proj(up * gate if self.swapped else gate * up)


@pytest.mark.parametrize("bias, swapped", [(False, False), (True, False), (False, True)])
def test_a_decode_steps_mlp_is_one_launch_and_answers_as_eager(bias: bool, swapped: bool) -> None:
    mlp = _GatedMLP(bias=bias, swapped=swapped).to(DEVICE)
    jitted = thunder.jit(mlp, executors=EXECUTORS)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(1, 1, 32, device=DEVICE)
            torch.testing.assert_close(jitted(x), mlp(x), rtol=1e-5, atol=1e-5)
    trace = str(thunder.last_traces(jitted)[-1])
    assert "gemv_gated_linears(" in trace and "silu" not in trace, trace


@pytest.mark.parametrize("case", ["gate read again", "another activation", "two rows", "torch first"])
def test_what_is_not_a_lone_gated_product_stays_as_written(case: str) -> None:
    mlp = _GatedMLP().to(DEVICE)

    def fn(x):
        gate, up = mlp.gate_proj(x), mlp.up_proj(x)
        activated = F.gelu(gate) if case == "another activation" else F.silu(gate)
        out = mlp.down_proj(activated * up)
        return (out, gate) if case == "gate read again" else out

    executors = ["torch", "triton_gemv"] if case == "torch first" else EXECUTORS
    jitted = thunder.jit(fn, executors=executors)
    x = torch.randn(1, 2 if case == "two rows" else 1, 32, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(jitted(x), fn(x), rtol=1e-5, atol=1e-5)
    assert "gated_linears" not in str(thunder.last_traces(jitted)[-1])
