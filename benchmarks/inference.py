"""Greedy decoding with a Hugging Face Llama and a ``StaticCache``: eager vs torch.compile vs thunder.

The method of ../shared/BENCHMARKS.md ("Inference"): random bf16 weights, batch 1, a prompt of
``--prompt`` tokens, ``--new-tokens`` new tokens, a Python loop calling the model once per token
(``input_ids``, ``past_key_values``, ``position_ids``, ``cache_position``). "first sequence" is the
wall time of the first whole sequence, compilation included; prefill and decode come from a third
sequence (the second may still compile: a lazily initialized cache reads differently); decode is the median per-token time. torch.compile runs with ``mode="reduce-overhead"``
(its CUDA graphs), as Hugging Face recommends for a static cache. Achieved bandwidth counts the
weights and the KV cache read once per decoded token.

    python benchmarks/inference.py --models tinyllama,llama3-8b
    python benchmarks/inference.py --models tiny --device cpu --systems eager,thunder   # a smoke run
    python benchmarks/inference.py --host-overhead                # thunder's host work per decode step, CPU
    python benchmarks/inference.py --isolate                      # each row in a process of its own

``--isolate`` measures each (model, system) in a process of its own (``isolated.py`` says why; the
token comparison with eager's is made by the parent) and prints the same table: use it for the
numbers you report.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from isolated import ISOLATE_FLAG, run_child, write_rows

MODELS: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=512),
    # TinyLlama's 22 layers at the tiny width: its prologue, inputs and host work, little arithmetic
    "tiny22": dict(hidden_size=64, intermediate_size=176, num_hidden_layers=22, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512),
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, vocab_size=32000),
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256),
}  # fmt: skip
SYSTEMS = ("eager", "torch.compile", "thunder", "thunder+graphs")


@dataclass
class Row:
    model: str
    system: str
    first_s: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    bandwidth_gbs: float | None = None
    compiles: int | None = None
    same_tokens: str = ""
    error: str = ""


def build_model(name: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(max_position_embeddings=4096, **MODELS[name])
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)  # the same weights in every process of --isolate
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config).to(dtype)
    return model.eval()


def static_cache(model: torch.nn.Module, max_length: int) -> Any:
    """A StaticCache allocated up front: lazily, its tensors would be made inside the first (compiled)
    call, which torch.compile's CUDA graphs then own and overwrite (transformers says to initialize early)."""
    import transformers

    cache = transformers.StaticCache(config=model.config, max_cache_len=max_length)
    config = model.config
    parameter = next(model.parameters())
    head_dim = config.hidden_size // config.num_attention_heads
    cache.early_initialization(1, config.num_key_value_heads, head_dim, parameter.dtype, parameter.device)
    return cache


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _step(call: Callable, ids: torch.Tensor, cache: Any, start: int) -> torch.Tensor:
    positions = torch.arange(start, start + ids.shape[1], device=ids.device)
    logits = call(
        input_ids=ids, past_key_values=cache, position_ids=positions[None], cache_position=positions
    ).logits
    return logits[:, -1].argmax(-1, keepdim=True)


def generate(
    call: Callable, prompt: torch.Tensor, cache: Any, new_tokens: int, device: str
) -> tuple[list, float, list]:
    """Greedy tokens, the prefill time and each decode step's time (ms)."""
    cache.reset()
    _sync(device)
    start = time.perf_counter()
    token = _step(call, prompt, cache, 0)
    _sync(device)
    prefill_ms = (time.perf_counter() - start) * 1e3
    tokens, steps = [token], []
    for index in range(new_tokens - 1):
        start = time.perf_counter()
        token = _step(call, token, cache, prompt.shape[1] + index)
        _sync(device)
        steps.append((time.perf_counter() - start) * 1e3)
        tokens.append(token)
    return torch.cat(tokens, dim=1).tolist(), prefill_ms, steps


def _caller(system: str, model: torch.nn.Module) -> Callable:
    if system == "eager":
        return model
    if system == "torch.compile":
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)

        def step(**inputs: Any) -> Any:
            torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs are no longer read
            return compiled(**inputs)

        return step
    import thunder

    return thunder.jit(model, cuda_graphs=system == "thunder+graphs")


