"""The performance benchmark: eager, torch.compile and thunder side by side, one process, one table.

Workloads (../shared/BENCHMARKS.md; models written in this folder, random data, no network):
- ``gpt``: GPT-2 124M training step, batch 16 x 1024 tokens, AdamW (``training.GPT``);
- ``llama``: a Llama-2-7B-shaped model with 4 layers, batch 2 x 2048, AdamW (``llama.Llama``);
- ``mlp-eval``: the MNIST tutorial's MLP, batch 8, eval forward under ``no_grad`` (per call), its
  ``thunder+graphs`` row ``thunder.jit(model, cuda_graphs=True)`` (the ``-step`` systems have no row);
- ``mlp``: the same MLP's training step (cross entropy, AdamW), batch 8 (per step, in us): a step
  bound by the host's launches, not by the GPU.

Systems (``--systems``): ``eager``, ``torch.compile`` and ``thunder`` compile the model (forward and
backward) and step the optimizer outside; ``thunder-step`` (training workloads) is ``thunder.jit`` of
the whole step (``train_step``: zero_grad, forward, ``loss.backward()``, ``optimizer.step()``), one
program with the optimizer's update inside, with the same optimizer. ``thunder+graphs`` and
``thunder-step+graphs`` are the same with ``cuda_graphs=True`` (CUDA only; the forward and the backward
as two graphs, or the whole step as one).

Per system: ms per step (mean of timed steps after warm-up, CUDA events), tokens/s, achieved
TFLOP/s (6 x parameters + 12 x layers x sequence x width per token), peak memory (allocated, and
reserved by the caching allocator: a CUDA graph's pool is memory held whatever the allocated count
says, which for a backward captured into its forward's pool no longer counts the activations the
forward writes there on each replay), the wall time
of the warm-up steps (first call: trace + compile + steps), and thunder's ratios to eager and to
torch.compile. ``--profile`` also writes torch.profiler tables of thunder's and torch.compile's
steps per workload (the top kernels by CUDA time, and the kernel time against the wall time per
step) to ``--profile-dir``, and prints their kernel time per step by category (matmul, attention,
nvFuser, Triton, optimizer, ATen elementwise/reduction/copy) side by side.

    python benchmarks/run.py                                 # all three, on CUDA, bf16
    python benchmarks/run.py --workloads gpt --executors nvfuser,torch
    python benchmarks/run.py --device cpu --size tiny        # a smoke run on a CPU
    python benchmarks/run.py --workloads gpt,llama --systems eager,thunder,thunder-step
    python benchmarks/run.py --isolate --workloads gpt,llama  # each row in a process of its own

``--isolate`` measures each (workload, system) in a process of its own (``isolated.py`` says why) and
prints the same table: use it for the numbers you report.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from isolated import ISOLATE_FLAG, run_child, write_rows
from llama import LLAMA_SIZES, Llama
from training import GPT, GPT_SIZES, mnist_mlp

import thunder

SYSTEMS = ("eager", "torch.compile", "thunder", "thunder-step", "thunder+graphs", "thunder-step+graphs")


@dataclass
class Row:
    workload: str
    system: str
    ms: float
    first_s: float
    peak_gib: float | None
    tokens_per_s: float | None = None
    tflops: float | None = None
    compile_s: float | None = None  # thunder's own part of the first steps: its last compile's stages
    error: str = ""
    reserved_gib: float | None = None  # the caching allocator's peak reserve: with CUDA graphs, their pools


_JITTED: list = []  # the thunder.jit objects of the row being measured, for their compile stats


def _jit(fn: Callable, args: argparse.Namespace, cuda_graphs: bool) -> Callable:
    jitted = thunder.jit(fn, executors=_executors(args), cuda_graphs=cuda_graphs)
    _JITTED.append(jitted)
    return jitted


def _thunder_compile_seconds() -> float | None:
    """The stage seconds (frontend, transforms, codegen) of the last compile of each jitted object of
    this row, summed; the rest of the first steps is the first executions (kernel compiles) and the
    steps themselves."""
    seconds = [sum(thunder.compile_stats(j).last_stage_seconds.values()) for j in _JITTED]
    _JITTED.clear()
    return sum(seconds) if seconds else None


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(
    step: Callable[[], object], device: str, warmup: int, steps: int
) -> tuple[float, float, float | None, float | None]:
    """(ms per step, wall seconds of the warm-up steps, peak GiB allocated and reserved)."""
    if device == "cuda":
        gc.collect()  # what the previous system left in reference cycles (its graphs' pools) is not ours
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    _sync(device)
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    first_s = time.perf_counter() - start
    if device == "cuda":
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(steps):
            step()
        end.record()
        torch.cuda.synchronize()
        peak, reserved = torch.cuda.max_memory_allocated() / 2**30, torch.cuda.max_memory_reserved() / 2**30
        return begin.elapsed_time(end) / steps, first_s, peak, reserved
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) * 1000 / steps, first_s, None, None


def _runner(system: str, net: torch.nn.Module, args: argparse.Namespace) -> Callable:
    if system == "eager":
        return net
    if system == "torch.compile":
        return torch.compile(net)
    return _jit(net, args, cuda_graphs=system == "thunder+graphs")


def _executors(args: argparse.Namespace) -> list[str] | None:
    return args.executors.split(",") if args.executors else None


def train_step(
    forward: Callable[..., torch.Tensor], optimizer: torch.optim.Optimizer
) -> Callable[..., torch.Tensor]:
    """The training step users write: ``zero_grad``, the loss ``forward(*inputs)``, ``loss.backward()``,
    ``optimizer.step()``; returns the loss."""

    def step(*inputs: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = forward(*inputs)
        loss.backward()
        optimizer.step()
        return loss

    return step


def _step_of(
    system: str, net: torch.nn.Module, optimizer: torch.optim.Optimizer, args: argparse.Namespace
) -> Callable:
    """``system``'s training step of ``net`` (which returns the loss): ``thunder-step`` jits the whole step,
    optimizer included; the other systems compile ``net`` (``_runner``) and step the optimizer outside."""
    if system.startswith("thunder-step"):
        graphs = system == "thunder-step+graphs"
        return _jit(train_step(net, optimizer), args, cuda_graphs=graphs)
    return train_step(_runner(system, net, args), optimizer)


def _fresh_step(system: str, model: torch.nn.Module, args: argparse.Namespace) -> Callable:
    """``system``'s training step of a fresh copy of ``model`` on the device, with its own fused AdamW.
    ``model`` itself stays on the CPU, so that a row's peak memory is the system's alone (it was on the
    device until 2026-11-28: every row then included one more copy of the weights, Llama's 2.0 GiB)."""
    torch.manual_seed(0)
    net = copy.deepcopy(model).to(args.device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=args.device == "cuda")
    return _step_of(system, net, optimizer, args)


def _training_rows(name: str, model: torch.nn.Module, shape: dict, args: argparse.Namespace) -> list[Row]:
    batch, seq, vocab = shape["batch"], shape["seq"], shape["vocab"]
    idx = torch.randint(0, vocab, (batch, seq), device=args.device)
    targets = torch.randint(0, vocab, (batch, seq), device=args.device)
    parameters = sum(p.numel() for p in model.parameters())
    flops_per_token = 6 * parameters + 12 * shape["layers"] * seq * shape["d"]
    rows = []
    for system in _systems(args):
        run = _fresh_step(system, model, args)

        def step(run: Callable = run) -> None:
            run(idx, targets)

        ms, first_s, peak, reserved = _time(step, args.device, args.warmup, args.steps)
        tokens_per_s = batch * seq / (ms / 1000)
        flops = flops_per_token * tokens_per_s / 1e12
        compile_s = _thunder_compile_seconds()
        rows.append(
            Row(name, system, ms, first_s, peak, tokens_per_s, flops, compile_s, reserved_gib=reserved)
        )
        if args.profile and system != "eager":
            _profile(f"{name}_{system}", step, args, key=(name, system))
        del run, step
    return rows


def _mlp_eval_rows(args: argparse.Namespace) -> list[Row]:
    dtype = getattr(torch, args.dtype)
    model = mnist_mlp().to(args.device, dtype).eval().requires_grad_(False)
    x = torch.rand(8, 784, device=args.device, dtype=dtype)
    rows = []
    # an eval forward has no training step
    systems = [s for s in _systems(args) if not s.startswith("thunder-step")]
    for system in systems:
        run = _runner(system, model, args)

        def call(run: Callable = run) -> None:
            with torch.no_grad():
                run(x)

        calls = 200
        ms, first_s, peak, reserved = _time(
            lambda: [call() for _ in range(calls)], args.device, args.warmup, args.steps
        )
        compile_s = _thunder_compile_seconds()
        rows.append(
            Row("mlp-eval", system, ms / calls, first_s, peak, compile_s=compile_s, reserved_gib=reserved)
        )
    return rows


class _MLPLoss(torch.nn.Module):
    """The MNIST MLP with its loss, as the training workloads' models return theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = mnist_mlp()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.mlp(x).float(), y)


def _mlp_train_rows(args: argparse.Namespace) -> list[Row]:
    dtype = getattr(torch, args.dtype)
    model = _MLPLoss().to(dtype)
    x = torch.rand(8, 784, device=args.device, dtype=dtype)
    y = torch.randint(0, 10, (8,), device=args.device)
    rows = []
    for system in _systems(args):
        run = _fresh_step(system, model, args)
        calls = 50

        def steps(run: Callable = run) -> None:
            for _ in range(calls):
                run(x, y)

        ms, first_s, peak, reserved = _time(steps, args.device, args.warmup, args.steps)
        compile_s = _thunder_compile_seconds()
        rows.append(Row("mlp", system, ms / calls, first_s, peak, compile_s=compile_s, reserved_gib=reserved))
        del run
    return rows


def _systems(args: argparse.Namespace) -> tuple[str, ...]:
    chosen = args.systems.split(",")
    return tuple(
        s
        for s in SYSTEMS
        if s in chosen
        and not (s == "torch.compile" and args.skip_compile)
        and not (s.endswith("+graphs") and args.device != "cuda")
    )


# Kernel categories by name, first match wins (cuBLAS/cuDNN/flash/nvFuser/Triton/ATen kernel names).
_KERNEL_CATEGORIES = (
    ("communication", ("nccl",)),  # before "reduction": ncclDevKernel_ReduceScatter_...
    ("attention", ("flash", "fmha", "cudnn", "attention", "sdpa")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul")),
    ("optimizer", ("multi_tensor", "fused_adam", "adamw", "_foreach")),
    ("nvfuser", ("nvfuser", "codegen")),
    ("triton", ("triton",)),
    ("copy/fill", ("copy", "memcpy", "memset", "fill", "cat", "index")),
    ("reduction", ("reduce", "softmax", "norm", "nll", "cross_entropy", "embedding")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise")),
)


def kernel_categories(profiler: torch.profiler.profile, steps: int) -> dict[str, float]:
    """Milliseconds per step of CUDA kernel time, by category of kernel name."""
    totals: dict[str, float] = {}
    for event in profiler.events():
        # a GPU user annotation (the optimizer's ``Optimizer.step#AdamW.step`` range) spans kernels
        # already counted: counting it too doubled the optimizer row (Llama: 12.3 ms for 6.1)
        if event.device_type != torch.autograd.DeviceType.CUDA or getattr(event, "is_user_annotation", False):
            continue
        lowered = event.name.lower()
        category = next((c for c, keys in _KERNEL_CATEGORIES if any(k in lowered for k in keys)), "other")
        totals[category] = totals.get(category, 0.0) + event.device_time / 1000 / steps
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


# kernel ms/step by category of each profiled (workload, system), for the side-by-side table
KERNEL_PROFILES: dict[tuple[str, str], dict[str, float]] = {}


def print_kernel_categories(profiles: dict[tuple[str, str], dict[str, float]]) -> None:
    """Per workload, kernel ms/step by category for each profiled system side by side, and the totals."""
    for workload in dict.fromkeys(w for w, _ in profiles):
        systems = [s for w, s in profiles if w == workload]
        categories = list(dict.fromkeys(c for s in systems for c in profiles[(workload, s)]))
        print(f"\n{workload}: kernel ms/step by category")
        print("| category | " + " | ".join(systems) + " |")
        print("|---|" + "---|" * len(systems))
        for category in [*categories, "total"]:
            cells = [
                sum(profiles[(workload, s)].values())
                if category == "total"
                else profiles[(workload, s)].get(category)
                for s in systems
            ]
            print(f"| {category} | " + " | ".join(_fmt(c, ".1f") for c in cells) + " |")


def _profile(name: str, step: Callable, args: argparse.Namespace, key: tuple[str, str] | None = None) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    steps = 3
    _sync(args.device)
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        _sync(args.device)
    wall_ms = (time.perf_counter() - start) * 1000 / steps
    sort_by = "cuda_time_total" if args.device == "cuda" else "cpu_time_total"
    averages = profiler.key_averages()
    # kernel time: what the GPU is busy with; the rest of the wall time it waits for the host
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernel_ms = sum(e.device_time for e in kernels) / 1000 / steps
    os.makedirs(args.profile_dir, exist_ok=True)
    path = os.path.join(args.profile_dir, f"profile_{name}.txt")
    categories = kernel_categories(profiler, steps)
    if key is not None and categories:
        KERNEL_PROFILES[key] = categories
    by_category = ", ".join(f"{c} {ms:.1f}" for c, ms in categories.items())
    with open(path, "w") as f:
        f.write(
            f"{name}: {wall_ms:.2f} ms/step wall under the profiler, {kernel_ms:.2f} ms/step in kernels\n"
        )
        f.write(f"kernel ms/step by category: {by_category}\n")
        f.write(averages.table(sort_by=sort_by, row_limit=60))
    print(f"profile of {name} ({wall_ms:.2f} ms/step wall, {kernel_ms:.2f} ms/step kernels): {path}")
    if categories:
        print(f"  kernel ms/step by category: {by_category}")


def _print_table(rows: list[Row], args: argparse.Namespace, device: str) -> None:
    print(
        f"\n## {device}, torch {torch.__version__}, {args.dtype}, warm-up {args.warmup}, timed {args.steps}"
    )
    print(
        "| workload | system | ms/step | tokens/s | TFLOP/s | peak GiB | reserved GiB | first steps (s) | "
        "of which thunder's compile (s) | thunder/eager | thunder/compile |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by_key = {(r.workload, r.system): r for r in rows}
    for r in rows:
        if r.error:
            print(f"| {r.workload} | {r.system} | failed: {r.error} |||||||||")
            continue
        ratios = ["", ""]
        if r.system.startswith("thunder"):
            for i, other in enumerate(("eager", "torch.compile")):
                base = by_key.get((r.workload, other))
                ratios[i] = f"{r.ms / base.ms:.2f}" if base and not base.error else "-"
        unit_ms = f"{r.ms:.3f}" if not r.workload.startswith("mlp") else f"{r.ms * 1000:.1f} us"
        print(
            f"| {r.workload} | {r.system} | {unit_ms} | {_fmt(r.tokens_per_s, '.0f')} | {_fmt(r.tflops, '.1f')} | "
            f"{_fmt(r.peak_gib, '.2f')} | {_fmt(r.reserved_gib, '.2f')} | {r.first_s:.2f} | {_fmt(r.compile_s, '.2f')} | {ratios[0]} | {ratios[1]} |"
        )


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--size", choices=["full", "tiny"], default=None, help="default: full on CUDA, tiny on CPU"
    )
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--workloads", default="gpt,llama,mlp-eval")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS[:4]), help=f"comma-separated, of {', '.join(SYSTEMS)}"
    )
    parser.add_argument(
        "--executors", default="", help="thunder's executors, comma-separated (default: thunder's)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-dir", default=os.environ.get("OUT", "."))
    parser.add_argument(
        ISOLATE_FLAG, action="store_true", help="each (workload, system) in a process of its own"
    )
    parser.add_argument(
        "--rows-json", default="", help=argparse.SUPPRESS
    )  # where a child of --isolate writes
    args = parser.parse_args()
    unknown = set(args.systems.split(",")) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}")
    if args.isolate:
        _run_isolated(args)
        return
    torch.backends.cuda.matmul.allow_tf32 = True
    rows: list[Row] = []
    for workload in args.workloads.split(","):
        rows += _workload_rows(workload, args)
        if not args.rows_json:
            _print_table(
                rows, args, _device_name(args)
            )  # after each workload, so a time-out still leaves a table
    if args.rows_json:  # a child of --isolate
        profiles = [{"workload": w, "system": s, "categories": c} for (w, s), c in KERNEL_PROFILES.items()]
        write_rows(args.rows_json, [{"row": asdict(r)} for r in rows] + [{"profile": p} for p in profiles])
        return
    print_kernel_categories(KERNEL_PROFILES)


def _device_name(args: argparse.Namespace) -> str:
    return torch.cuda.get_device_name() if args.device == "cuda" else "cpu"


def _workload_rows(workload: str, args: argparse.Namespace) -> list[Row]:
    full = (args.size or ("full" if args.device == "cuda" else "tiny")) == "full"
    dtype = getattr(torch, args.dtype)
    rows: list[Row] = []
    model: torch.nn.Module | None = None
    torch.manual_seed(0)  # the same weights in every process of --isolate
    if workload == "gpt":
        shape = GPT_SIZES["small" if full else "tiny"]
        model = GPT(**{k: v for k, v in shape.items() if k != "batch"}).to(dtype)
        rows += _training_rows("gpt", model, {**shape}, args)
    elif workload == "llama":
        shape = LLAMA_SIZES["7b-4layers" if full else "tiny"]
        model = Llama(**{k: v for k, v in shape.items() if k != "batch"}).to(dtype)
        rows += _training_rows("llama", model, shape, args)
    elif workload == "mlp-eval":
        rows += _mlp_eval_rows(args)
    elif workload == "mlp":
        rows += _mlp_train_rows(args)
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    del model
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return rows


def _run_isolated(args: argparse.Namespace) -> None:
    """Each (workload, system) in a process of its own (``isolated.py``), then the one table."""
    rows: list[Row] = []
    for workload in args.workloads.split(","):
        for system in _systems(args):
            if workload == "mlp-eval" and system.startswith("thunder-step"):
                continue
            print(f"\n== {workload} / {system} (a process of its own)", flush=True)
            child = run_child(__file__, "--workloads", workload, "--systems", system)
            if isinstance(child, str):
                rows.append(Row(workload, system, float("nan"), float("nan"), None, error=child))
                continue
            rows += [Row(**item["row"]) for item in child if "row" in item]
            for item in child:
                if "profile" in item:
                    profile = item["profile"]
                    KERNEL_PROFILES[(profile["workload"], profile["system"])] = profile["categories"]
        _print_table(rows, args, _device_name(args))
    print_kernel_categories(KERNEL_PROFILES)


if __name__ == "__main__":
    main()
