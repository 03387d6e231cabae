"""Hugging Face models of realistic width trained on the GPU under thunder's default executors, against eager.

CI has no GPU: these tests skip there (with the reason) and run on the GPU machine, where the
default executors include a fusion executor (nvFuser, else Triton) and region building meets the
real programs. Each model (width 1024, two layers, SDPA attention) runs one step in float32,
whose loss and gradients must equal eager's, and three steps of fused AdamW in bf16, whose losses
must follow eager's.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import thunder

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="trains on a CUDA device"),
]

WIDTH, LAYERS, VOCAB, BATCH, SEQ, STEPS = 1024, 2, 8192, 2, 512, 3
_DECODER = dict(
    vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2816, num_hidden_layers=LAYERS,
    num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=SEQ, attn_implementation="sdpa",
)  # fmt: skip
ARCHITECTURES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 64}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 64}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", None),  # its own option names, below
}


def build(name: str, dtype: torch.dtype) -> torch.nn.Module:
    config_class, model_class, options = ARCHITECTURES[name]
    if options is None:
        settings = dict(vocab_size=VOCAB, n_embd=WIDTH, n_layer=LAYERS, n_head=16, n_positions=SEQ)
        # GPT-2's configs drop out 10% by default; eager and thunder draw different masks
        settings.update(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        settings["attn_implementation"] = "sdpa"
    else:
        settings = {**_DECODER, **options}
    config = getattr(transformers, config_class)(**settings)
    torch.manual_seed(0)
    with torch.device("cuda"):
        return getattr(transformers, model_class)(config).to(dtype)


def _ids() -> torch.Tensor:
    return torch.randint(
        0, VOCAB, (BATCH, SEQ), device="cuda", generator=torch.Generator("cuda").manual_seed(1)
    )


def _regions(jitted: Any) -> list[str]:
    return [b.symbol.name for b in thunder.last_traces(jitted)[-1].bound_symbols if "Fusion" in b.symbol.name]


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_hf_model_gradients_equal_eager_in_float32(name: str) -> None:
    """One step in float32 (TF32 off): the loss and every parameter's gradient match eager's."""
    model = build(name, torch.float32)
    eager_model = copy.deepcopy(model)
    ids = _ids()
    jitted = thunder.jit(model)
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        loss = jitted(input_ids=ids, labels=ids).loss
        loss.backward()
        expected_loss = eager_model(input_ids=ids, labels=ids).loss
        expected_loss.backward()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    assert _regions(jitted), "no fusion region ran: the default executors did not fuse on this machine"
    torch.testing.assert_close(loss, expected_loss, atol=1e-4, rtol=1e-4)
    for (parameter, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        error = (p.grad - q.grad).norm() / q.grad.norm()
        assert error < 1e-3, f"{parameter}: gradient differs from eager's by {error:.2e} (relative norm)"


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_hf_model_trains_in_bf16_like_eager(name: str) -> None:
    """Three steps of fused AdamW in bf16: the losses follow eager's (Adam amplifies bf16 rounding of
    small gradients into different updates, so later steps are compared loosely)."""
    model = build(name, torch.bfloat16)
    eager_model = copy.deepcopy(model)
    ids = _ids()
    jitted = thunder.jit(model)
    losses = _train(model, jitted, ids)
    expected = _train(eager_model, eager_model, ids)
    assert _regions(jitted), "no fusion region ran: the default executors did not fuse on this machine"
    assert abs(losses[0] - expected[0]) < 0.02, (losses, expected)
    for actual, wanted in zip(losses[1:], expected[1:]):
        assert abs(actual - wanted) / wanted < 0.05, (losses, expected)


def _train(model: torch.nn.Module, run: Any, ids: torch.Tensor) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
