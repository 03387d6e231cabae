"""Hugging Face GPT-2 and Llama (tiny random-weight configs, nothing downloaded) against eager PyTorch.

Ops thunder lacks go to Inductor pieces with a recorded reason; forward and backward must still
match eager. The default tests run those pieces eagerly in place of Inductor (whose C++ compiles
take seconds each on CPU); the slow ones use Inductor itself.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from thunder.dynamo import SplitReasonType, ThunderCompiler

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)


def gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=32, bos_token_id=1, eos_token_id=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def check_against_eager(make_model: Any) -> ThunderCompiler:
    torch.manual_seed(0)
    model = make_model()
    ids = torch.randint(0, 64, (2, 8))
    backend = ThunderCompiler()
    compiled = torch.compile(model, backend=backend)
    actual = compiled(ids, labels=ids)
    actual.loss.backward()
    actual_grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    expected = model(ids, labels=ids)
    expected.loss.backward()
    torch.testing.assert_close(actual.logits, expected.logits)
    torch.testing.assert_close(actual.loss, expected.loss)
    for name, p in model.named_parameters():
        torch.testing.assert_close(actual_grads[name], p.grad, msg=name)
    assert any(info.thunder_compiled_fns for info in backend.subgraph_infos)
    for info in backend.subgraph_infos:  # every Inductor piece says why it is not thunder's
        assert not [r for r in info.split_reasons if r.reason_type is SplitReasonType.THUNDER_FAILED]
        inductor_pieces = [
            n for n, _ in info.split_graph_module.named_children() if n.startswith("inductor_")
        ]
        assert not inductor_pieces or info.split_reasons
    return backend


@pytest.fixture
def eager_for_inductor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "torch._inductor.compile_fx.compile_fx", lambda graph_module, *args, **kwargs: graph_module.forward
    )


@pytest.mark.parametrize("make_model", [gpt2, llama], ids=["gpt2", "llama"])
def test_hf_model_matches_eager(needs_executor: None, eager_for_inductor: None, make_model: Any) -> None:
    check_against_eager(make_model)


@pytest.mark.slow
@pytest.mark.parametrize("make_model", [gpt2, llama], ids=["gpt2", "llama"])
def test_hf_model_with_inductor_matches_eager(needs_executor: None, make_model: Any) -> None:
    check_against_eager(make_model)
