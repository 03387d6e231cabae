"""``generate()`` on a CUDA device through thunder's default executors, against eager PyTorch.

On the GPU a decode step runs what the CPU tests never reach: nvFuser's regions, the Triton GEMV of
the one-row linears (grouped q/k/v and gate/up), the reinplaced cache writes and CUDA graphs. Tokens
must equal eager's in float32.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import thunder

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

VOCAB = 256


def _config(config_class: type, **extra: Any) -> Any:
    return config_class(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        **extra,
    )  # fmt: skip


MODELS = {
    "llama": lambda: transformers.LlamaForCausalLM(_config(transformers.LlamaConfig)),
    "qwen2": lambda: transformers.Qwen2ForCausalLM(_config(transformers.Qwen2Config)),  # q/k/v with biases
}


def _generate(model: Any, prompt: torch.Tensor, cache: str) -> torch.Tensor:
    # disable_compile: transformers would torch.compile the eager model's forward for a static cache
    return model.generate(
        prompt,
        max_new_tokens=12,
        do_sample=False,
        cache_implementation=cache,
        pad_token_id=0,
        disable_compile=True,
    )


@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["no_graphs", "graphs"])
@pytest.mark.parametrize("cache", ["static", "dynamic"])
@pytest.mark.parametrize("name", list(MODELS))
def test_generate_on_cuda_matches_eager(
    name: str, cache: str, cuda_graphs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thunder.executors import gemv
    from thunder.executors.triton import gemv as triton_gemv

    launches, normed, gated = [], [], []
    run, run_normed, run_gated = gemv._run, gemv._run_normed, triton_gemv.gated_gemv
    monkeypatch.setattr(gemv, "_run", lambda x, w, b: launches.append(len(w)) or run(x, w, b))
    monkeypatch.setattr(
        gemv, "_run_normed", lambda x, n, w, b: normed.append(len(w)) or run_normed(x, n, w, b)
    )
    monkeypatch.setattr(triton_gemv, "gated_gemv", lambda *args: gated.append(1) or run_gated(*args))
    torch.manual_seed(0)
    model = MODELS[name]().cuda().eval()
    fold = cuda_graphs  # the graphed runs also fold the norms into the GEMVs (an option, off by default)
    jitted = thunder.jit(model, cuda_graphs=cuda_graphs, fold_rms_norms=fold)
    for length in (5, 9):
        prompt = torch.randint(3, VOCAB, (1, length), device="cuda", generator=None)
        expected = _generate(model, prompt, cache)
        actual = _generate(jitted, prompt, cache)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    if cache == "static" and "triton_gemv" in [e.name for e in thunder.get_default_executors()]:
        if fold:  # q/k/v and gate/up read a norm's row: the norm is folded into their launch
            assert 3 in normed and 2 in normed, (
                "the decode step ran no grouped q/k/v or gate/up GEMV with its norm"
            )
            assert 1 in launches, "the decode step ran no GEMV for o_proj or down_proj"
        else:
            assert 3 in launches, "the decode step ran no grouped q/k/v GEMV"
            # gate/up of a SiLU-gated MLP (both models here) is one launch with the product inside
            assert gated, "the decode step ran no gated gate/up GEMV"
            assert not normed
