"""The compile pipeline behind ``thunder.jit``: frontend, transforms, executors, codegen, cache.

A *frontend* turns a call into a prologue trace and a computation trace; the interpreter is the
frontend of ``thunder.jit`` and FX graphs can be another. Everything after the frontend lives here.
Each call first tries the cached entries' prologues (newest first); on a miss the call is traced and
compiled, and a new entry is added.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from thunder.core.autograd_function import differentiable_callable
from thunder.core.executor import Executor, resolve_executors
from thunder.core.prologue import GuardFailure
from thunder.core.proxies import TensorProxy
from thunder.core.trace import Trace
from thunder.core.transforms.autograd import saved_bytes, split_forward_backward
from thunder.core.transforms.claim_executors import claim_executors
from thunder.core.transforms.dce import dce
from thunder.core.transforms.lifetimes import insert_deletes
from thunder.core.transforms.remat import rematerialize

__all__ = [
    "Frontend",
    "FrontendResult",
    "CompileData",
    "CompileStats",
    "CacheEntry",
    "JittedFunction",
    "jit",
    "compile_computation",
    "compile_data",
    "compile_stats",
]

CACHE_OPTIONS = ("constant values", "no caching")


@dataclass
class FrontendResult:
    prologue: Trace
    computation: Trace
    instructions: list = field(default_factory=list)  # what the interpreter ran, if it logs that


class Frontend(Protocol):
    def __call__(
        self, fn: Callable, args: tuple, kwargs: dict, compile_data: CompileData
    ) -> FrontendResult: ...


@dataclass
class CompileData:
    """What a jitted function was compiled with; ``thunder.compile_data`` returns it."""

    fn: Callable
    frontend: Frontend
    executors: list[Executor]
    cache_option: str = "constant values"
    transforms: list[Callable[[Trace], Trace]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    used_options: set[str] = field(default_factory=set)
    pair_last_traces: bool = False  # thunder.compile's last_traces: [forward traces, backward traces]


@dataclass
class CacheEntry:
    prologue: Callable
    computation: Callable
    prologue_traces: list[Trace]
    computation_traces: list[Trace]
    backward_traces: list[Trace] = field(default_factory=list)
    # torch's grad mode the entry was compiled for, when it matters (some input requires grad)
    grad_mode: bool | None = None


@dataclass
class CompileStats:
    """Counters and the traces of the last compile; ``thunder.compile_stats`` returns it."""

    cache_hits: int = 0
    cache_misses: int = 0
    last_traces: list[Trace] = field(default_factory=list)
    last_prologue_traces: list[Trace] = field(default_factory=list)
    last_backward_traces: list[Trace] = field(default_factory=list)
    last_saved_for_backward_bytes: int | None = None
    last_interpreted_instructions: list = field(default_factory=list)
    last_stage_seconds: dict[str, float] = field(default_factory=dict)


def compile_computation(
    trace: Trace, compile_data: CompileData, stats: CompileStats, *, stage_prefix: str = ""
) -> list[Trace]:
    """The computation trace through the transforms and executors; every intermediate trace is kept."""
    traces = [trace]

    def step(name: str, transform: Callable[[Trace], Trace]) -> None:
        start = time.perf_counter()
        traces.append(transform(traces[-1]))
        stats.last_stage_seconds[stage_prefix + name] = time.perf_counter() - start

    if not stage_prefix:
        for index, user_transform in enumerate(compile_data.transforms):
            step(f"user transform {index}", user_transform)
    step("dce", dce)
    step("executors", functools.partial(claim_executors, executors=compile_data.executors))
    step("dce after executors", dce)
    step("lifetimes", insert_deletes)
    return traces


def needs_autograd(computation: Trace) -> bool:
    """Whether a call must record gradients: grad mode is on and some input requires grad."""
    return torch.is_grad_enabled() and any(
        isinstance(p, TensorProxy) and p.requires_grad for p in computation.args
    )


def compile_with_autograd(
    computation: Trace, compile_data: CompileData, stats: CompileStats
) -> tuple[Callable, list[Trace], list[Trace]]:
    """Split ``computation`` into forward and backward, compile both, and pair them for torch autograd."""
    traces = [computation]
    for user_transform in compile_data.transforms:
        traces.append(user_transform(traces[-1]))
    start = time.perf_counter()
    split = split_forward_backward(traces[-1])
    stats.last_stage_seconds["autograd"] = time.perf_counter() - start
    start = time.perf_counter()
    split = rematerialize(split)
    stats.last_stage_seconds["rematerialization"] = time.perf_counter() - start
    stats.last_saved_for_backward_bytes = saved_bytes(split.saved)
    forward_traces = traces + compile_computation(split.forward, compile_data, stats, stage_prefix="forward ")
    backward_traces = compile_computation(split.backward, compile_data, stats, stage_prefix="backward ")
    run = differentiable_callable(
        forward_traces[-1].python_callable(), backward_traces[-1].python_callable(), split.cotangent_outputs
    )
    return run, forward_traces, backward_traces


class JittedFunction:
    """A compiled function: calls run a cached computation when its prologue accepts the inputs."""

    def __init__(self, compile_data: CompileData):
        self._compile_data = compile_data
        self._compile_stats = CompileStats()
        self._cache: list[CacheEntry] = []
        self._last_entry: CacheEntry | None = None
        functools.update_wrapper(self, compile_data.fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for entry in reversed(self._cache):
            if entry.grad_mode is not None and entry.grad_mode is not torch.is_grad_enabled():
                continue
            try:
                inputs = entry.prologue(*args, **kwargs)
            except GuardFailure:
                continue
            except Exception:  # a value the prologue fetches is gone (a shorter list, a deleted global)
                continue
            self._compile_stats.cache_hits += 1
            if entry is not self._last_entry:  # last_traces & co. describe the entry that ran last
                self._show(entry)
            return entry.computation(*inputs)
        entry = self._compile(args, kwargs)
        try:
            inputs = entry.prologue(*args, **kwargs)
        except GuardFailure:
            # Tracing changed a value the trace read (transformers sets ``config.problem_type`` on the
            # first call): the program's state is now another one, so trace it again, once.
            entry = self._compile(args, kwargs)
            inputs = entry.prologue(*args, **kwargs)
        return entry.computation(*inputs)

    def _compile(self, args: tuple, kwargs: dict) -> CacheEntry:
        data, stats = self._compile_data, self._compile_stats
        stats.cache_misses += 1
        start = time.perf_counter()
        result = data.frontend(data.fn, args, kwargs, data)
        stats.last_stage_seconds = {"frontend": time.perf_counter() - start}
        grad_mode = _grad_mode_dependence(result.computation)
        stats.last_saved_for_backward_bytes = None
        backward_traces: list[Trace] = []
        if needs_autograd(result.computation):
            run, computation_traces, backward_traces = compile_with_autograd(result.computation, data, stats)
        else:
            computation_traces = compile_computation(result.computation, data, stats)
            run = computation_traces[-1].python_callable()
        codegen_start = time.perf_counter()
        entry = CacheEntry(
            prologue=result.prologue.python_callable(),
            computation=run,
            prologue_traces=[result.prologue],
            computation_traces=computation_traces,
            backward_traces=backward_traces,
            grad_mode=grad_mode,
        )
        stats.last_stage_seconds["prologue codegen"] = time.perf_counter() - codegen_start
        self._show(entry)
        stats.last_interpreted_instructions = result.instructions
        if data.cache_option != "no caching":
            self._cache.append(entry)
        return entry


    def _show(self, entry: CacheEntry) -> None:
        stats = self._compile_stats
        stats.last_traces = entry.computation_traces
        stats.last_backward_traces = entry.backward_traces
        stats.last_prologue_traces = entry.prologue_traces
        self._last_entry = entry


def _grad_mode_dependence(computation: Trace) -> bool | None:
    """The grad mode an entry is only valid under: matters only when some input requires grad."""
    if any(isinstance(p, TensorProxy) and p.requires_grad for p in computation.args):
        return torch.is_grad_enabled()
    return None


def jit(
    fn: Callable,
    *,
    frontend: Frontend,
    executors: Sequence[str | Executor] | None = None,
    cache: str = "constant values",
    transforms: Sequence[Callable[[Trace], Trace]] = (),
    **options: Any,
) -> JittedFunction:
    """Compile ``fn`` with ``frontend``; see ``thunder.jit`` for the user-facing description."""
    if cache not in CACHE_OPTIONS:
        raise ValueError(f"unknown cache option {cache!r}; choose one of {CACHE_OPTIONS}")
    data = CompileData(
        fn=fn,
        frontend=frontend,
        executors=resolve_executors(executors),
        cache_option=cache,
        transforms=list(transforms),
        options=dict(options),
    )
    return JittedFunction(data)


def _jitted(fn: Any) -> JittedFunction:
    jitted = getattr(fn, "_thunder_jitted", fn)
    if not isinstance(jitted, JittedFunction):
        raise TypeError(f"{fn!r} is not a function or module compiled by thunder.jit")
    return jitted


def compile_data(fn: Any) -> CompileData:
    return _jitted(fn)._compile_data


def compile_stats(fn: Any) -> CompileStats:
    return _jitted(fn)._compile_stats
