"""Training steps of Hugging Face models: eager, eager + Liger-Kernel, torch.compile and thunder, one table.

Workloads (transformers models built from configs, random bf16 weights and tokens, no network):
- ``llama``: ``LlamaForCausalLM`` shaped like TinyLlama-1.1B (22 layers, width 2048, 32/4 heads,
  MLP 5632, vocabulary 32000, SDPA attention), batch 4 x 2048;
- ``qwen2``: ``Qwen2ForCausalLM`` of the same shape (its attention projections carry biases).

A step is ``model(input_ids=ids, labels=ids).loss.backward()`` then fused AdamW, as users train.
Systems: ``eager``, ``liger`` (eager with Liger-Kernel's Triton RMSNorm, rotary, SwiGLU and fused
linear cross-entropy, applied last: it patches transformers' classes), ``torch.compile``,
``thunder`` (default executors), ``thunder-torch`` (``executors=["torch"]``) and ``thunder-step``
(``thunder.jit`` of the whole step, ``run.train_step``: the optimizer's update inside the program,
the same fused AdamW). Columns as in ``run.py``; the first steps (``--warmup``) include each
system's compile.

    python benchmarks/hf_training.py                              # both workloads, all systems
    python benchmarks/hf_training.py --workloads llama --systems eager,thunder --profile
    python benchmarks/hf_training.py --device cpu --size tiny     # a smoke run on a CPU
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Callable

import torch
import transformers
from run import KERNEL_PROFILES, Row, _print_table, _profile, _time, print_kernel_categories, train_step

import thunder

SYSTEMS = ("eager", "torch.compile", "thunder", "thunder-torch", "thunder-step", "liger")
SHAPES = {
    "full": dict(layers=22, d=2048, heads=32, kv_heads=4, mlp=5632, vocab=32000, batch=4, seq=2048),
    "tiny": dict(layers=2, d=64, heads=4, kv_heads=2, mlp=128, vocab=256, batch=2, seq=32),
}
_CONFIGS = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def build(workload: str, shape: dict, device: str, dtype: torch.dtype) -> torch.nn.Module:
    config_class, model_class = _CONFIGS[workload]
    config = getattr(transformers, config_class)(
        vocab_size=shape["vocab"], hidden_size=shape["d"], intermediate_size=shape["mlp"],
        num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], max_position_embeddings=shape["seq"],
        attn_implementation="sdpa", use_cache=False,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device(device):
        return getattr(transformers, model_class)(config).to(dtype)


def _apply_liger(workload: str, model: torch.nn.Module) -> None:
    import liger_kernel.transformers as liger

    patch = {"llama": liger.apply_liger_kernel_to_llama, "qwen2": liger.apply_liger_kernel_to_qwen2}[workload]
    patch(
        rope=True,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=True,
        model=model,
    )


def _step_of(
    system: str, workload: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> Callable:
    """``system``'s training step on token ids: ``thunder-step`` jits the whole step, optimizer included;
    the other systems compile the model (``_runner``) and step the optimizer outside."""
    if system == "thunder-step":
        return thunder.jit(train_step(lambda ids: model(input_ids=ids, labels=ids).loss, optimizer))
    run = _runner(system, workload, model)
    return train_step(lambda ids: run(input_ids=ids, labels=ids).loss, optimizer)


def _runner(system: str, workload: str, model: torch.nn.Module) -> Callable:
    if system in ("eager", "liger"):
        if system == "liger":
            _apply_liger(workload, model)
        return model
    if system == "torch.compile":
        return torch.compile(model)
    return thunder.jit(model, executors=["torch"] if system == "thunder-torch" else None)


def rows_of(workload: str, shape: dict, args: argparse.Namespace) -> list[Row]:
    dtype = getattr(torch, args.dtype)
    ids = torch.randint(0, shape["vocab"], (shape["batch"], shape["seq"]), device=args.device)
    tokens = shape["batch"] * shape["seq"]
    rows = []
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    for system in sorted(systems, key=lambda s: s == "liger"):  # Liger patches classes: last
        model = build(workload, shape, args.device, dtype)
        parameters = sum(p.numel() for p in model.parameters())
        flops_per_token = 6 * parameters + 12 * shape["layers"] * shape["seq"] * shape["d"]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=args.device == "cuda")
        try:
            run = _step_of(system, workload, model, optimizer)
        except ImportError as error:
            print(f"{workload} {system}: skipped ({error})")
            continue

        def step(run: Callable = run) -> None:
            run(ids)

        try:
            ms, first_s, peak = _time(step, args.device, args.warmup, args.steps)
        except Exception as error:  # a system that fails is a row saying so, not the end of the table
            print(f"{workload} {system}: FAILED {type(error).__name__}: {str(error)[:300]}")
            continue
        tokens_per_s = tokens / (ms / 1000)
        rows.append(
            Row(workload, system, ms, first_s, peak, tokens_per_s, flops_per_token * tokens_per_s / 1e12)
        )
        print(f"{workload} {system}: {ms:.1f} ms/step, first {args.warmup} steps {first_s:.1f} s", flush=True)
        if args.profile and system in args.profile.split(","):
            _profile(f"hf_{workload}_{system}", step, args, key=(workload, system))
        del model, optimizer, run, step
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--size", choices=sorted(SHAPES), default=None, help="default: full on CUDA, tiny on CPU"
    )
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--workloads", default="llama,qwen2")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile", default="", help="systems to profile, comma-separated")
    parser.add_argument("--profile-dir", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    shape = SHAPES[args.size or ("full" if args.device == "cuda" else "tiny")]
    rows: list[Row] = []
    for workload in args.workloads.split(","):
        rows += rows_of(workload, shape, args)
        _print_table(rows, args)  # after each workload, so a time-out still leaves a table
    _print_speedups(rows)
    print_kernel_categories(KERNEL_PROFILES)


def _print_speedups(rows: list[Row]) -> None:
    """How many times faster thunder's step is than each other system's (above 1: thunder is faster)."""
    by_key = {(r.workload, r.system): r for r in rows}
    others = ("eager", "liger", "torch.compile")
    print("\n| workload | thunder system | " + " | ".join(f"speed-up over {o}" for o in others) + " |")
    print("|---|---|" + "---|" * len(others))
    for r in rows:
        if r.system.startswith("thunder"):
            cells = [
                f"{by_key[(r.workload, o)].ms / r.ms:.2f}x" if (r.workload, o) in by_key else "-"
                for o in others
            ]
            print(f"| {r.workload} | {r.system} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
