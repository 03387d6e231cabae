"""Hugging Face ``transformers`` models through ``thunder.jit``, against eager PyTorch.

Every model is built from a tiny config with random weights (nothing is downloaded). For each one the
logits (and loss) of ``thunder.jit(model)`` match eager's, so do the gradients of every parameter, a
second call with new inputs runs the cached entry, and neither the forward nor the backward
execution trace contains a fallback symbol (a torch operator thunder has no symbol for, run by
PyTorch: ``fallback.<name>`` in the printed trace; see ``thunder/core/fallback.py``).

The models run in eval mode (dropout off) so that eager and thunder compute the same function; the
gradients are still those of training.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

import thunder
from thunder.core import fallback

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)

VOCAB = 128
ATOL, RTOL = 1e-5, 1e-4  # float32 throughout


@dataclass(frozen=True)
class HFModel:
    """A tiny model of one architecture and the inputs it takes."""

    name: str
    build: Callable[[], torch.nn.Module]
    kind: str = "causal"  # "causal", "masked", "seq2seq" or "vision"
    marks: tuple = field(default=())

    def inputs(self, generator: torch.Generator) -> dict[str, torch.Tensor]:
        if self.kind == "vision":
            return {
                "pixel_values": torch.randn(2, 3, 16, 16, generator=generator),
                "labels": torch.randint(0, 10, (2,), generator=generator),
            }
        ids = torch.randint(0, VOCAB, (2, 8), generator=generator)
        if self.kind == "seq2seq":
            decoder_ids = torch.randint(0, VOCAB, (2, 6), generator=generator)
            return {"input_ids": ids, "labels": decoder_ids, "use_cache": False}
        if self.kind == "masked":
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
        return {"input_ids": ids, "labels": ids, "use_cache": False}


def _decoder(config_class: str, model_class: str, attention: str = "sdpa", **options: Any) -> Callable:
    def build() -> torch.nn.Module:
        settings: dict[str, Any] = {
            "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "max_position_embeddings": 64, "attn_implementation": attention,
        }  # fmt: skip
        settings.update(options)
        config = getattr(transformers, config_class)(**settings)
        return getattr(transformers, model_class)(config)

    return build


def _gpt2(attention: str) -> Callable:
    def build() -> torch.nn.Module:
        config = transformers.GPT2Config(
            n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2,
            attn_implementation=attention,
        )  # fmt: skip
        return transformers.GPT2LMHeadModel(config)

    return build


def _bert() -> torch.nn.Module:
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.BertForMaskedLM(config)


def _roberta() -> torch.nn.Module:
    config = transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, attn_implementation="eager",
    )  # fmt: skip
    return transformers.RobertaForMaskedLM(config)


def _t5() -> torch.nn.Module:
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
        pad_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(config)


def _vit() -> torch.nn.Module:
    config = transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_labels=10, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.ViTForImageClassification(config)


def _falcon() -> torch.nn.Module:
    config = transformers.FalconConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        attn_implementation="sdpa",
    )
    return transformers.FalconForCausalLM(config)


def _opt() -> torch.nn.Module:
    config = transformers.OPTConfig(
        vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.OPTForCausalLM(config)


slow = (pytest.mark.slow,)

MODELS = [
    HFModel("gpt2", _gpt2("sdpa")),
    HFModel("gpt2-eager-attention", _gpt2("eager")),
    HFModel("llama", _decoder("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2)),
    HFModel("llama-eager-attention", _decoder("LlamaConfig", "LlamaForCausalLM", "eager", num_key_value_heads=2)),
    HFModel("mistral", _decoder("MistralConfig", "MistralForCausalLM", num_key_value_heads=2)),
    HFModel("qwen2", _decoder("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2)),
    HFModel("phi3", _decoder("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0)),
    HFModel("gemma", _decoder("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=2, head_dim=8)),
    HFModel("bert", _bert, kind="masked"),
    HFModel("t5", _t5, kind="seq2seq"),
    HFModel("vit", _vit, kind="vision"),
    HFModel("gpt-neox", _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM")),
    HFModel("falcon", _falcon),
    HFModel("opt", _opt),
    HFModel("gemma2", _decoder("Gemma2Config", "Gemma2ForCausalLM", "eager", num_key_value_heads=2, head_dim=8), marks=slow),
    HFModel("phi", _decoder("PhiConfig", "PhiForCausalLM"), marks=slow),
    HFModel("starcoder2", _decoder("Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2), marks=slow),
    HFModel("roberta", _roberta, kind="masked", marks=slow),
    # The default experts implementation ("grouped_mm") calls torch.histc and a transformers custom
    # op, both fallbacks today; "batched_mm" is all native.
    HFModel("mixtral", _decoder("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2, num_local_experts=4,
                                num_experts_per_tok=2, experts_implementation="batched_mm"), marks=slow),
]  # fmt: skip


def fallback_names(trace: thunder.Trace) -> list[str]:
    """The fallback symbols a trace calls: recorded ones, and any ``fallback.`` call in its printed program."""
    names = [bound.symbol.name for bound in fallback.fallback_calls(trace)]
    printed = [line for line in str(trace).splitlines() if "fallback." in line.split("#")[0]]
    return names + printed


def execution_fallbacks(jitted: Any) -> list[str]:
    """Fallbacks in the forward and backward execution traces of the last compile."""
    found = fallback_names(thunder.last_traces(jitted)[-1])
    backward = thunder.last_backward_traces(jitted)
    if backward:
        found += fallback_names(backward[-1])
    return found


def run_and_grads(
    model: torch.nn.Module, inputs: dict, cotangent_seed: int
) -> tuple[Any, dict[str, torch.Tensor]]:
    """Forward, then backward of the loss plus a random projection of the logits; the parameters' grads."""
    model.zero_grad(set_to_none=True)
    output = model(**inputs)
    generator = torch.Generator().manual_seed(cotangent_seed)
    cotangent = torch.randn(output.logits.shape, generator=generator)
    (output.loss + (output.logits * cotangent).sum()).backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return output, grads


