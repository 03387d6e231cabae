"""Data-parallel training steps on 2 GPUs: PyTorch DDP and FSDP2 vs thunder DDP and FSDP, one table.

The GPT-2 124M workload of training.py (its model, sizes and timing method, imported from it):
bf16 weights, AdamW, sequence 1024, batch 16 *per GPU*; or ``--workload llama``, the 4-layer
Llama-2-7B-shaped model of llama.py at batch 2 x 2048 per GPU. Each system trains a fresh copy of the
model for the warm-up steps (their wall time includes thunder's compile), then the mean of the
timed steps is taken with CUDA events. Reported per system: ms/step (the slowest process), tokens/s
over all processes, and peak memory per GPU (``max_memory_allocated``, the largest process).

    torchrun --nproc-per-node 2 benchmarks/distributed.py                         # 2 GPUs, NCCL
    torchrun --nproc-per-node 2 benchmarks/distributed.py --systems thunder-fsdp-zero3
    torchrun --nproc-per-node 2 benchmarks/distributed.py --device cpu --tiny       # gloo check on a CPU
    torchrun --nproc-per-node 2 benchmarks/distributed.py --profile thunder-ddp,pytorch-ddp  # + per-rank profiles

Systems: ``pytorch-single`` and ``thunder-single`` (every process trains its own model, without
communication: the one-GPU step that the scaling column divides by), ``pytorch-ddp`` (DistributedDataParallel), ``pytorch-fsdp2`` (``fully_shard`` on each
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
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as torch_dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama import LLAMA_SIZES, Llama  # noqa: E402
from run import kernel_categories  # noqa: E402
from training import GPT, GPT_SIZES, Result, _make_step, _timed_steps  # noqa: E402

import thunder  # noqa: E402
import thunder.distributed  # noqa: E402

SYSTEMS = (
    "pytorch-single",
    "thunder-single",
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
    if system == "pytorch-single":
        return model
    if system == "thunder-single":
        return thunder.jit(model, executors=executors)
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


MODELS = {"gpt": GPT, "llama": Llama}


def workload_size(args: argparse.Namespace) -> dict:
    if args.workload == "llama":
        return LLAMA_SIZES["tiny" if args.tiny else "7b-4layers"]
    return GPT_SIZES["tiny" if args.tiny else "small"]


def _optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    fused = args.device == "cuda" and not args.no_fused
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)


def bench_system(system: str, size: dict, args: argparse.Namespace) -> Result:
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    shape = {k: v for k, v in size.items() if k != "batch"}
    model = MODELS[args.workload](**shape).to(args.device, dtype)
    runner = _wrap(system, model, args)
    optimizer = _optimizer(runner, args)
    generator = torch.Generator(device=args.device).manual_seed(1 + torch_dist.get_rank())
    idx = torch.randint(
        0, size["vocab"], (size["batch"], size["seq"]), device=args.device, generator=generator
    )
    targets = torch.randint(0, size["vocab"], idx.shape, device=args.device, generator=generator)
    step = _make_step(runner, lambda i, t: runner(i, t), lambda: (idx, targets), optimizer)
    result = _timed_steps(step, args.device, args.warmup, args.steps)
    HOST_MS[system] = host_ms_per_step(step, args.device)
    if system in args.profile.split(","):
        profile_steps(system, step, args)
        if system.startswith("thunder") and torch_dist.get_rank() == 0:
            _save_traces(system, runner, args.profile_dir)
        _cprofile_steps(system, step, args.profile_dir)
    return result


# host time to enqueue one step, by system (the slowest process)
HOST_MS: dict[str, float] = {}


def host_ms_per_step(step: Callable[[], None], device: str, repeats: int = 3) -> float:
    """Milliseconds the host takes to issue one step with the GPU idle at its start (the mean of
    ``repeats``): a step whose host time is near its ms/step is host-bound."""
    total = 0.0
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        torch_dist.barrier()
        start = time.perf_counter()
        step()
        total += time.perf_counter() - start
    if device == "cuda":
        torch.cuda.synchronize()
    return _slowest(total * 1000 / repeats)


def _cprofile_steps(system: str, step: Callable[[], None], directory: str, steps: int = 3) -> None:
    """Where the host time of ``steps`` steps goes, by Python function (this process)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    profile.disable()
    with open(os.path.join(directory, f"cprofile_{system}_rank{torch_dist.get_rank()}.txt"), "w") as f:
        pstats.Stats(profile, stream=f).sort_stats("tottime").print_stats(45)


def _save_traces(system: str, runner: torch.nn.Module, directory: str) -> None:
    """The forward and backward execution traces thunder ran, for reading next to the profile."""
    jitted = runner.module if isinstance(runner, torch.nn.parallel.DistributedDataParallel) else runner
    with open(os.path.join(directory, f"traces_{system}.py"), "w") as f:
        f.write(
            f"# forward\n{thunder.last_traces(jitted)[-1]}\n\n# backward\n{thunder.last_backward_traces(jitted)[-1]}\n"
        )


