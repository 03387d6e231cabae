"""Training steps, eager vs torch.compile vs thunder, in one process and one table.

Workloads (models written here, random data, no network):
- ``mlp``: the MNIST tutorial's MLP (784 -> 784 x3 -> 28 -> 10, dropout 0.1), batch 8, Adam.
- ``gpt``: a GPT-2-shaped model (pre-LayerNorm, GELU-tanh, causal attention, tied embeddings,
  cross-entropy), AdamW; ``--gpt-size small`` is GPT-2 124M with sequence 1024 and batch 16 (the
  workload of ../shared/BENCHMARKS.md), ``tiny`` fits a CPU.

For each: ms per step (mean of timed steps after warm-up; CUDA events on a GPU), the time of the
warm-up steps (first call: trace + compile + steps), peak memory on CUDA, and thunder's ratios to
eager and to torch.compile. Executors for thunder: ``--executors triton,torch`` etc.

    python benchmarks/training.py                       # CUDA if available, else CPU (tiny sizes)
    python benchmarks/training.py --gpt-size small --dtype bfloat16
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import thunder


def mnist_mlp() -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    sizes = [784, 784, 784, 784, 28]
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(0.1)]
    return torch.nn.Sequential(*layers, torch.nn.Linear(28, 10), torch.nn.Dropout(0.1))


class Block(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.c_attn, self.c_proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.c_fc, self.mlp_proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(batch, seq, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, layers: int, d: int, heads: int, seq: int, vocab: int):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


GPT_SIZES = {
    "tiny": dict(layers=2, d=64, heads=4, seq=64, vocab=512, batch=4),
    "small": dict(layers=12, d=768, heads=12, seq=1024, vocab=50304, batch=16),
}


@dataclass
class Result:
    ms_per_step: float
    warmup_s: float
    peak_gib: float | None


def _timed_steps(step: Callable[[], None], device: str, warmup: int, steps: int) -> Result:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    if device == "cuda":
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(steps):
            step()
        end.record()
        torch.cuda.synchronize()
        ms = begin.elapsed_time(end) / steps
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        ms = (time.perf_counter() - start) * 1000 / steps
        peak = None
    return Result(ms, warmup_s, peak)


def _make_step(
    model: torch.nn.Module, run: Callable, batch: Callable, optimizer: torch.optim.Optimizer
) -> Callable:
    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = run(*batch())
        loss.backward()
        optimizer.step()

    return step


def bench_workload(
    name: str, model: torch.nn.Module, loss_of: Callable, batch: Callable, args: argparse.Namespace
) -> dict[str, Result]:
    results = {}
    for system in ("eager", "torch.compile", "thunder"):
        if system == "torch.compile" and args.skip_compile:
            continue
        torch.manual_seed(0)
        net = copy.deepcopy(model)
        fused = args.device == "cuda"
        optimizer = (
            torch.optim.AdamW(net.parameters(), lr=1e-4, fused=fused)
            if name == "gpt"
            else torch.optim.Adam(net.parameters(), fused=fused)
        )
        if system == "eager":
            runner = net
        elif system == "torch.compile":
            runner = torch.compile(net)
        else:
            executors = args.executors.split(",") if args.executors else None
            runner = thunder.jit(net, executors=executors)
        step = _make_step(net, lambda *xs, r=runner: loss_of(r, *xs), batch, optimizer)
        results[system] = _timed_steps(step, args.device, args.warmup, args.steps)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gpt-size", choices=sorted(GPT_SIZES), default=None)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--workloads", default="mlp,gpt")
    parser.add_argument(
        "--executors", default="", help="thunder executors, comma-separated (default: thunder's)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--skip-compile", action="store_true")
    args = parser.parse_args()
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    dtype = getattr(torch, args.dtype)
    size = GPT_SIZES[args.gpt_size or ("small" if args.device == "cuda" else "tiny")]
    rows = []
    for workload in args.workloads.split(","):
        if workload == "mlp":
            model = mnist_mlp().to(args.device, dtype)
            data = torch.rand(8, 784, device=args.device, dtype=dtype)
            targets = torch.randint(0, 10, (8,), device=args.device)
            results = bench_workload(
                "mlp", model, lambda r, x, t: F.cross_entropy(r(x).float(), t), lambda: (data, targets), args
            )
        elif workload == "gpt":
            shape = {k: v for k, v in size.items() if k != "batch"}
            model = GPT(**shape).to(args.device, dtype)
            idx = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), device=args.device)
            targets = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), device=args.device)
            results = bench_workload("gpt", model, lambda r, i, t: r(i, t), lambda: (idx, targets), args)
        else:
            raise SystemExit(f"unknown workload {workload!r}")
        rows.append((workload, results))
    _print_table(rows, args)


def _print_table(rows: list, args: argparse.Namespace) -> None:
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(
        f"\n## training steps on {device}, torch {torch.__version__}, {args.dtype}, warm-up {args.warmup}, timed {args.steps}"
    )
    print("| workload | system | ms/step | first steps (s) | peak GiB | thunder/eager | thunder/compile |")
    print("|---|---|---|---|---|---|---|")
    for workload, results in rows:
        thunder_ms = results["thunder"].ms_per_step
        for system, r in results.items():
            peak = f"{r.peak_gib:.2f}" if r.peak_gib is not None else "-"
            ratios = ("", "")
            if system == "thunder":
                compile_ms = results.get("torch.compile")
                ratios = (
                    f"{thunder_ms / results['eager'].ms_per_step:.2f}",
                    f"{thunder_ms / compile_ms.ms_per_step:.2f}" if compile_ms else "-",
                )
            print(
                f"| {workload} | {system} | {r.ms_per_step:.3f} | {r.warmup_s:.2f} | {peak} | {ratios[0]} | {ratios[1]} |"
            )


if __name__ == "__main__":
    main()