def check_model(spec: HFModel) -> thunder.ThunderModule:
    torch.manual_seed(0)
    model = spec.build().eval()
    eager_model = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    inputs = spec.inputs(generator)

    jitted = thunder.jit(model)
    actual, actual_grads = run_and_grads(jitted, inputs, cotangent_seed=2)
    expected, expected_grads = run_and_grads(eager_model, inputs, cotangent_seed=2)

    assert type(actual) is type(expected)  # the ModelOutput class, not a plain dict
    torch.testing.assert_close(actual.logits, expected.logits, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=RTOL)
    assert actual_grads.keys() == expected_grads.keys()
    for name, grad in expected_grads.items():
        torch.testing.assert_close(
            actual_grads[name], grad, atol=ATOL, rtol=RTOL, msg=lambda m: f"{name}: {m}"
        )
    assert execution_fallbacks(jitted) == []

    # ViT sets config.problem_type on its first call: the epilogue replays that write, and the next
    # call (which reads the new value) traces once more; from then on the entry is reused
    jitted(**spec.inputs(generator))
    misses = thunder.cache_misses(jitted)
    new_inputs = spec.inputs(generator)  # same shapes, new values: the cached entry runs
    torch.testing.assert_close(
        jitted(**new_inputs).logits, eager_model(**new_inputs).logits, atol=ATOL, rtol=RTOL
    )
    assert thunder.cache_misses(jitted) == misses and thunder.cache_hits(jitted) >= 1
    return jitted


@pytest.mark.parametrize("spec", [pytest.param(m, id=m.name, marks=m.marks) for m in MODELS])
def test_hf_model_matches_eager_without_fallback(spec: HFModel) -> None:
    check_model(spec)


@torch.library.custom_op("thunder_hf_test::scale", mutates_args=())
def _scale(x: torch.Tensor) -> torch.Tensor:  # an operator thunder can never have a symbol for
    return x * 2.0


@_scale.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


_scale.register_autograd(lambda ctx, grad: grad * 2.0)


class _ScaledMLP(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scale(self.inner(x))


def test_fallback_is_detected() -> None:
    """The no-fallback assertion above can fail: a model with an unknown operator has a fallback."""
    torch.manual_seed(0)
    model = _decoder("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2)().eval()
    layer = model.model.layers[0]
    layer.mlp = _ScaledMLP(layer.mlp)
    eager_model = copy.deepcopy(model)
    inputs = MODELS[2].inputs(torch.Generator().manual_seed(1))
    jitted = thunder.jit(model)
    actual, actual_grads = run_and_grads(jitted, inputs, cotangent_seed=2)
    expected, expected_grads = run_and_grads(eager_model, inputs, cotangent_seed=2)
    torch.testing.assert_close(actual.logits, expected.logits, atol=ATOL, rtol=RTOL)
    for name, grad in expected_grads.items():
        torch.testing.assert_close(actual_grads[name], grad, atol=ATOL, rtol=RTOL)
    found = execution_fallbacks(jitted)
    assert any("CustomOpDef" in name for name in found), (
        found
    )  # fallback.torch__library_custom_ops_CustomOpDef


LITGPT_CONFIGS = [
    "pythia-14m",
    "Llama-2-7b-hf",
    "Mistral-7B-v0.1",
    "phi-2",
    "Gemma-2b",
    "Qwen2.5-0.5B",
    "falcon-7b",
]


@pytest.mark.parametrize("name", LITGPT_CONFIGS)
def test_litgpt_gpt_matches_eager_without_fallback(name: str) -> None:
    """LitGPT's ``GPT`` for named configs, shrunk to 2 layers (skipped where litgpt is not installed)."""
    litgpt_model = pytest.importorskip("litgpt.model", reason="litgpt is not installed")
    from litgpt.config import Config

    full = Config.from_name(name)
    groups = 4 if full.n_query_groups == full.n_head else 2  # keeps multi-query/grouped attention grouped
    config = Config.from_name(
        name, n_layer=2, n_embd=64, n_head=4, head_size=16, n_query_groups=groups, intermediate_size=128,
        vocab_size=256, padded_vocab_size=256, block_size=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = litgpt_model.GPT(config)
    eager_model = copy.deepcopy(model)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    jitted = thunder.jit(model)
    actual, expected = jitted(ids), eager_model(ids)
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=RTOL)
    cotangent = torch.randn(actual.shape, generator=torch.Generator().manual_seed(2))
    (actual * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    for (name_, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=ATOL, rtol=RTOL, msg=lambda m: f"{name_}: {m}")
    assert execution_fallbacks(jitted) == []