def profile_steps(system: str, step: Callable[[], None], args: argparse.Namespace, steps: int = 3) -> None:
    """Profile ``steps`` steps on every process; each prints where its GPU time goes and saves its trace.

    Besides kernel time by category: *exposed communication*, the time NCCL kernels run while no
    other kernel does (communication the backward did not hide), and *GPU idle*, the wall time no
    kernel runs (waiting for the host or for another process).
    """
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    torch.cuda.synchronize()
    torch_dist.barrier()
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - start) * 1000 / steps
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = [(e.time_range.start, e.time_range.end) for e in kernels]
    comm = [(e.time_range.start, e.time_range.end) for e in kernels if "nccl" in e.name.lower()]
    compute = [(e.time_range.start, e.time_range.end) for e in kernels if "nccl" not in e.name.lower()]
    busy_ms = _union_length(spans) / 1000 / steps
    exposed_ms = (_union_length(spans) - _union_length(compute)) / 1000 / steps
    categories = ", ".join(f"{c} {ms:.1f}" for c, ms in kernel_categories(profiler, steps).items())
    rank = torch_dist.get_rank()
    os.makedirs(args.profile_dir, exist_ok=True)
    profiler.export_chrome_trace(os.path.join(args.profile_dir, f"trace_{system}_rank{rank}.json"))
    comm_ms = _union_length(comm) / 1000 / steps
    lines = [
        f"[{system} rank {rank}] {wall_ms:.1f} ms/step wall under the profiler; GPU idle {wall_ms - busy_ms:.1f}; "
        f"communication {comm_ms:.1f} of which exposed {exposed_ms:.1f}",
        f"[{system} rank {rank}] kernel ms/step by category: {categories}",
    ]
    for rank_lines in _gathered(lines):
        if torch_dist.get_rank() == 0:
            print("\n".join(rank_lines), flush=True)


def _union_length(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the intervals."""
    total, end = 0.0, float("-inf")
    for begin, finish in sorted(spans):
        if finish > end:
            total += finish - max(begin, end)
            end = finish
    return total


def _gathered(lines: list[str]) -> list[list[str]]:
    everyone: list = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(everyone, lines)
    return everyone


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
    """One row per system; *host ms/step*: the host's time to issue one step from an idle GPU;
    *scaling* is the one-GPU step time of the same framework (the ``-single``
    row: every process trains alone, no communication) over this row's, 1.00 being perfect."""
    world = torch_dist.get_world_size()
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    tokens = world * size["batch"] * size["seq"]
    model = {"gpt": "GPT-2 124M", "llama": "Llama-2-7B-shaped, 4 layers"}[args.workload]
    print(
        f"\n## data-parallel training, {'tiny ' if args.tiny else ''}{model}, {world} x {device}, "
        f"{torch_dist.get_backend()}, torch {torch.__version__}, {args.dtype}, batch {size['batch']} x seq "
        f"{size['seq']} per GPU, warm-up {args.warmup}, timed {args.steps}"
    )
    single = {
        system.split("-")[0]: r for system, r in rows if system.endswith("-single") and not isinstance(r, str)
    }
    print(
        "| system | ms/step | host ms/step | tokens/s (all GPUs) | peak GiB per GPU | first steps (s) | scaling |"
    )
    print("|---|---|---|---|---|---|---|")
    for system, result in rows:
        if isinstance(result, str):
            print(f"| {system} | {result} | | | | | |")
            continue
        peak = f"{result.peak_gib:.2f}" if result.peak_gib is not None else "-"
        tokens_per_s = tokens / (result.ms_per_step / 1000)
        alone = single.get(system.split("-")[0] if "+" not in system else "thunder")
        scaling = (
            f"{alone.ms_per_step / result.ms_per_step:.2f}"
            if alone and not system.endswith("-single")
            else ""
        )
        print(
            f"| {system} | {result.ms_per_step:.1f} | {HOST_MS.get(system, float('nan')):.1f} | {tokens_per_s:,.0f} | {peak} | {result.warmup_s:.1f} | {scaling} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"]
    )
    parser.add_argument(
        "--workload", default="gpt", choices=sorted(MODELS), help="GPT-2 124M or the 4-layer Llama"
    )
    parser.add_argument("--tiny", action="store_true", help="the workload's tiny size (for a CPU check)")
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
    parser.add_argument(
        "--profile", default="", help="systems to profile (comma-separated): kernel time, overlap, traces"
    )
    parser.add_argument("--profile-dir", default=os.environ.get("OUT", "."), help="where the traces go")
    args = parser.parse_args()
    if args.profile and args.device != "cuda":
        parser.error("--profile profiles CUDA kernels: it needs --device cuda")
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.backends.cuda.matmul.allow_tf32 = True
    # a system that hangs on one process fails after 3 minutes instead of NCCL's default 10
    torch_dist.init_process_group(
        "nccl" if args.device == "cuda" else "gloo", timeout=datetime.timedelta(seconds=180)
    )
    size = workload_size(args)
    rows = run_all(args.systems.split(","), size, args)
    if torch_dist.get_rank() == 0:
        print_table(rows, size, args)
    torch_dist.destroy_process_group()


if __name__ == "__main__":
    main()
