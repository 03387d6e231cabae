"""Per-call latency of small programs and first-call time of a GPT-2-small forward, one process.

Per call, eager vs torch.compile vs thunder: what a cache hit costs (``a + b`` on 2x2 tensors), the
MNIST tutorial's 5-layer MLP eval forward (batch 8, no_grad), as in ../shared/BENCHMARKS.md, and
training steps (``zero_grad``, forward, ``loss.backward()``; no optimizer) of that MLP and of tiny
Hugging Face models (Llama, GPT-2, BERT) when ``transformers`` is installed, timed interleaved; a
table with thunder's ratios last. Then the first call of thunder.jit on a GPT-2-small-shaped model
(12 layers, d=768, 12 heads, seq 64, written below in plain torch.nn): trace + compile time per stage.

    python benchmarks/latency.py                 # on CUDA if available, else CPU
    python benchmarks/latency.py --skip-compile  # without torch.compile (it needs a C++ compiler on CPU)
    python benchmarks/latency.py --skip-compile --training --skip-first-call  # training steps only
    python benchmarks/latency.py --skip-compile --training --skip-first-call --threads 1  # as the README
"""

from __future__ import annotations

import argparse
import math
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


class Block(torch.nn.Module):
    """A GPT-2 block: pre-LayerNorm causal self-attention and a GELU MLP."""

    def __init__(self, d: int, heads: int, seq: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.c_attn, self.c_proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.c_fc, self.mlp_proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d = x.shape
        qkv = self.c_attn(self.ln_1(x))
        q, k, v = (qkv[:, :, i * d : (i + 1) * d].view(batch, seq, self.heads, d // self.heads).transpose(1, 2)
                   for i in range(3))  # fmt: skip
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads)) + self.mask[:seq, :seq]
        y = (torch.nn.functional.softmax(scores, dim=-1) @ v).transpose(1, 2).contiguous().view(batch, seq, d)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2Small(torch.nn.Module):
    """GPT-2 small's shapes; it takes token embeddings (batch, seq, d) and returns the logits."""

    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, seq: int = 64, vocab: int = 50257):
        super().__init__()
        self.wpe = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
        self.h = torch.nn.ModuleList([Block(d, heads, seq) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.wpe[: x.shape[1]]
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def first_call(device: str) -> None:
    """Time thunder's first call of the GPT-2-small forward: tracing and compiling, then running."""
    model = GPT2Small().to(device).eval().requires_grad_(False)
    x = torch.randn(1, 64, 768, device=device)
    start = time.perf_counter()
    expected = model(x)
    eager = time.perf_counter() - start
    jitted = thunder.jit(model)
    start = time.perf_counter()
    actual = jitted(x)
    if device == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - start
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-3)
    stages = thunder.compile_stats(jitted).last_stage_seconds
    compile_seconds = sum(stages.values())
    print("\nGPT-2 small forward (12 layers, d=768, 12 heads, seq 64), first call of thunder.jit:")
    print(
        f"  trace + compile {compile_seconds:.3f} s, whole first call {total:.3f} s (eager forward {eager:.3f} s)"
    )
    print("  " + ", ".join(f"{name} {seconds * 1e3:.1f} ms" for name, seconds in stages.items()))


def per_call_us(fn: Callable[[], object], device: str, seconds: float = 0.2, repeats: int = 7) -> float:
    """Median over repeats of the wall time per call, synchronizing once per batch of calls; a batch
    holds as many calls as run in about ``seconds`` (at least 10)."""
    start = time.perf_counter()
    for _ in range(20):
        fn()
    calls = max(10, min(5000, int(seconds / max((time.perf_counter() - start) / 20, 1e-9))))
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
        "5-layer MLP eval forward": (net, (torch.rand(8, 784, device=device),)),
    }


def tiny_hf_models(device: str) -> dict[str, tuple[torch.nn.Module, dict]]:
    """Tiny Hugging Face models (2 layers, width 32, vocabulary 128; batch 2, sequence 8) and their
    inputs with labels, so that the output carries the loss; empty without transformers."""
    try:
        import transformers
    except ImportError:
        return {}
    t = transformers
    llama = t.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=16, attn_implementation="sdpa",
    )  # fmt: skip
    gpt2 = t.GPT2Config(
        n_embd=32, n_layer=2, n_head=4, vocab_size=128, n_positions=16, bos_token_id=0, eos_token_id=0,
        attn_implementation="sdpa",
    )  # fmt: skip
    bert = t.BertConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=16, attn_implementation="sdpa",
    )  # fmt: skip
    ids = torch.randint(0, 128, (2, 8), device=device)
    causal = {"input_ids": ids, "labels": ids, "use_cache": False}
    return {
        "tiny Llama": (t.LlamaForCausalLM(llama).to(device), causal),
        "tiny GPT-2": (t.GPT2LMHeadModel(gpt2).to(device), causal),
        "tiny BERT": (t.BertForMaskedLM(bert).to(device), {"input_ids": ids, "labels": ids}),
    }


