"""Tiny Hugging Face models of every architecture the tests run, built from configs (nothing downloaded).

Shared by the tests that compare thunder with eager on them (``test_hf_models.py``) and that run
fusion region building on their traces (``test_hf_regions.py``). Each builder takes the number of
layers: two for the comparisons, more where depth matters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)

VOCAB = 128


@dataclass(frozen=True)
class HFModel:
    """A tiny model of one architecture and the inputs it takes."""

    name: str
    build: Callable[..., torch.nn.Module]  # (layers=2) -> the model
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


def from_config(config_class: str, model_class: str, attention: str = "sdpa", **options: Any) -> Callable:
    """A builder of a model whose config takes the common option names (decoders, BERT, RoBERTa)."""

    def build(layers: int = 2) -> torch.nn.Module:
        settings: dict[str, Any] = {
            "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": layers,
            "num_attention_heads": 4, "max_position_embeddings": 64, "attn_implementation": attention,
        }  # fmt: skip
        settings.update(options)
        config = getattr(transformers, config_class)(**settings)
        return getattr(transformers, model_class)(config)

    return build


def _gpt2(attention: str) -> Callable:
    def build(layers: int = 2) -> torch.nn.Module:
        config = transformers.GPT2Config(
            n_embd=32, n_layer=layers, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2,
            attn_implementation=attention,
        )  # fmt: skip
        return transformers.GPT2LMHeadModel(config)

    return build


def _t5(layers: int = 2) -> torch.nn.Module:
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=layers, num_heads=4, decoder_start_token_id=0,
        pad_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(config)


def _vit(layers: int = 2) -> torch.nn.Module:
    config = transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_labels=10, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.ViTForImageClassification(config)


def _falcon(layers: int = 2) -> torch.nn.Module:
    config = transformers.FalconConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        attn_implementation="sdpa",
    )
    return transformers.FalconForCausalLM(config)


def _opt(layers: int = 2) -> torch.nn.Module:
    config = transformers.OPTConfig(
        vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=layers, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32, attn_implementation="sdpa",
    )  # fmt: skip
    return transformers.OPTForCausalLM(config)


slow = (pytest.mark.slow,)

MODELS = [
    HFModel("gpt2", _gpt2("sdpa")),
    HFModel("gpt2-eager-attention", _gpt2("eager")),
    HFModel("llama", from_config("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2)),
    HFModel("llama-eager-attention", from_config("LlamaConfig", "LlamaForCausalLM", "eager", num_key_value_heads=2)),
    HFModel("mistral", from_config("MistralConfig", "MistralForCausalLM", num_key_value_heads=2)),
    HFModel("qwen2", from_config("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2)),
    HFModel("phi3", from_config("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0)),
    HFModel("gemma", from_config("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=2, head_dim=8)),
    HFModel("bert", from_config("BertConfig", "BertForMaskedLM"), kind="masked"),
    HFModel("t5", _t5, kind="seq2seq"),
    HFModel("vit", _vit, kind="vision"),
    HFModel("gpt-neox", from_config("GPTNeoXConfig", "GPTNeoXForCausalLM")),
    HFModel("falcon", _falcon),
    HFModel("opt", _opt),
    HFModel("gemma2", from_config("Gemma2Config", "Gemma2ForCausalLM", "eager", num_key_value_heads=2, head_dim=8), marks=slow),
    HFModel("phi", from_config("PhiConfig", "PhiForCausalLM"), marks=slow),
    HFModel("starcoder2", from_config("Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2), marks=slow),
    HFModel("roberta", from_config("RobertaConfig", "RobertaForMaskedLM", "eager"), kind="masked", marks=slow),
    # The default experts implementation ("grouped_mm") calls torch.histc and a transformers custom
    # op, both fallbacks today; "batched_mm" is all native.
    HFModel("mixtral", from_config("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2, num_local_experts=4,
                                num_experts_per_tok=2, experts_implementation="batched_mm"), marks=slow),
]  # fmt: skip
