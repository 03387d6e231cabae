"""Start-up time with a cold and a warm on-disk cache: thunder.jit and torch.compile side by side.

Each run is a fresh process that imports the library, builds a model and times its first call
(forward, and with ``--training`` also ``loss.backward()``), which traces and compiles, and then the
same call again: the difference is what compiling cost that process. The first run of a system
starts from an empty cache folder (``THUNDER_CACHE_DIR`` for thunder, ``TORCHINDUCTOR_CACHE_DIR``
for torch.compile), the next ``--warm`` runs find what it left there (with ``--no-disk-cache`` every
run compiles from scratch: they are repeats). Printed per run: the import, the model's construction,
the first call, and for thunder the stages of its compile; then, for thunder, each stage's median
over the runs.

Models (``--model``): ``gpt2-latency`` (default), GPT-2 small's shapes as latency.py's plain
torch.nn model (12 layers, d=768, seq 64; ``--layers``); ``gpt2`` and ``llama``, the training
workloads of ../shared/BENCHMARKS.md (training.py's GPT with GPT-2 small's 12 layers, llama.py's
4-layer Llama-2-7B-shaped model), each taking token ids and returning the float32 cross-entropy.
Thunder's own work (tracing, transforms, codegen) depends on the number of ops, not on the sizes
of the tensors: ``--narrow`` (the default on a CPU) keeps every layer and op but makes the widths,
the sequence and the vocabulary small.

Thunder's stage times are thread CPU seconds (``time.thread_time``, the pipeline's clock swapped in
this benchmark's processes): another process on the machine does not count, and neither does
garbage collection's share, printed apart (``gc``: collections during the first call). On a CPU
machine, ``--nvfuser-claims`` gives thunder nvFuser's claims and regions (its executor with the
CUDA check off), so that the fusion pass meets the regions it makes on a GPU; each region then
fails to run (nvFuser is not installed) and falls back to torch, which the first call's time
includes but the stages do not.

    python benchmarks/compile_cache.py                      # forward, thunder and torch.compile
    python benchmarks/compile_cache.py --training --warm 2  # forward and backward
    python benchmarks/compile_cache.py --skip-compile       # thunder only (torch.compile needs a C++ compiler on CPU)
    python benchmarks/compile_cache.py --layers 2           # a smaller model
    # thunder's own compile of the Llama training step, as on a GPU, on the CPU (the README's table):
    python benchmarks/compile_cache.py --model llama --training --skip-compile --no-disk-cache --nvfuser-claims --warm 4
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from typing import Any

_START = time.perf_counter()

MODELS = ("gpt2-latency", "gpt2", "llama")


def child(system: str, args: argparse.Namespace) -> None:
    """One process: import, build, first call; prints one JSON line."""
    import torch

    if system == "thunder":
        import thunder
    imported = time.perf_counter()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    torch.manual_seed(0)
    model, inputs, loss_of = build(args)
    built = time.perf_counter()
    if system == "thunder":
        executors = [_nvfuser_claims_on_cpu(), "torch"] if args.nvfuser_claims else None
        _thread_clock()
        compiled = thunder.jit(model, executors=executors)
    else:
        compiled = torch.compile(model)
    collected = _GarbageCollections()
    cpu = time.thread_time()
    step(compiled, inputs, loss_of, args.training, args.device)
    first_cpu = time.thread_time() - cpu
    done = time.perf_counter()
    gc_seconds = collected.stop()
    step(compiled, inputs, loss_of, args.training, args.device)  # the same call again
    second = time.perf_counter() - done
    result = {
        "import": imported - _START,
        "build": built - imported,
        "first call": done - built,
        "first call cpu": first_cpu,
        "gc": gc_seconds,
        "total": done - _START,
    }
    result["second call"] = second
    if system == "thunder":
        stats = thunder.compile_stats(compiled)
        result["stages"] = stats.last_stage_seconds
        result["disk"] = [stats.disk_cache_hits, stats.disk_cache_misses, stats.disk_cache_writes]
        result["skip"] = stats.disk_cache_skip_reason
    print(json.dumps(result))


def build(args: argparse.Namespace) -> tuple[Any, tuple, Any]:
    """The model, its inputs, and how to get a loss from its output."""
    import torch

    device, dtype = args.device, getattr(torch, args.dtype)
    if args.model == "gpt2-latency":
        from latency import GPT2Small

        model = GPT2Small(layers=args.layers).to(device, dtype)
        inputs: tuple = (torch.randn(1, 64, 768, device=device, dtype=dtype),)
        loss_of = lambda out: out.float().square().mean()  # noqa: E731
    else:
        if args.model == "gpt2":
            from training import GPT, GPT_SIZES

            size, make = dict(GPT_SIZES["small"]), GPT
            narrow = dict(d=192, heads=12, seq=64, vocab=512, batch=2)
        else:
            from llama import LLAMA_SIZES, Llama

            size, make = dict(LLAMA_SIZES["7b-4layers"]), Llama
            narrow = dict(d=256, heads=32, hidden=512, seq=64, vocab=512, batch=2)
        if args.narrow:
            size.update(narrow)
        batch = size.pop("batch")
        model = make(**size).to(device, dtype)
        ids = torch.randint(0, size["vocab"], (batch, size["seq"]), device=device)
        inputs = (ids, torch.randint(0, size["vocab"], (batch, size["seq"]), device=device))
        loss_of = lambda out: out  # noqa: E731 -- the model returns its loss
    if not args.training:
        model = model.eval().requires_grad_(False)
    return model, inputs, loss_of


def step(compiled: Any, inputs: tuple, loss_of: Any, training: bool, device: str) -> None:
    import torch

    loss = loss_of(compiled(*inputs))
    if training:
        loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()


def _thread_clock() -> None:
    """Thunder's stage times in thread CPU seconds: its pipeline and disk cache read ``time.perf_counter``."""
    from thunder.core import disk_cache, pipeline

    clock = types.SimpleNamespace(perf_counter=time.thread_time)
    pipeline.time = disk_cache.time = clock  # type: ignore[attr-defined]