def _bytes_read_per_token(model: torch.nn.Module, cache_length: int) -> int:
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * cache_length
    return weights + kv * next(model.parameters()).element_size()


def measure(
    name: str, system: str, model: torch.nn.Module, args: argparse.Namespace, reference: list | None
) -> tuple[Row, list | None]:
    """One system's row, and its tokens (None where it failed)."""
    row = Row(name, system)
    torch.manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt), device=args.device)
    cache = static_cache(model, args.prompt + args.new_tokens)
    call = _caller(system, model)
    try:
        with torch.no_grad():
            start = time.perf_counter()
            generate(call, prompt, cache, args.new_tokens, args.device)
            row.first_s = time.perf_counter() - start
            # a second sequence may still compile (a cache initialized by the first call reads differently)
            generate(call, prompt, cache, args.new_tokens, args.device)
            tokens, row.prefill_ms, steps = generate(call, prompt, cache, args.new_tokens, args.device)
    except Exception as error:  # noqa: BLE001 - a failing system is a row of the table, not the end of the run
        row.error = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:120]}"
        return row, None
    row.decode_ms = statistics.median(steps)
    cache_length = (
        args.prompt + args.new_tokens // 2
    )  # the average length read (a static cache reads all of it)
    row.bandwidth_gbs = _bytes_read_per_token(model, cache_length) / (row.decode_ms * 1e-3) / 1e9
    if system.startswith("thunder"):
        import thunder

        row.compiles = thunder.cache_misses(call)
    if reference is not None:
        row.same_tokens = same_tokens(tokens, reference)
    return row, tokens


def same_tokens(tokens: list, reference: list) -> str:
    """How many leading tokens equal eager's: greedy tokens agree up to the first near-tie that rounding
    decides."""
    same = next((i for i, (a, b) in enumerate(zip(tokens[0], reference[0])) if a != b), len(reference[0]))
    return f"first {same}/{len(reference[0])}"


def _decode_steps(
    call: Callable, prompt: torch.Tensor, cache: Any, steps: int, device: str, profiler: Any = None
) -> list[float]:
    """A prefill, then ``steps`` decode steps (profiled, if a profiler is given); per step, the seconds
    until the call returned (the host's share: with CUDA graphs it returns once the replay is enqueued)."""
    cache.reset()
    token = _step(call, prompt, cache, 0)
    _sync(device)
    host = []
    with profiler if profiler is not None else contextlib.nullcontext():
        for index in range(steps):
            start = time.perf_counter()
            token = _step(call, token, cache, prompt.shape[1] + index)
            host.append(time.perf_counter() - start)
            _sync(device)
    return host


def profile_decode(
    name: str, system: str, model: torch.nn.Module, args: argparse.Namespace, steps: int = 16
) -> None:
    """Where a decode step's time goes: host time to enqueue it, GPU kernel time by kernel, wall time."""
    from torch.profiler import ProfilerActivity, profile

    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt), device=args.device)
    cache = static_cache(model, args.prompt + args.new_tokens)
    call = _caller(system, model)
    steps = min(steps, args.new_tokens - 1)  # the cache holds the prompt and new_tokens more
    with torch.no_grad():
        for _ in range(2):  # compile and capture first
            generate(call, prompt, cache, 4, args.device)
        host_ms = statistics.median(_decode_steps(call, prompt, cache, steps, args.device)) * 1e3
        profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        _decode_steps(call, prompt, cache, steps, args.device, profiler)
        if args.cprofile:  # the host's share by Python function
            import cProfile
            import pstats

            python_profiler = cProfile.Profile()
            python_profiler.runcall(_decode_steps, call, prompt, cache, steps, args.device)
            pstats.Stats(python_profiler).sort_stats("tottime").print_stats(14)
    kernels = [
        e for e in profiler.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0
    ]
    kernel_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / steps
    print(
        f"\nprofile {name} {system}: host {host_ms:.2f} ms/token to enqueue; GPU kernels {kernel_ms:.2f} ms/token"
    )
    for event in sorted(kernels, key=lambda e: -e.self_device_time_total)[:24]:
        share = event.self_device_time_total / 1e3 / steps
        print(f"  {share:7.3f} ms/token  {event.count // steps:4d}x  {event.key[:90]}")


