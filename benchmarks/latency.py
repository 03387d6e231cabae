"""Per-call latency of small programs: eager, torch.compile and thunder side by side, one process.

Measures what a cache hit costs (``a + b`` on 2x2 tensors) and the MNIST tutorial MLP's eval forward
(batch 8, no_grad), as in ../shared/BENCHMARKS.md. Prints a table with thunder's ratios last.

    python benchmarks/latency.py            # on CUDA if available, else CPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import thunder


def mnist_mlp() -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    sizes = [784, 784, 784, 784, 28]
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU(), torch.nn.Dropout(0.1)]
    return torch.nn.Sequential(*layers, torch.nn.Linear(28, 10), torch.nn.Dropout(0.1))


def per_call_us(fn: Callable[[], object], device: str, calls: int = 2000, repeats: int = 7) -> float:
    """Median over repeats of the wall time per call, synchronizing once per batch of calls."""
    for _ in range(50):
        fn()
    samples = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def workloads(device: str) -> dict[str, tuple[Callable, tuple]]:
    a, b = torch.randn(2, 2, device=device), torch.randn(2, 2, device=device)
    net = mnist_mlp().to(device).eval().requires_grad_(False)
    return {
        "a + b": (lambda x, y: x + y, (a, b)),
        "MNIST MLP eval forward": (net, (torch.rand(8, 784, device=device),)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = parser.parse_args().device
    rows = []
    for name, (fn, args) in workloads(device).items():
        compiled, jitted = torch.compile(fn), thunder.jit(fn)
        with torch.no_grad():
            expected = fn(*args)
            torch.testing.assert_close(jitted(*args), expected)  # never time a wrong answer
            times = {label: per_call_us(lambda f=f: f(*args), device)
                     for label, f in (("eager", fn), ("torch.compile", compiled), ("thunder", jitted))}  # fmt: skip
        rows.append((name, times))
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, torch {torch.__version__}")
    print(
        f"{'workload (us/call)':26} {'eager':>8} {'compile':>8} {'thunder':>8} {'th/eager':>9} {'th/compile':>10}"
    )
    for name, t in rows:
        print(f"{name:26} {t['eager']:8.1f} {t['torch.compile']:8.1f} {t['thunder']:8.1f} "
              f"{t['thunder'] / t['eager']:9.2f} {t['thunder'] / t['torch.compile']:10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