def _nvfuser_claims_on_cpu() -> Any:
    """nvFuser's executor without its CUDA checks: its claims and regions on the CPU."""
    from thunder.core.executor import register_executor
    from thunder.executors.nvfuser.executor import NvFuserExecutor

    class NvFuserClaimsOnCpu(NvFuserExecutor):
        def is_available(self) -> tuple[bool, str]:
            return True, ""

        def can_fuse(self, bound_symbol: Any) -> bool:
            return self.fuses_on_any_device(bound_symbol)

    import warnings

    from thunder.core.fusion_fallback import ExecutorFallbackWarning

    warnings.simplefilter("ignore", ExecutorFallbackWarning)  # each region, once: expected here
    return register_executor(NvFuserClaimsOnCpu("nvfuser_claims_on_cpu"))


class _GarbageCollections:
    """Thread CPU seconds spent in the garbage collector from now until ``stop``."""

    def __init__(self) -> None:
        self.seconds, self._start = 0.0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start

    def stop(self) -> float:
        gc.callbacks.remove(self._callback)
        return self.seconds


def run(system: str, args: argparse.Namespace, folder: str) -> dict:
    env = dict(os.environ)
    env["THUNDER_CACHE_DIR"] = os.path.join(folder, "thunder")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    if args.no_disk_cache:
        env["THUNDER_DISK_CACHE"] = "0"
    command = [sys.executable, __file__, "--child", system, "--layers", str(args.layers)]
    command += ["--device", args.device, "--model", args.model, "--dtype", args.dtype]
    command += ["--training"] if args.training else []
    command += ["--narrow"] if args.narrow else ["--full-width"]
    command += ["--nvfuser-claims"] if args.nvfuser_claims else []
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{system} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _describe(args: argparse.Namespace) -> str:
    what = "forward + backward" if args.training else "forward"
    shapes = {
        "gpt2-latency": f"GPT-2 small shapes ({args.layers} layers, d=768, seq 64)",
        "gpt2": "GPT-2 124M (training.py, 12 layers"
        + (", narrow: d=192, seq 64, vocab 512)" if args.narrow else ")"),
        "llama": "Llama-2-7B shape, 4 layers (llama.py"
        + (", narrow: d=256, hidden 512, seq 64, vocab 512)" if args.narrow else ")"),
    }[args.model]
    fusion = ", nvFuser's claims on the CPU" if args.nvfuser_claims else ""
    cache = ", disk cache off" if args.no_disk_cache else ""
    return f"{shapes}, {args.dtype}, {what}, {args.device}{fusion}{cache}; seconds"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", choices=MODELS, default="gpt2-latency")
    parser.add_argument("--training", action="store_true", help="forward and loss.backward()")
    parser.add_argument("--warm", type=int, default=2, help="runs with the warm cache")
    parser.add_argument("--layers", type=int, default=12, help="gpt2-latency's layers")
    parser.add_argument("--skip-compile", action="store_true", help="thunder only")
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    parser.add_argument(
        "--dtype", choices=["float32", "bfloat16"], help="default: float32 for gpt2-latency, else bfloat16"
    )
    width = parser.add_mutually_exclusive_group()
    width.add_argument("--narrow", action="store_true", default=None, help="small widths (default on a CPU)")
    width.add_argument("--full-width", dest="narrow", action="store_false", help="the workload's own sizes")
    parser.add_argument(
        "--no-disk-cache", action="store_true", help="THUNDER_DISK_CACHE=0: every run compiles"
    )
    parser.add_argument(
        "--nvfuser-claims", action="store_true", help="nvFuser's regions on a CPU (see above)"
    )
    parser.add_argument("--child", choices=["thunder", "torch.compile"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtype = args.dtype or ("float32" if args.model == "gpt2-latency" else "bfloat16")
    if args.narrow is None:
        args.narrow = args.device != "cuda" and args.model != "gpt2-latency"
    if args.child:
        child(args.child, args)
        return
    systems = ["thunder"] + ([] if args.skip_compile else ["torch.compile"])
    print(_describe(args))
    print(
        f"{'system':14} {'cache':6} {'import':>7} {'build':>7} {'1st call':>9} {'2nd call':>9} {'total':>7}  thunder stages"
    )
    firsts: dict[str, list[float]] = {}
    thunder_runs: list[dict] = []
    for system in systems:
        with tempfile.TemporaryDirectory(prefix="compile-cache-") as folder:
            for index in range(1 + args.warm):
                result = run(system, args, folder)
                cache = "off" if args.no_disk_cache else "cold" if index == 0 else "warm"
                overhead = result["first call"] - result["second call"]
                firsts.setdefault(f"{system} {cache}", []).append(overhead)
                stages = ""
                if system == "thunder":
                    thunder_runs.append(result)
                    shown = {k: v for k, v in result["stages"].items() if v >= 0.01}
                    stages = ", ".join(f"{k} {v:.2f}" for k, v in shown.items())
                    stages += f"; gc {result['gc']:.2f}; disk hits/misses/writes {result['disk']}"
                    stages += f" (not cached: {result['skip']})" if result["skip"] else ""
                print(
                    f"{system:14} {cache:6} {result['import']:7.2f} {result['build']:7.2f} "
                    f"{result['first call']:9.2f} {result['second call']:9.2f} {result['total']:7.2f}  {stages}"
                )
    if thunder_runs:
        _print_stage_medians(thunder_runs)
    best = {name: min(values) for name, values in firsts.items()}
    print("\nfirst call minus second call (the compile's cost), best run:")
    print(", ".join(f"{name} {seconds:.2f} s" for name, seconds in best.items()))
    if "thunder warm" in best and "torch.compile warm" in best:
        print(f"thunder warm / torch.compile warm: {best['thunder warm'] / best['torch.compile warm']:.2f}")


# Stages grouped as the README's table: the forward's and backward's passes of one kind together.
_GROUPS = {
    "autograd": "autograd",
    "rematerialization": "rematerialization",
    "executors": "executors (claims, fusion)",
    "codegen": "codegen",
    "prologue codegen": "codegen",
    "frontend": "frontend",
}


def _print_stage_medians(runs: list[dict]) -> None:
    """Thunder's stages, grouped, median over the runs (thread CPU seconds)."""
    grouped: list[dict[str, float]] = []
    for result in runs:
        groups: dict[str, float] = {}
        for stage, seconds in result["stages"].items():
            kind = stage.removeprefix("forward ").removeprefix("backward ")
            name = _GROUPS.get(kind, "disk cache" if kind.startswith("disk cache") else "other transforms")
            groups[name] = groups.get(name, 0.0) + seconds
        groups["total (thunder's compile)"] = sum(result["stages"].values())
        groups["gc during the first call"] = result["gc"]
        groups["first call, thread CPU"] = result["first call cpu"]
        grouped.append(groups)
    print(f"\nthunder's stages, median of {len(runs)} runs (thread CPU seconds):")
    for name in grouped[0]:
        values = [g.get(name, 0.0) for g in grouped]
        print(
            f"  {name:28} {statistics.median(values):7.3f}   (min {min(values):.3f}, max {max(values):.3f})"
        )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
