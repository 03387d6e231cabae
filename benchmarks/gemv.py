"""One-row matrix products (decode's weight reads): cuBLAS through ``F.linear`` against thunder's Triton
GEMV, single and grouped, for the weight shapes of the inference benchmark's models.

Weights are rotated over copies that together exceed the L2 cache, and every variant is timed as
CUDA-graph replays of a run over all copies, as a decode step replays them. Prints achieved GB/s
(weights + activations read, outputs written) and, with ``--sweep``, the best Triton configuration.

``--norm`` times a Llama layer's residual add and RMS norm before the projections that read the
norm (q/k/v, gate/up, the head) instead: one fused add+norm kernel (torch.compile's, as nvFuser's
region is in thunder's trace without the fold) then the GEMV, against ``rms_norm_gemv`` (the add
and the norm folded into the GEMV's launch, ``core/transforms/fold_rms_norms.py``).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import time

import torch
import torch.nn.functional as F
import triton

from thunder.executors.triton.gemv import gemv, gemv_config, rms_norm_gemv

SHAPES = {  # name: (K, [N, ...]) ; several N: one grouped launch against one F.linear each
    "tinyllama q": (2048, [2048]),
    "tinyllama kv": (2048, [256]),
    "tinyllama qkv": (2048, [2048, 256, 256]),
    "tinyllama gate+up": (2048, [5632, 5632]),
    "tinyllama down": (5632, [2048]),
    "tinyllama head": (2048, [32000]),
    "8b q/o": (4096, [4096]),
    "8b kv": (4096, [1024]),
    "8b qkv": (4096, [4096, 1024, 1024]),
    "8b gate+up": (4096, [14336, 14336]),
    "8b down": (14336, [4096]),
    "8b head": (4096, [128256]),
}


def copy_bandwidth() -> float:
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        b.copy_(a)
    end.record()
    torch.cuda.synchronize()
    return 2 * a.numel() * 10 / (start.elapsed_time(end) / 1e3) / 1e9


def time_graph(run, copies: int, repeats: int = 20) -> float:
    """Microseconds per call: median over graph replays of ``copies`` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / copies)
    return statistics.median(times)


def check(x: torch.Tensor, weights: list[torch.Tensor], config) -> float:
    outs = gemv(x, weights, None, config)
    worst = 0.0
    for out, w in zip(outs, weights):
        ref = (x.double() @ w.double().T).float()
        worst = max(worst, ((out.float() - ref).norm() / ref.norm()).item())
    return worst


def host_time(dtype: torch.dtype, calls: int = 2000) -> None:
    """Microseconds of host time per call, launching without graphs (a jitted decode step without
    CUDA graphs is host-bound), for one-row products of small weights."""
    x = torch.randn(1, 1, 2048, device="cuda", dtype=dtype)
    weights = [torch.randn(n, 2048, device="cuda", dtype=dtype) for n in (2048, 256, 256)]
    fns = {
        "F.linear x1": lambda: F.linear(x, weights[0]),
        "F.linear x3": lambda: [F.linear(x, w) for w in weights],
        "gemv x1": lambda: gemv(x, weights[:1]),
        "gemv group of 3": lambda: gemv(x, weights),
    }
    for name, fn in fns.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
        print(f"host {name:16} {best:6.1f} us/call")


_CONFIGS = list(itertools.product([1, 2, 4, 8], [256, 512, 1024, 2048], [4, 8]))
NORM_SHAPES = ["tinyllama qkv", "tinyllama gate+up", "tinyllama head", "8b qkv", "8b gate+up", "8b head"]


def add_rms_norm(x: torch.Tensor, addend: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    """A residual connection's add, then ``LlamaRMSNorm``, as transformers writes them."""
    h = x + addend
    normed = h.to(torch.float32)
    normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + eps)
    return h, weight * normed.to(h.dtype)


