"""Data-parallel training steps on 2 GPUs: PyTorch DDP and FSDP2 vs thunder DDP and FSDP, one table.

The GPT-2 124M workload of training.py (its model, sizes and timing method, imported from it):
bf16 weights, AdamW, sequence 1024, batch 16 *per GPU*. Each system trains a fresh copy of the
model for the warm-up steps (their wall time includes thunder's compile), then the mean of the
timed steps is taken with CUDA events. Reported per system: ms/step (the slowest process), tokens/s
over all processes, and peak memory per GPU (``max_memory_allocated``, the largest process).

    torchrun --nproc-per-node 2 benchmarks/distributed.py                         # 2 GPUs, NCCL
    torchrun --nproc-per-node 2 benchmarks/distributed.py --systems thunder-fsdp-zero3
    torchrun --nproc-per-node 2 benchmarks/distributed.py --device cpu --tiny       # gloo check on a CPU

Systems: ``pytorch-ddp`` (DistributedDataParallel), ``pytorch-fsdp2`` (``fully_shard`` on each
block and the root), ``thunder-ddp`` (``thunder.distributed.ddp``), ``thunder-fsdp-zero2`` and
``thunder-fsdp-zero3`` (``thunder.distributed.fsdp``), ``pytorch-ddp+thunder``
(``DistributedDataParallel(thunder.jit(model))``). A system that fails prints its error in its
row and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as torch_dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training import GPT, GPT_SIZES, Result, _make_step, _timed_steps  # noqa: E402

import thunder  # noqa: E402
import thunder.distributed  # noqa: E402

SYSTEMS = (
    "pytorch-ddp",
    "pytorch-fsdp2",
    "thunder-ddp",
    "thunder-fsdp-zero2",
    "thunder-fsdp-zero3",
    "pytorch-ddp+thunder",
)


def _wrap(system: str, model: torch.nn.Module, args: argparse.Namespace) -> torch.nn.Module:
    """The module a training step calls, for ``system``; ``model`` is on this process's device."""
    executors = args.executors.split(",") if args.executors else None
    device_ids = [torch.cuda.current_device()] if args.device == "cuda" else None
    if system == "pytorch-ddp":
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if system == "pytorch-fsdp2":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        return fully_shard(model)
    if system == "thunder-ddp":
        return thunder.jit(thunder.distributed.ddp(model), executors=executors)
    if system.startswith("thunder-fsdp-"):
        strategy = system.removeprefix("thunder-fsdp-").upper()
        return thunder.jit(thunder.distributed.fsdp(model, sharding_strategy=strategy), executors=executors)
    if system == "pytorch-ddp+thunder":
        return torch.nn.parallel.DistributedDataParallel(
            thunder.jit(model, executors=executors), device_ids=device_ids
        )
    raise SystemExit(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")


def _optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    fused = args.device == "cuda" and not args.no_fused
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)


def bench_system(system: str, size: dict, args: argparse.Namespace) -> Result:
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    shape = {k: v for k, v in size.items() if k != "batch"}
    model = GPT(**shape).to(args.device, dtype)
    runner = _wrap(system, model, args)
    optimizer = _optimizer(runner, args)
    generator = torch.Generator(device=args.device).manual_seed(1 + torch_dist.get_rank())
    idx = torch.randint(
        0, size["vocab"], (size["batch"], size["seq"]), device=args.device, generator=generator
    )
    targets = torch.randint(0, size["vocab"], idx.shape, device=args.device, generator=generator)
    step = _make_step(runner, lambda i, t: runner(i, t), lambda: (idx, targets), optimizer)
    return _timed_steps(step, args.device, args.warmup, args.steps)


def _slowest(value: float) -> float:
    """The largest value over the processes."""
    t = torch.tensor([value], dtype=torch.float64, device="cuda" if _nccl() else "cpu")
    torch_dist.all_reduce(t, op=torch_dist.ReduceOp.MAX)
    return float(t.item())


def _nccl() -> bool:
    return torch_dist.get_backend() == "nccl"


def _free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_all(systems: list[str], size: dict, args: argparse.Namespace) -> list[tuple[str, Result | str]]:
    rows: list[tuple[str, Result | str]] = []
    for system in systems:
        torch_dist.barrier()
        start = time.perf_counter()
        try:
            result: Result | str = bench_system(system, size, args)
        except Exception as error:  # one broken system must not hide the others' numbers
            result = (
                f"failed: {type(error).__name__}: {str(error).splitlines()[0][:150] if str(error) else ''}"
            )
            if torch_dist.get_rank() == 0:
                print(f"[{system}] {result}", file=sys.stderr, flush=True)
        failed = _slowest(1.0 if isinstance(result, str) else 0.0)
        if failed and not isinstance(result, str):
            result = "failed on another process"
        if not isinstance(result, str):
            peak = _slowest(result.peak_gib) if result.peak_gib is not None else None
            result = Result(_slowest(result.ms_per_step), _slowest(result.warmup_s), peak)
        if torch_dist.get_rank() == 0:
            print(f"[{system}] done in {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)
        rows.append((system, result))
        _free_memory()
    return rows


def print_table(rows: list[tuple[str, Result | str]], size: dict, args: argparse.Namespace) -> None:
    world = torch_dist.get_world_size()
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    tokens = world * size["batch"] * size["seq"]
    print(
        f"\n## data-parallel training, GPT {'tiny' if args.tiny else '124M'}, {world} x {device}, "
        f"{torch_dist.get_backend()}, torch {torch.__version__}, {args.dtype}, batch {size['batch']} x seq "
        f"{size['seq']} per GPU, warm-up {args.warmup}, timed {args.steps}"
    )
    print("| system | ms/step | tokens/s | peak GiB per GPU | first steps (s) |")
    print("|---|---|---|---|---|")
    for system, result in rows:
        if isinstance(result, str):
            print(f"| {system} | {result} | | | |")
            continue
        peak = f"{result.peak_gib:.2f}" if result.peak_gib is not None else "-"
        tokens_per_s = tokens / (result.ms_per_step / 1000)
        print(
            f"| {system} | {result.ms_per_step:.1f} | {tokens_per_s:,.0f} | {peak} | {result.warmup_s:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"]
    )
    parser.add_argument("--tiny", action="store_true", help="training.py's tiny GPT instead of GPT-2 124M")
    parser.add_argument(
        "--dtype", default=None, choices=["float32", "bfloat16"], help="default: bf16 on cuda"
    )
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated, from: " + ", ".join(SYSTEMS)
    )
    parser.add_argument(
        "--executors", default="", help="thunder executors, comma-separated (default: thunder's)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-fused", action="store_true", help="AdamW without fused=True")
    args = parser.parse_args()
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.backends.cuda.matmul.allow_tf32 = True
    # a system that hangs on one process fails after 3 minutes instead of NCCL's default 10
    torch_dist.init_process_group(
        "nccl" if args.device == "cuda" else "gloo", timeout=datetime.timedelta(seconds=180)
    )
    size = GPT_SIZES["tiny" if args.tiny else "small"]
    rows = run_all(args.systems.split(","), size, args)
    if torch_dist.get_rank() == 0:
        print_table(rows, size, args)
    torch_dist.destroy_process_group()


if __name__ == "__main__":
    main()
