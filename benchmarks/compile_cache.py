"""Start-up time with a cold and a warm on-disk cache: thunder.jit and torch.compile side by side.

Each run is a fresh process that imports the library, builds GPT-2 small's shapes (12 layers, d=768,
12 heads, seq 64; latency.py's plain torch.nn model) and times its first call (forward, and with
``--training`` also ``loss.backward()``), which traces and compiles, and then the same call again:
the difference is what compiling cost that process. The first run of a system starts
from an empty cache folder (``THUNDER_CACHE_DIR`` for thunder, ``TORCHINDUCTOR_CACHE_DIR`` for
torch.compile), the next ``--warm`` runs find what it left there. Printed per run: the import, the
model's construction, the first call, and for thunder the stages of its compile.

    python benchmarks/compile_cache.py                      # forward, thunder and torch.compile
    python benchmarks/compile_cache.py --training --warm 2  # forward and backward
    python benchmarks/compile_cache.py --skip-compile       # thunder only (torch.compile needs a C++ compiler on CPU)
    python benchmarks/compile_cache.py --layers 2           # a smaller model
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

_START = time.perf_counter()


def child(system: str, training: bool, layers: int, device: str) -> None:
    """One process: import, build, first call; prints one JSON line."""
    import torch

    if system == "thunder":
        import thunder
    imported = time.perf_counter()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from latency import GPT2Small

    torch.manual_seed(0)
    model = GPT2Small(layers=layers).to(device)
    if not training:
        model = model.eval().requires_grad_(False)
    x = torch.randn(1, 64, 768, device=device)
    built = time.perf_counter()
    compiled = thunder.jit(model) if system == "thunder" else torch.compile(model)
    step(compiled, x, training, device)
    done = time.perf_counter()
    step(
        compiled, x, training, device
    )  # the same call again: what the first one cost beyond it was compiling
    second = time.perf_counter() - done
    result = {
        "import": imported - _START,
        "build": built - imported,
        "first call": done - built,
        "total": done - _START,
    }
    result["second call"] = second
    if system == "thunder":
        stats = thunder.compile_stats(compiled)
        result["stages"] = stats.last_stage_seconds
        result["disk"] = [stats.disk_cache_hits, stats.disk_cache_misses, stats.disk_cache_writes]
        result["skip"] = stats.disk_cache_skip_reason
    print(json.dumps(result))


def step(compiled: Any, x: Any, training: bool, device: str) -> None:
    import torch

    out = compiled(x)
    if training:
        out.float().square().mean().backward()
    if device == "cuda":
        torch.cuda.synchronize()


def run(system: str, args: argparse.Namespace, folder: str) -> dict:
    env = dict(os.environ)
    env["THUNDER_CACHE_DIR"] = os.path.join(folder, "thunder")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    command = [
        sys.executable,
        __file__,
        "--child",
        system,
        "--layers",
        str(args.layers),
        "--device",
        args.device,
    ]
    command += ["--training"] if args.training else []
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{system} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--training", action="store_true", help="forward and loss.backward()")
    parser.add_argument("--warm", type=int, default=2, help="runs with the warm cache")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--skip-compile", action="store_true", help="thunder only")
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    parser.add_argument("--child", choices=["thunder", "torch.compile"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.training, args.layers, args.device)
        return
    systems = ["thunder"] + ([] if args.skip_compile else ["torch.compile"])
    what = "forward + backward" if args.training else "forward"
    print(f"GPT-2 small shapes ({args.layers} layers, d=768, seq 64), {what}, {args.device}; seconds")
    print(
        f"{'system':14} {'cache':6} {'import':>7} {'build':>7} {'1st call':>9} {'2nd call':>9} {'total':>7}  thunder stages"
    )
    firsts: dict[str, list[float]] = {}
    for system in systems:
        with tempfile.TemporaryDirectory(prefix="compile-cache-") as folder:
            for index in range(1 + args.warm):
                result = run(system, args, folder)
                cache = "cold" if index == 0 else "warm"
                overhead = result["first call"] - result["second call"]
                firsts.setdefault(f"{system} {cache}", []).append(overhead)
                stages = ""
                if system == "thunder":
                    shown = {k: v for k, v in result["stages"].items() if v >= 0.01}
                    stages = ", ".join(f"{k} {v:.2f}" for k, v in shown.items())
                    stages += f"; disk hits/misses/writes {result['disk']}"
                    stages += f" (not cached: {result['skip']})" if result["skip"] else ""
                print(
                    f"{system:14} {cache:6} {result['import']:7.2f} {result['build']:7.2f} "
                    f"{result['first call']:9.2f} {result['second call']:9.2f} {result['total']:7.2f}  {stages}"
                )
    best = {name: min(values) for name, values in firsts.items()}
    print("\nfirst call minus second call (the compile's cost), best run:")
    print(", ".join(f"{name} {seconds:.2f} s" for name, seconds in best.items()))
    if "thunder warm" in best and "torch.compile warm" in best:
        print(f"thunder warm / torch.compile warm: {best['thunder warm'] / best['torch.compile warm']:.2f}")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