def interleaved_us(
    candidates: dict[str, Callable[[], object]], device: str, seconds: float = 0.05, rounds: int = 21
) -> dict[str, tuple[float, float, float]]:
    """Per candidate: the median and the minimum over rounds of the wall time per call, and the median
    thread CPU time per call, in us. Each round times a batch of calls of every candidate in turn
    (the order alternating), so that other load on the machine falls on all of them alike; the
    thread CPU time leaves out the time the process was not running (it misses other threads'
    work: compare it only with one torch thread). A batch holds about ``seconds`` of the first
    candidate's calls (at least 5)."""
    first = next(iter(candidates.values()))
    start = time.perf_counter()
    for _ in range(5):
        first()
    calls = max(5, int(seconds / max((time.perf_counter() - start) / 5, 1e-9)))
    wall: dict[str, list[float]] = {label: [] for label in candidates}
    cpu: dict[str, list[float]] = {label: [] for label in candidates}
    order = list(candidates.items())
    for index in range(rounds):
        for label, fn in order if index % 2 == 0 else order[::-1]:
            if device == "cuda":
                torch.cuda.synchronize()
            start, start_cpu = time.perf_counter(), time.thread_time()
            for _ in range(calls):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
            cpu[label].append((time.thread_time() - start_cpu) / calls * 1e6)
            wall[label].append((time.perf_counter() - start) / calls * 1e6)
    return {
        label: (statistics.median(wall[label]), min(wall[label]), statistics.median(cpu[label]))
        for label in candidates
    }


def training_rows(device: str, skip_compile: bool) -> list[tuple[str, dict[str, float]]]:
    """Per training step (``zero_grad``, forward, ``backward``): eager, torch.compile, thunder.

    The MLP keeps its dropout (training mode), as in the MNIST tutorial; the Hugging Face models run
    in eval mode (no dropout), so that thunder's first loss can be checked against eager's. The
    candidates are timed interleaved (``interleaved_us``); the table shows median wall times, and a
    second table the minimum and the thread CPU time.
    """
    workloads = [("5-layer MLP train step", mnist_mlp().to(device), (torch.rand(8, 784, device=device),), {})]
    for name, (model, kwargs) in tiny_hf_models(device).items():
        workloads.append((f"{name} train step", model.eval(), (), kwargs))
    rows, details = [], []
    for name, model, args, kwargs in workloads:
        candidates = {"eager": model, "thunder": thunder.jit(model)}
        if not skip_compile:
            candidates["torch.compile"] = torch.compile(model)

        def step(
            f: Callable, model: torch.nn.Module = model, args: tuple = args, kwargs: dict = kwargs
        ) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            output = f(*args, **kwargs)
            loss = output.sum() if isinstance(output, torch.Tensor) else output.loss
            loss.backward()
            return loss

        if not model.training:  # never time a wrong answer
            torch.testing.assert_close(step(candidates["thunder"]), step(model))
        for f in candidates.values():  # compile, and warm up allocator and caches
            for _ in range(10):
                step(f)
        measured = interleaved_us({label: (lambda f=f: step(f)) for label, f in candidates.items()}, device)
        times = {label: wall for label, (wall, _, _) in measured.items()}
        times.setdefault("torch.compile", float("nan"))
        rows.append((name, times))
        details.append((name, measured))
    print(f"training steps, interleaved, torch threads {torch.get_num_threads()} (us/step): "
          "minimum wall time, median thread CPU time; thunder/eager of each")  # fmt: skip
    for name, measured in details:
        (_, eager_min, eager_cpu), (_, thunder_min, thunder_cpu) = measured["eager"], measured["thunder"]
        print(f"  {name:26} min {eager_min:8.1f} {thunder_min:8.1f} {thunder_min / eager_min:5.2f}   "
              f"cpu {eager_cpu:8.1f} {thunder_cpu:8.1f} {thunder_cpu / eager_cpu:5.2f}")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--training", action="store_true", help="only the training steps")
    parser.add_argument("--skip-first-call", action="store_true", help="leave the GPT-2 first call out")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (the README's CPU numbers use 1)")
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    device = options.device
    rows = []
    for name, (fn, args) in ({} if options.training else workloads(device)).items():
        jitted = thunder.jit(fn)
        candidates = [("eager", fn), ("thunder", jitted)]
        if not options.skip_compile:
            candidates.insert(1, ("torch.compile", torch.compile(fn)))
        with torch.no_grad():
            expected = fn(*args)
            torch.testing.assert_close(jitted(*args), expected)  # never time a wrong answer
            times = {label: per_call_us(lambda f=f: f(*args), device) for label, f in candidates}
        times.setdefault("torch.compile", float("nan"))
        rows.append((name, times))
    rows += training_rows(device, options.skip_compile)
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, torch {torch.__version__}")
    print(
        f"{'workload (us/call)':26} {'eager':>8} {'compile':>8} {'thunder':>8} {'th/eager':>9} {'th/compile':>10}"
    )
    for name, t in rows:
        print(f"{name:26} {t['eager']:8.1f} {t['torch.compile']:8.1f} {t['thunder']:8.1f} "
              f"{t['thunder'] / t['eager']:9.2f} {t['thunder'] / t['torch.compile']:10.2f}")  # fmt: skip
    if not options.skip_first_call:
        first_call(device)


if __name__ == "__main__":
    main()
