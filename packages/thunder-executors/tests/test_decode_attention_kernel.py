"""A decode step's attention as Triton kernels (``triton/decode_attention.py``), claimed by the
``triton_gemv`` executor (``gemv.py``), against eager PyTorch.

On the CPU the kernels run in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``) and the
executor is named explicitly; on a CUDA machine it is a default executor and runs compiled.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import thunder

pytest.importorskip("triton")

from thunder.executors.triton.decode_attention import CHUNK, decode_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EXECUTORS = ["triton_gemv", "torch"]


def _cache_mask(batch: int, length: int, positions: list[int], dtype: torch.dtype) -> torch.Tensor:
    """Additive: 0 up to each sequence's position, -inf after (the cache not written yet)."""
    filled = torch.arange(length, device=DEVICE)[None, :] <= torch.tensor(positions, device=DEVICE)[:, None]
    return torch.where(filled, 0.0, float("-inf")).to(dtype)[:, None, None, :]


def _reference(q, k, v, mask, scale):
    scores = (q.double() @ k.double().transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores + mask.double()
    return torch.softmax(scores, -1) @ v.double()


@pytest.mark.parametrize(
    "batch, heads, rows, width, length, mask_batch",
    [
        (1, 2, 1, 16, 1, 0),  # one cache position
        (1, 4, 8, 64, 192, 1),  # TinyLlama's groups over a short cache
        (2, 2, 4, 32, 70, 2),  # a mask per sequence
        (1, 2, 7, 16, CHUNK + 1, 1),  # two chunks: partials combined
        (2, 1, 3, 16, 4 * CHUNK + 37, 2),  # eight chunks (a power of two), the last ones masked
        (1, 3, 16, 128, 100, 0),  # no mask
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_matches_float64_reference(batch, heads, rows, width, length, mask_batch, dtype) -> None:
    for call in range(2):  # other values and positions the second time
        q = torch.randn(batch, heads, rows, width, device=DEVICE, dtype=dtype)
        k = torch.randn(batch, heads, length, width, device=DEVICE, dtype=dtype)
        v = torch.randn(batch, heads, length, width, device=DEVICE, dtype=dtype)
        positions = [(length * (2 + b + call)) // 5 for b in range(max(mask_batch, 1))]
        mask = _cache_mask(mask_batch, length, positions, dtype) if mask_batch else None
        scale = 1.0 / math.sqrt(width) * (1.5 if call else 1.0)
        out = decode_attention(q, k, v, mask, scale)
        expected = _reference(q, k, v, mask, scale)
        assert out.shape == q.shape and out.dtype == dtype and out.is_contiguous()
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.double(), expected, rtol=tolerance, atol=tolerance)


def test_strided_inputs_are_read_where_they_are() -> None:
    """A cache slot of a larger buffer and a query transposed from (B, rows, H, D): strides, no copies."""
    buffer = torch.randn(1, 2, 300, 32, device=DEVICE)
    k, v = buffer[:, :, 50:250], torch.randn(1, 200, 2, 32, device=DEVICE).transpose(1, 2)
    q = torch.randn(1, 3, 2, 32, device=DEVICE).transpose(1, 2)
    mask = _cache_mask(1, 200, [120], torch.float32)
    expected = _reference(q, k, v, mask, 0.3)
    torch.testing.assert_close(decode_attention(q, k, v, mask, 0.3).double(), expected, rtol=1e-5, atol=1e-5)


def _decode_step(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_executor_claims_a_decode_steps_attention(dtype: torch.dtype) -> None:
    jitted = thunder.jit(_decode_step, executors=EXECUTORS)
    length = 96
    for position in (40, 41, 90):
        q = torch.randn(2, 4, 1, 64, device=DEVICE, dtype=dtype)
        k = torch.randn(2, 4, length, 64, device=DEVICE, dtype=dtype)
        v = torch.randn(2, 4, length, 64, device=DEVICE, dtype=dtype)
        mask = _cache_mask(2, length, [position, position - 7], dtype)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(
            jitted(q, k, v, mask), _decode_step(q, k, v, mask), rtol=tolerance, atol=tolerance
        )
    assert thunder.cache_misses(jitted) == 1
    assert "decode_sdpa" in str(thunder.last_traces(jitted)[-1])


def test_grouped_query_heads_become_rows_of_one_launch() -> None:
    """enable_gqa: eight query heads over two key/value heads are four rows per head (query_groups.py)."""

    def step(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    jitted = thunder.jit(step, executors=EXECUTORS)
    q = torch.randn(1, 8, 1, 32, device=DEVICE)
    k, v = torch.randn(1, 2, 50, 32, device=DEVICE), torch.randn(1, 2, 50, 32, device=DEVICE)
    mask = _cache_mask(1, 50, [30], torch.float32)
    torch.testing.assert_close(jitted(q, k, v, mask), step(q, k, v, mask), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "case",
    ["causal", "odd width", "too many rows", "a mask per row"],
)
def test_what_the_kernel_does_not_take_runs_as_before(case: str) -> None:
    rows, width, length = {"too many rows": 80}.get(case, 1), {"odd width": 48}.get(case, 32), 40
    q = torch.randn(1, 2, rows, width, device=DEVICE)
    k, v = torch.randn(1, 2, length, width, device=DEVICE), torch.randn(1, 2, length, width, device=DEVICE)
    mask = _cache_mask(1, length, [20], torch.float32)
    if case == "a mask per row":
        q = torch.randn(1, 2, 3, width, device=DEVICE)
        mask = torch.randn(1, 1, 3, length, device=DEVICE)
    causal = case == "causal"

    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask, is_causal=causal)

    jitted = thunder.jit(fn, executors=EXECUTORS)
    torch.testing.assert_close(jitted(q, k, v, mask), fn(q, k, v, mask), rtol=1e-5, atol=1e-5)
    assert "decode_" not in str(thunder.last_traces(jitted)[-1])


def test_a_boolean_cache_mask_answers_as_eager() -> None:
    """A boolean mask is made additive first (core/transforms/attention_masks.py), then claimed."""
    jitted = thunder.jit(_decode_step, executors=EXECUTORS)
    for position in (10, 33):
        q, k, v = (torch.randn(1, 2, n, 32, device=DEVICE) for n in (1, 40, 40))
        mask = _cache_mask(1, 40, [position], torch.float32) == 0
        torch.testing.assert_close(jitted(q, k, v, mask), _decode_step(q, k, v, mask), rtol=1e-5, atol=1e-5)
