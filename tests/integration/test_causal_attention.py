"""Constant causal masks become ``is_causal=True`` (core/transforms/causal_attention.py), against eager.

transformers builds its causal mask from ``arange`` comparisons when a compiler traces it; the mask
depends on no input, so thunder computes it at compile time and, when it is the lower triangle,
calls attention with ``is_causal=True`` on the unrepeated key and value heads. Masks that an input
reaches, or that are not causal, stay as they are. Results equal eager's either way.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder


def _attention_calls(jitted: object) -> list:
    trace = thunder.last_traces(jitted)[-1]
    return [b for b in trace.bound_symbols if "attention" in b.symbol.name]


def _causal_mask(length: int) -> torch.Tensor:
    positions = torch.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None]


def masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_causal_mask(q.shape[-2]))


def grouped_and_masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, heads, s, d = k.shape
    groups = q.shape[1] // heads
    k, v = (
        t[:, :, None, :, :].expand(b, heads, groups, s, d).reshape(b, heads * groups, s, d) for t in (k, v)
    )
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_causal_mask(s))


def _inputs(kv_heads: int = 4) -> list[torch.Tensor]:
    shapes = [(2, 4, 6, 8), (2, kv_heads, 6, 8), (2, kv_heads, 6, 8)]
    return [torch.randn(shape, dtype=torch.float64, requires_grad=True) for shape in shapes]


@pytest.mark.parametrize(("fn", "kv_heads"), [(masked, 4), (grouped_and_masked, 2)])
def test_a_constant_causal_mask_runs_as_is_causal_with_eager_results(fn, kv_heads: int) -> None:
    jitted = thunder.jit(fn)
    for _ in range(2):  # a second call reuses the entry
        inputs = _inputs(kv_heads)
        actual, expected = jitted(*inputs), fn(*inputs)
        torch.testing.assert_close(actual, expected)
        cotangent = torch.randn_like(expected)
        grads = torch.autograd.grad(actual, inputs, cotangent)
        torch.testing.assert_close(grads, torch.autograd.grad(expected, inputs, cotangent))
    assert thunder.cache_misses(jitted) == 1
    (call,) = _attention_calls(jitted)
    assert call.symbol.name == "attention_with_lse" and call.args[3] is True  # is_causal, no mask
    assert call.args[1].shape[1] == kv_heads  # the key's heads as given, not repeated


def test_a_mask_from_an_input_is_left_alone() -> None:
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    inputs = [*_inputs(), _causal_mask(6)]
    jitted = thunder.jit(fn)
    torch.testing.assert_close(jitted(*inputs), fn(*inputs))
    assert all(call.symbol.name != "attention_with_lse" for call in _attention_calls(jitted))


def test_a_constant_mask_that_is_not_causal_is_left_alone() -> None:
    def fn(q, k, v):
        positions = torch.arange(q.shape[-2])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=positions[None, :] >= positions[:, None])

    inputs = _inputs()
    jitted = thunder.jit(fn)
    torch.testing.assert_close(jitted(*inputs), fn(*inputs))
    assert all(call.symbol.name != "attention_with_lse" for call in _attention_calls(jitted))


def test_hf_llama_attention_runs_causal_on_grouped_heads() -> None:
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (the `test` extra has it)"
    )
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    eager_model = copy.deepcopy(model)
    ids = torch.randint(0, 128, (2, 16))
    jitted = thunder.jit(model)
    loss = jitted(input_ids=ids, labels=ids).loss
    expected = eager_model(input_ids=ids, labels=ids).loss
    torch.testing.assert_close(loss, expected)
    loss.backward()
    expected.backward()
    for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
    calls = _attention_calls(jitted)
    assert len(calls) == 2 and all(c.symbol.name == "attention_with_lse" for c in calls)
    assert all(c.args[1].shape[1] == 2 and c.args[3] is True for c in calls)


def test_without_gradients_the_replaced_call_runs_too() -> None:
    """The inference path prints and runs the replaced torch-level call itself."""
    inputs = [t.detach() for t in _inputs(2)]
    jitted = thunder.jit(grouped_and_masked)
    with torch.no_grad():
        torch.testing.assert_close(jitted(*inputs), grouped_and_masked(*inputs))
    (call,) = _attention_calls(jitted)  # torch's own SDPA, called causal on the grouped heads
    assert (
        call.kwargs["is_causal"] is True
        and call.kwargs["enable_gqa"] is True
        and "attn_mask" not in call.kwargs
    )
    assert call.args[1].shape[1] == 2
