"""Decode-step attention rewrites against eager PyTorch: query groups as rows over unrepeated key/value
heads (``core/transforms/query_groups.py``) and boolean masks made additive once
(``core/transforms/attention_masks.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


def repeat_kv(t: torch.Tensor, groups: int) -> torch.Tensor:
    batch, heads, length, width = t.shape
    return (
        t[:, :, None, :, :]
        .expand(batch, heads, groups, length, width)
        .reshape(batch, heads * groups, length, width)
    )


def decode_layers(q, k, v, position, layers: int = 3, is_causal: bool = False):
    """``layers`` grouped-query attentions of one query row, masked to the cache up to ``position``."""
    mask = (torch.arange(k.shape[2]) <= position)[None, None, None, :]
    out = q
    for _ in range(layers):
        groups = q.shape[1] // k.shape[1]
        out = F.scaled_dot_product_attention(
            out,
            repeat_kv(k, groups),
            repeat_kv(v, groups),
            attn_mask=None if is_causal else mask,
            is_causal=is_causal,
        )
    return out


def _trace(jitted) -> str:
    return str(thunder.last_traces(jitted)[-1])


@pytest.mark.parametrize("heads, kv_heads", [(8, 2), (4, 4), (6, 3)])
def test_decode_attention_matches_eager_over_calls(heads: int, kv_heads: int) -> None:
    jitted = thunder.jit(decode_layers)
    for position in (0, 5, 15, 3):
        q = torch.randn(2, heads, 1, 16)
        k, v = torch.randn(2, kv_heads, 16, 16), torch.randn(2, kv_heads, 16, 16)
        torch.testing.assert_close(jitted(q, k, v, position), decode_layers(q, k, v, position))
    trace = _trace(jitted)
    assert "expand" not in trace  # the cache is read unrepeated
    assert trace.count("torch.where(") == 1  # the mask is made additive once for the three layers
    assert trace.count("scaled_dot_product_attention(") == 3


def test_fully_masked_row_gives_eagers_result() -> None:
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, repeat_kv(k, 2), repeat_kv(v, 2), attn_mask=mask)

    q, k, v = torch.randn(1, 4, 1, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    mask = torch.zeros(1, 1, 1, 6, dtype=torch.bool)
    torch.testing.assert_close(thunder.jit(fn)(q, k, v, mask), fn(q, k, v, mask), equal_nan=True)


def test_causal_one_row_attention_is_left_alone() -> None:
    # with one row, is_causal masks by position: row 0 sees key 0 only; folding would change that
    jitted = thunder.jit(decode_layers)
    q, k, v = torch.randn(1, 4, 1, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    torch.testing.assert_close(jitted(q, k, v, 3, 1, True), decode_layers(q, k, v, 3, 1, True))
    assert "expand" in _trace(jitted)


def test_per_head_mask_and_several_rows_keep_the_repeats() -> None:
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, repeat_kv(k, 2), repeat_kv(v, 2), attn_mask=mask)

    k, v = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    for q, mask in [
        (torch.randn(1, 4, 1, 8), torch.rand(1, 4, 1, 6) > 0.3),  # a mask per head
        (torch.randn(1, 4, 3, 8), torch.rand(1, 1, 3, 6) > 0.3),  # three query rows
    ]:
        mask[..., 0] = True
        jitted = thunder.jit(fn)
        torch.testing.assert_close(jitted(q, k, v, mask), fn(q, k, v, mask))
        assert "expand" in _trace(jitted)


def test_gradients_through_folded_attention_match_eager() -> None:
    q = torch.randn(1, 4, 1, 8, requires_grad=True)
    k = torch.randn(1, 2, 6, 8, requires_grad=True)
    v = torch.randn(1, 2, 6, 8, requires_grad=True)
    jitted = thunder.jit(decode_layers)
    actual = torch.autograd.grad(jitted(q, k, v, 4, 2).sum(), (q, k, v))
    expected = torch.autograd.grad(decode_layers(q, k, v, 4, 2).sum(), (q, k, v))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