def _best_per_call(
    fns: dict[str, Callable[[], Any]], calls: int, repeats: int, before: Callable[[], Any] = lambda: None
) -> dict[str, float]:
    """Microseconds per call of each of ``fns``: the best over ``repeats`` batches of ``calls``, the
    functions taking turns so that each sees the same load (the machine is shared)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            before()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def host_overhead(args: argparse.Namespace, model_name: str = "tiny22", repeats: int = 20) -> None:
    """Where thunder's host time per decode step goes, on the CPU (one thread): a whole step of eager and
    of thunder.jit (cache hit), then the parts of thunder's step timed on their own: its call without the
    computation (the module call, the cache lookup with the prologue, the epilogue), the CUDA-graph key
    that ``cuda_graphs=True`` computes per call (the key code path itself: graphs are not captured on the
    CPU) and the output rebuilt after a graph replay. With CUDA graphs the host runs these and the
    replay, not the computation's Python.
    """
    from torch.utils._pytree import tree_flatten, tree_unflatten

    import thunder
    from thunder.core.cuda_graphs import GraphedFunction, mutated_inputs
    from thunder.core.prologue import TensorChecks

    torch.set_num_threads(1)  # the CPU kernels are tiny; a second thread only adds noise
    steps = min(args.new_tokens - 1, 32)
    model = build_model(model_name, "cpu", torch.float32)
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt))
    cache = static_cache(model, args.prompt + steps + 1)
    jitted = thunder.jit(model)
    token = torch.tensor([[1]])
    positions = torch.arange(args.prompt, args.prompt + 1)
    inputs = dict(
        input_ids=token, past_key_values=cache, position_ids=positions[None], cache_position=positions
    )

    def prefill() -> None:  # a static cache has room for ``steps`` more tokens
        cache.reset()
        _step(model, prompt, cache, 0)

    with torch.no_grad():
        for _ in range(2):  # compile the prefill and the decode step
            generate(jitted, prompt, cache, 4, "cpu")
        steps_us = _best_per_call({"eager": lambda: model(**inputs), "thunder": lambda: jitted(**inputs)},
                                  steps, repeats, prefill)  # fmt: skip
        entry = jitted._thunder_jitted._cache[-1]  # the decode step's (the most recently used)
        prefill()
        fetched = entry.prologue(**inputs)
        result = entry.computation(*fetched)
        computation = entry.computation
        graphed = GraphedFunction(computation, mutated=mutated_inputs(entry.computation_traces[-1]))
        checks = [c for c in entry.prologue_traces[-1].constants.values() if isinstance(c, TensorChecks)]
        graphed.checked_strides = checks[0].covered if checks else None  # as the pipeline wires it
        flat, spec = tree_flatten(result)
        entry.computation = lambda *fetched: result  # thunder's call around its computation, on its own
        try:
            parts = _best_per_call(
                {
                    "around": lambda: jitted(**inputs),
                    "prologue": lambda: entry.prologue(**inputs),
                    "prologue and key": lambda: (entry.prologue(**inputs), graphed.key(fetched)),
                    "rebuild": lambda: tree_unflatten(flat, spec),
                },
                100,
                repeats,
            )
        finally:
            entry.computation = computation
    prologue_lines = len(str(entry.prologue_traces[-1]).splitlines())
    print(f"\nhost work per decode step, {model_name} ({model.config.num_hidden_layers} layers), CPU, 1 thread, "
          f"torch {torch.__version__}, best of {repeats}, us per call")  # fmt: skip
    rows = [
        ("eager step", steps_us["eager"]),
        ("thunder step (cache hit, no graphs)", steps_us["thunder"]),
        ("thunder's call without the computation", parts["around"]),
        (f"  of which the prologue ({prologue_lines} lines, {len(fetched)} inputs)", parts["prologue"]),
        (
            "with cuda_graphs=True, also per call: the graph key",
            parts["prologue and key"] - parts["prologue"],
        ),
        ("  and the output rebuilt after the replay", parts["rebuild"]),
        (
            "host work of a graphed step, less the replay",
            parts["around"] + parts["prologue and key"] - parts["prologue"] + parts["rebuild"],
        ),
    ]
    for label, value in rows:
        print(f"  {label:60} {value:9.1f}")


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[Row], args: argparse.Namespace, device_name: str) -> None:
    print(f"\n{device_name}, torch {torch.__version__}, prompt {args.prompt}, new tokens {args.new_tokens}, batch 1, "
          f"{args.dtype}, StaticCache, greedy")  # fmt: skip
    print(
        "| model | system | first sequence (s) | prefill (ms) | decode (ms/token) | GB/s | vs torch.compile "
        "| compiles | tokens = eager's |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    compiled = {row.model: row.decode_ms for row in rows if row.system == "torch.compile" and row.decode_ms}
    for row in rows:
        if row.error:
            print(f"| {row.model} | {row.system} | failed: {row.error} |||||||")
            continue
        ratio = row.decode_ms / compiled[row.model] if row.model in compiled and row.decode_ms else None
        print(f"| {row.model} | {row.system} | {_fmt(row.first_s, '.1f')} | {_fmt(row.prefill_ms, '.1f')} | "
              f"{_fmt(row.decode_ms, '.2f')} | {_fmt(row.bandwidth_gbs, '.0f')} | {_fmt(ratio, '.2f')} | "
              f"{row.compiles if row.compiles is not None else '-'} | {row.same_tokens or '-'} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tinyllama,llama3-8b")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--profile", default="", help="systems whose decode steps to profile, e.g. thunder+graphs"
    )
    parser.add_argument(
        "--cprofile", action="store_true", help="with --profile: the host's time by Python function"
    )
    parser.add_argument(
        "--host-overhead", action="store_true", help="only thunder's host work per decode step, on the CPU"
    )
    parser.add_argument(
        ISOLATE_FLAG, action="store_true", help="each (model, system) in a process of its own"
    )
    parser.add_argument(
        "--rows-json", default="", help=argparse.SUPPRESS
    )  # where a child of --isolate writes
    args = parser.parse_args()
    if args.host_overhead:
        host_overhead(args)
        return
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    if args.isolate:
        print_table(_isolated_rows(args), args, device_name)
        return
    rows: list[Row] = []
    tokens_of: list[list | None] = []
    for name in args.models.split(","):
        model = build_model(name, args.device, getattr(torch, args.dtype))
        reference = None
        for system in args.systems.split(","):
            row, tokens = measure(name, system, model, args, reference)
            if system == "eager" and tokens is not None:
                reference = tokens
            rows.append(row)
            tokens_of.append(tokens)
            print(row, flush=True)
            if system in args.profile.split(",") and not row.error:
                profile_decode(name, system, model, args)
            torch._dynamo.reset()
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if args.rows_json:  # a child of --isolate
        write_rows(args.rows_json, [{"row": asdict(r), "tokens": t} for r, t in zip(rows, tokens_of)])
        return
    print_table(rows, args, device_name)


def _isolated_rows(args: argparse.Namespace) -> list[Row]:
    """Each (model, system) in a process of its own (``isolated.py``); tokens compared with eager's here."""
    rows: list[Row] = []
    for name in args.models.split(","):
        reference = None
        for system in args.systems.split(","):
            print(f"\n== {name} / {system} (a process of its own)", flush=True)
            child = run_child(__file__, "--models", name, "--systems", system)
            if isinstance(child, str):
                rows.append(Row(name, system, error=child))
                continue
            row, tokens = Row(**child[0]["row"]), child[0]["tokens"]
            if system == "eager":
                reference = tokens
            elif reference is not None and tokens is not None:
                row.same_tokens = same_tokens(tokens, reference)
            rows.append(row)
    return rows


if __name__ == "__main__":
    main()
