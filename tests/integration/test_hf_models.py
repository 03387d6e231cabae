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
from typing import Any

import pytest
import torch

import thunder
from thunder.core import fallback

pytest.importorskip("transformers", reason="transformers is not installed (the `test` extra has it)")

from hf_models import MODELS, HFModel, from_config  # noqa: E402  (a helper module of this folder)

ATOL, RTOL = 1e-5, 1e-4  # float32 throughout


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
    model = from_config("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2)().eval()
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