def norm_rows(dtype: torch.dtype, shapes: list[str], sweep: bool = False) -> None:
    """Add + RMS norm + GEMV as two launches (a compiled add+norm kernel, then the GEMV) against one;
    with ``sweep``, also the best (BLOCK_N, BLOCK_K, warps) for the folded launch."""
    fused_norm = torch.compile(add_rms_norm, dynamic=False, fullgraph=True)
    rows = []
    for name in shapes:
        k, ns = SHAPES[name]
        group_bytes = sum(n * k for n in ns) * dtype.itemsize
        copies = max(2, min(64, (512 << 20) // group_bytes))
        sets = [[torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5 for n in ns] for _ in range(copies)]
        x, addend = (torch.randn(1, 1, k, device="cuda", dtype=dtype) for _ in range(2))
        g = 1 + 0.1 * torch.randn(k, device="cuda", dtype=dtype)

        def two_launches() -> None:
            for weights in sets:
                _, normed = fused_norm(x, addend, g)
                gemv(normed, weights)

        def eager_norm() -> None:
            for weights in sets:
                _, normed = add_rms_norm(x, addend, g)
                gemv(normed, weights)

        def one_launch(config=None) -> None:
            for weights in sets:
                rms_norm_gemv(x, g, 1e-6, weights, addend=addend, config=config)

        h, normed = add_rms_norm(x, addend, g)
        *products, total = rms_norm_gemv(x, g, 1e-6, sets[0], addend=addend)
        error = max(
            ((p.double() - F.linear(normed, w).double()).norm() / F.linear(normed, w).double().norm()).item()
            for p, w in zip(products, sets[0])
        )
        assert torch.equal(total, h) or not x.is_cuda  # Triton's interpreter truncates bfloat16 sums
        times = [time_graph(run, copies) for run in (eager_norm, two_launches, one_launch)]
        gemv_alone = time_graph(lambda: [gemv(normed, weights) for weights in sets], copies)
        best, best_config = times[-1], gemv_config(k, sum(ns))
        for config in _CONFIGS if sweep else []:
            if config[1] > 2 * triton.next_power_of_2(k):
                continue
            try:
                t = time_graph(functools.partial(one_launch, config), copies, repeats=7)
            except Exception as error_:  # a config that does not compile is skipped
                print(f"  {name} {config}: {type(error_).__name__}")
                continue
            if t < best:
                best, best_config = t, config
        rows.append((name, *times, gemv_alone, best, best_config, error))
        print(rows[-1], flush=True)
    print(
        f"\n{'shape':20} {'eager norm+gemv us':>18} {'compiled norm+gemv us':>21} {'folded us':>9} "
        f"{'gemv alone us':>13} {'saved us':>8} {'best folded us':>14} best config      rel.err vs eager"
    )
    for name, eager, two, one, alone, best, config, error in rows:
        print(
            f"{name:20} {eager:18.2f} {two:21.2f} {one:9.2f} {alone:13.2f} {two - one:8.2f} {best:14.2f} "
            f"{str(config):16} {error:.1e}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--host", action="store_true", help="only the host's time per launch, no graphs")
    parser.add_argument(
        "--norm",
        action="store_true",
        help="residual add + RMS norm + GEMV: two launches against one (folded)",
    )
    args = parser.parse_args()
    if args.host:
        host_time(getattr(torch, args.dtype))
        return
    if args.norm:
        print(f"{torch.cuda.get_device_name()}, {args.dtype}")
        shapes = NORM_SHAPES if args.shapes == ",".join(SHAPES) else args.shapes.split(",")
        norm_rows(getattr(torch, args.dtype), shapes, args.sweep)
        return
    dtype = getattr(torch, args.dtype)
    print(f"{torch.cuda.get_device_name()}: device copy {copy_bandwidth():.0f} GB/s (read + write)")
    configs = _CONFIGS
    rows = []
    for name in args.shapes.split(","):
        k, ns = SHAPES[name]
        group_bytes = sum(n * k for n in ns) * dtype.itemsize
        copies = max(2, min(64, (512 << 20) // group_bytes))
        sets = [[torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5 for n in ns] for _ in range(copies)]
        x = torch.randn(1, 1, k, device="cuda", dtype=dtype)
        moved = group_bytes + (k + sum(ns)) * dtype.itemsize

        def cublas() -> None:
            for weights in sets:
                for w in weights:
                    F.linear(x, w)

        def triton_run(config):
            def run() -> None:
                for weights in sets:
                    gemv(x, weights, None, config)

            return run

        base = time_graph(cublas, copies)
        chosen = gemv_config(k, sum(ns))
        error = check(x, sets[0], chosen)
        mine = time_graph(triton_run(chosen), copies)
        best, best_config = mine, chosen
        if args.sweep:
            for config in configs:
                if config[1] > 2 * triton.next_power_of_2(k):
                    continue
                try:
                    t = time_graph(triton_run(config), copies, repeats=7)
                except Exception as error_:  # a config that does not compile is skipped
                    print(f"  {name} {config}: {type(error_).__name__}")
                    continue
                if t < best:
                    best, best_config = t, config
        rows.append((name, base, mine, best, best_config, moved, error))
        print(rows[-1], flush=True)
    print(
        f"\n{'shape':20} {'cuBLAS us':>10} {'GB/s':>6} {'gemv us':>8} {'GB/s':>6} {'best us':>8} {'GB/s':>6} best config      rel.err"
    )
    for name, base, mine, best, config, moved, error in rows:
        gbs = lambda t: moved / (t * 1e-6) / 1e9  # noqa: E731
        print(
            f"{name:20} {base:10.2f} {gbs(base):6.0f} {mine:8.2f} {gbs(mine):6.0f} {best:8.2f} {gbs(best):6.0f} "
            f"{str(config):16} {error:.1e}"
        )


if __name__ == "__main__":
    main()
