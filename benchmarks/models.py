"""A table of Hugging Face ``transformers`` models through ``thunder.jit``: correctness and speed.

Each model is built from a config with random weights (nothing is downloaded). Per model: whether
the forward logits and the parameters' gradients match eager, how many fallback symbols (torch
operators run by PyTorch) the forward and backward execution traces call, the first call's time
(trace + compile + run, forward and backward) and, on cache hits, the forward call and the training
step (forward + backward) against eager.

    python benchmarks/models.py                              # CPU, tiny configs (seconds per model)
    python benchmarks/models.py --device cuda --size small   # GPU, larger configs
    python benchmarks/models.py --models gpt2 llama          # a subset
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import transformers

import thunder
from thunder.core import fallback

# size -> (hidden, intermediate, layers, heads, vocab, batch, sequence, image size)
SIZES = {
    "tiny": (32, 64, 2, 4, 128, 2, 8, 16),
    "small": (512, 1408, 4, 8, 8192, 4, 256, 224),
}


@dataclass
class Row:
    name: str
    forward: str = "-"
    backward: str = "-"
    fallbacks: str = "-"
    first_call_s: float = float("nan")
    thunder_ms: float = float("nan")
    eager_ms: float = float("nan")
    thunder_step_ms: float = float("nan")
    eager_step_ms: float = float("nan")
    error: str = ""


def _decoder(config_name: str, model_name: str, size: tuple, **options: Any) -> torch.nn.Module:
    hidden, intermediate, layers, heads, vocab = size[:5]
    settings: dict[str, Any] = {
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "max_position_embeddings": 2 * size[6], "attn_implementation": "sdpa",
    }  # fmt: skip
    settings.update(options)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**settings))


def _builders(size: tuple) -> dict[str, tuple[Callable[[], torch.nn.Module], str]]:
    hidden, intermediate, layers, heads, vocab, _, seq, image = size
    kv = max(1, heads // 2)
    head_dim = hidden // heads
    t = transformers
    return {
        "gpt2": (lambda: t.GPT2LMHeadModel(t.GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=vocab,
                 n_positions=2 * seq, attn_implementation="sdpa")), "causal"),
        "llama": (lambda: _decoder("LlamaConfig", "LlamaForCausalLM", size, num_key_value_heads=kv), "causal"),
        "mistral": (lambda: _decoder("MistralConfig", "MistralForCausalLM", size, num_key_value_heads=kv), "causal"),
        "qwen2": (lambda: _decoder("Qwen2Config", "Qwen2ForCausalLM", size, num_key_value_heads=kv), "causal"),
        "phi3": (lambda: _decoder("Phi3Config", "Phi3ForCausalLM", size, num_key_value_heads=kv, pad_token_id=0),
                 "causal"),
        "gemma": (lambda: _decoder("GemmaConfig", "GemmaForCausalLM", size, num_key_value_heads=kv,
                                   head_dim=head_dim), "causal"),
        "gemma2": (lambda: _decoder("Gemma2Config", "Gemma2ForCausalLM", size, num_key_value_heads=kv,
                                    head_dim=head_dim, attn_implementation="eager"), "causal"),
        "gpt-neox": (lambda: _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM", size), "causal"),
        "phi": (lambda: _decoder("PhiConfig", "PhiForCausalLM", size), "causal"),
        "starcoder2": (lambda: _decoder("Starcoder2Config", "Starcoder2ForCausalLM", size, num_key_value_heads=kv),
                       "causal"),
        "mixtral": (lambda: _decoder("MixtralConfig", "MixtralForCausalLM", size, num_key_value_heads=kv,
                                     num_local_experts=4, num_experts_per_tok=2, experts_implementation="batched_mm"),
                    "causal"),
        "falcon": (lambda: t.FalconForCausalLM(t.FalconConfig(vocab_size=vocab, hidden_size=hidden,
                   num_hidden_layers=layers, num_attention_heads=heads, attn_implementation="sdpa")), "causal"),
        "opt": (lambda: t.OPTForCausalLM(t.OPTConfig(vocab_size=vocab, hidden_size=hidden, ffn_dim=intermediate,
                num_hidden_layers=layers, num_attention_heads=heads, max_position_embeddings=2 * seq,
                word_embed_proj_dim=hidden, attn_implementation="sdpa")), "causal"),
        "bert": (lambda: t.BertForMaskedLM(t.BertConfig(vocab_size=vocab, hidden_size=hidden,
                 intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
                 max_position_embeddings=2 * seq, attn_implementation="sdpa")), "masked"),
        "roberta": (lambda: t.RobertaForMaskedLM(t.RobertaConfig(vocab_size=vocab, hidden_size=hidden,
                    intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
                    max_position_embeddings=2 * seq + 2, attn_implementation="sdpa")), "masked"),
        "t5": (lambda: t.T5ForConditionalGeneration(t.T5Config(vocab_size=vocab, d_model=hidden, d_kv=head_dim,
               d_ff=intermediate, num_layers=layers, num_heads=heads, decoder_start_token_id=0, pad_token_id=0,
               attn_implementation="eager")), "seq2seq"),
        "vit": (lambda: t.ViTForImageClassification(t.ViTConfig(image_size=image, patch_size=image // 4 or 4,
                num_channels=3, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_labels=10, attn_implementation="sdpa")), "vision"),
    }  # fmt: skip


def _inputs(kind: str, size: tuple, device: str) -> dict[str, Any]:
    vocab, batch, seq, image = size[4:]
    if kind == "vision":
        return {
            "pixel_values": torch.randn(batch, 3, image, image, device=device),
            "labels": torch.randint(0, 10, (batch,), device=device),
        }
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    if kind == "seq2seq":
        return {
            "input_ids": ids,
            "labels": torch.randint(0, vocab, (batch, seq // 2), device=device),
            "use_cache": False,
        }
    if kind == "masked":
        return {"input_ids": ids, "labels": ids}
    return {"input_ids": ids, "labels": ids, "use_cache": False}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _step(model: Any, inputs: dict) -> Any:
    model.zero_grad(set_to_none=True)
    output = model(**inputs)
    output.loss.backward()
    return output


def _median_ms(fn: Callable[[], Any], device: str, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _close(a: torch.Tensor, b: torch.Tensor, tolerance: float) -> bool:
    return torch.allclose(a, b, atol=tolerance, rtol=10 * tolerance)


def _fallbacks(jitted: Any) -> int:
    traces = [thunder.last_traces(jitted)[-1], *thunder.last_backward_traces(jitted)[-1:]]
    return sum(len(fallback.fallback_calls(trace)) for trace in traces)


def measure(
    name: str, build: Callable[[], torch.nn.Module], kind: str, size: tuple, device: str, repeat: int
) -> Row:
    row = Row(name)
    torch.manual_seed(0)
    model = build().to(device).eval()  # eval: dropout off, so thunder and eager compute the same function
    eager_model = copy.deepcopy(model)
    inputs = _inputs(kind, size, device)
    tolerance = 1e-5 if device == "cpu" else 1e-3  # TF32/fused kernels on the GPU
    jitted = thunder.jit(model)
    try:
        _sync(device)
        start = time.perf_counter()
        actual = _step(jitted, inputs)
        _sync(device)
        row.first_call_s = time.perf_counter() - start
    except Exception as error:  # noqa: BLE001 -- a table row, not a crash
        row.forward, row.error = "FAIL", f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        traceback.print_exc(limit=-3)
        return row
    actual_grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    expected = _step(eager_model, inputs)
    expected_grads = {n: p.grad for n, p in eager_model.named_parameters() if p.grad is not None}
    row.forward = "pass" if _close(actual.logits, expected.logits, tolerance) else "FAIL"
    grads_match = actual_grads.keys() == expected_grads.keys() and all(
        _close(actual_grads[n], g, tolerance) for n, g in expected_grads.items()
    )
    row.backward = "pass" if grads_match else "FAIL"
    row.fallbacks = str(_fallbacks(jitted))
    with torch.no_grad():  # forward calls: inference
        row.eager_ms = _median_ms(lambda: eager_model(**inputs), device, repeat)
        row.thunder_ms = _median_ms(lambda: jitted(**inputs), device, repeat)
    row.eager_step_ms = _median_ms(lambda: _step(eager_model, inputs), device, repeat)
    row.thunder_step_ms = _median_ms(lambda: _step(jitted, inputs), device, repeat)
    return row


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'model':<12} {'fwd':>4} {'bwd':>4} {'fallbacks':>9} {'first call s':>12} "
        f"{'fwd ms thunder':>14} {'eager':>8} {'ratio':>6} {'fwd+bwd ms thunder':>18} {'eager':>8} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.name:<12} {r.forward:>4} {r.backward:>4} {r.fallbacks:>9} {r.first_call_s:>12.2f} "
            f"{r.thunder_ms:>14.2f} {r.eager_ms:>8.2f} {r.thunder_ms / r.eager_ms:>6.2f} "
            f"{r.thunder_step_ms:>18.2f} {r.eager_step_ms:>8.2f} {r.thunder_step_ms / r.eager_step_ms:>6.2f}"
            + (f"  {r.error}" if r.error else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--size", default=None, choices=sorted(SIZES), help="default: tiny on CPU, small on CUDA"
    )
    parser.add_argument("--models", nargs="*", default=None, help="a subset of the models (default: all)")
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per measurement (median)")
    args = parser.parse_args()
    size = SIZES[args.size or ("tiny" if args.device == "cpu" else "small")]
    transformers.logging.set_verbosity_error()
    builders = _builders(size)
    names = args.models or list(builders)
    rows = []
    for name in names:
        build, kind = builders[name]
        rows.append(measure(name, build, kind, size, args.device, args.repeat))
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"\nthunder.jit on Hugging Face transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{device_name}, size {args.size or ('tiny' if args.device == 'cpu' else 'small')}, float32")  # fmt: skip
    print_table(rows)


if __name__ == "__main__":
    main()
