"""The compile pipeline behind ``thunder.jit``: frontend, transforms, executors, codegen, cache.

A *frontend* turns a call into a prologue trace and a computation trace; the interpreter is the
frontend of ``thunder.jit`` and FX graphs can be another. Everything after the frontend lives here.
Each call first tries the cached entries' prologues (newest first); on a miss the call is traced and
compiled, and a new entry is added.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from thunder.core import symbolic_shapes
from thunder.core.autograd_function import differentiable_callable
from thunder.core.compile_transform import (
    MODULE_ATTRIBUTE,
    backward_choosing_sync,
    compile_transforms,
    trace_transforms,
)
from thunder.core.cuda_graphs import GraphedFunction, mutated_inputs, with_cuda_graphs
from thunder.core.diagnostics import instrumented_compile
from thunder.core.diagnostics.recompiles import RecompileReason, explain_miss, record_recompile
from thunder.core.diagnostics.tracebacks import with_user_frames
from thunder.core.disk_cache import load_or_compile
from thunder.core.epilogue import Epilogue
from thunder.core.executor import Executor, resolve_executors
from thunder.core.options import CACHE_OPTIONS, check_callable, check_compile_options
from thunder.core.prologue import GuardFailure, add_size_guards, fold_layout_guards
from thunder.core.prologue_write_overlaps import (
    CHECK_WRITES_APART,
    InputsShareMemoryError,
    add_write_overlap_check,
)
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten
from thunder.core.symbol import BoundSymbol
from thunder.core.symbolic_shapes import DynamicDims
from thunder.core.trace import Trace
from thunder.core.transforms.attention_masks import additive_attention_masks
from thunder.core.transforms.autograd import saved_bytes, split_forward_backward
from thunder.core.transforms.causal_attention import use_causal_attention
from thunder.core.transforms.claim_executors import claim_executors, fused_by
from thunder.core.transforms.copy_backs import place_copy_backs
from thunder.core.transforms.cse import cse
from thunder.core.transforms.dce import dce
from thunder.core.transforms.early_updates import place_updates_early
from thunder.core.transforms.fold_gated_linears import fold_gated_linears
from thunder.core.transforms.fold_rms_norms import fold_rms_norms
from thunder.core.transforms.fuse_linear_cross_entropy import fuse_linear_cross_entropy
from thunder.core.transforms.fusion_copy_backs import copy_backs_into_fusions
from thunder.core.transforms.group_linears import group_linears
from thunder.core.transforms.inline_backward import ran_backward
from thunder.core.transforms.lifetimes import insert_deletes
from thunder.core.transforms.norm_backward_adds import fold_norm_backward_adds
from thunder.core.transforms.program_remat import rematerialize_program
from thunder.core.transforms.query_groups import fold_query_groups
from thunder.core.transforms.reinplace import reinplace
from thunder.core.transforms.remat import fused_recomputable, rematerialize, view_recomputable
from thunder.core.transforms.rms_norms import rms_norms_as_symbols

__all__ = [
    "Frontend",
    "FrontendResult",
    "CompileData",
    "CompileStats",
    "CacheEntry",
    "TransformedComputation",
    "AutogradPlan",
    "JittedFunction",
    "jit",
    "compile_computation",
    "transform_computation",
    "link",
    "compile_data",
    "compile_stats",
    "compiled_by_thunder",
    "jit_arguments",
    "same_configuration",
]

# Cache entries kept per jitted function; the least recently used is evicted past it (README.md).
DEFAULT_CACHE_SIZE = 32
# Compiles never overlap: the frontend, transforms and executors keep state of their own. Reentrant,
# because tracing one jitted function may call (and so compile) another.
_compile_lock = threading.RLock()


@dataclass
class FrontendResult:
    prologue: Trace
    computation: Trace
    instructions: list = field(default_factory=list)  # what the interpreter ran, if it logs that
    # side effects on Python objects replayed after the computation (core/epilogue.py); the computation
    # then returns ``(output, values)``
    epilogue: Epilogue | None = None


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
    cache_size: int | None = DEFAULT_CACHE_SIZE  # entries kept (least recently used evicted); None: all


@dataclass
class CacheEntry:
    prologue: Callable
    computation: Callable
    prologue_traces: list[Trace]
    computation_traces: list[Trace]
    backward_traces: list[Trace] = field(default_factory=list)
    # torch's grad mode the entry was compiled for, when it matters (some input requires grad)
    grad_mode: bool | None = None
    epilogue: Epilogue | None = None


@dataclass
class CompileStats:
    """Counters and the traces of the last compile; ``thunder.compile_stats`` returns it."""

    cache_hits: int = 0
    cache_misses: int = 0
    cache_evictions: int = 0  # entries dropped because the cache held ``cache_size`` entries
    last_traces: list[Trace] = field(default_factory=list)
    last_prologue_traces: list[Trace] = field(default_factory=list)
    last_backward_traces: list[Trace] = field(default_factory=list)
    last_saved_for_backward_bytes: int | None = None
    last_interpreted_instructions: list = field(default_factory=list)
    last_stage_seconds: dict[str, float] = field(default_factory=dict)
    # the on-disk cache (core/disk_cache.py): compiles that loaded an entry, that found none (and
    # stored what they made: ``disk_cache_writes``), that could not use it, and why the last one not
    disk_cache_hits: int = 0
    disk_cache_misses: int = 0
    disk_cache_writes: int = 0
    disk_cache_skips: int = 0
    disk_cache_skip_reason: str | None = None
    # why the last calls that missed the cache recompiled, oldest first (core/diagnostics/recompiles.py)
    recompile_reasons: list[RecompileReason] = field(default_factory=list)
    # why compiles that would have had symbolic sizes were made static (core/symbolic_shapes.py)
    dynamic_fallbacks: list[str] = field(default_factory=list)


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
        _transform_if_changed(traces, stats, "causal attention", use_causal_attention)
        _transform_if_changed(traces, stats, "query groups as rows", fold_query_groups)
        _transform_if_changed(traces, stats, "additive attention masks", additive_attention_masks)
        step("fuse linear cross entropy", fuse_linear_cross_entropy)
    step("dce", dce)
    _transform_if_changed(traces, stats, stage_prefix + "cse", cse)
    if not stage_prefix:  # a program that ran loss.backward() itself is never split for remat.py
        _transform_if_changed(
            traces,
            stats,
            "rematerialization in the program",
            functools.partial(rematerialize_program, recomputable=_recomputable(compile_data)),
        )
    _transform_if_changed(traces, stats, stage_prefix + "updates placed early", place_updates_early)
    _transform_if_changed(traces, stats, stage_prefix + "copy-backs placed early", place_copy_backs)
    if not stage_prefix:  # not a forward or backward of autograd: nothing saved for later reads old values
        executors = compile_data.executors
        _transform_if_changed(traces, stats, "reinplaced", functools.partial(reinplace, executors=executors))
        _transform_if_changed(
            traces, stats, "grouped linears", functools.partial(group_linears, executors=executors)
        )
        if _folds_rms_norms(compile_data):
            _transform_if_changed(
                traces, stats, "rms norms folded", functools.partial(fold_rms_norms, executors=executors)
            )
        _transform_if_changed(
            traces, stats, "gated linears folded", functools.partial(fold_gated_linears, executors=executors)
        )
    _transform_if_changed(
        traces,
        stats,
        stage_prefix + "residual adds into norm backwards",
        functools.partial(fold_norm_backward_adds, executors=compile_data.executors),
    )
    step("executors", functools.partial(claim_executors, executors=compile_data.executors))
    step("dce after executors", dce)
    _transform_if_changed(traces, stats, stage_prefix + "copy-backs into fusions", copy_backs_into_fusions)
    step("lifetimes", insert_deletes)
    return traces


def _transform_if_changed(
    traces: list[Trace], stats: CompileStats, name: str, transform: Callable[[Trace], Trace]
) -> None:
    """Apply ``transform``; its trace is listed only when it changed something, as the docs show the traces."""
    start = time.perf_counter()
    transformed = transform(traces[-1])
    if transformed is not traces[-1]:
        traces.append(transformed)
    stats.last_stage_seconds[name] = time.perf_counter() - start


def _folds_rms_norms(compile_data: CompileData) -> bool:
    """The ``fold_rms_norms`` option (core/transforms/fold_rms_norms.py); it defaults to off."""
    compile_data.used_options.add("fold_rms_norms")
    return bool(compile_data.options.get("fold_rms_norms", False))


def _uses_cuda_graphs(compile_data: CompileData) -> bool:
    """The ``cuda_graphs`` option (core/cuda_graphs.py); it defaults to off."""
    compile_data.used_options.add("cuda_graphs")
    return bool(compile_data.options.get("cuda_graphs", False))


def _recomputable(compile_data: CompileData) -> Callable[[BoundSymbol], bool] | None:
    """Which forward ops the backward may recompute instead of reading (the ``rematerialization`` option).

    ``auto`` recomputes cheap elementwise work only where a fusion executor will claim it: there a
    recomputed op joins the backward's fused kernels and costs little, while an op the torch executor
    runs would be a kernel of its own that reads and writes whole tensors (HF Llama's RMSNorms
    recomputed by the torch executor made its backward slower than eager's). Views are always
    recomputed; unfused, the backward otherwise reads what eager's saves. ``off`` (None) recomputes
    nothing; ``save memory`` whatever saves memory.
    """
    compile_data.used_options.add("rematerialization")
    choice = compile_data.options.get("rematerialization") or "auto"
    if choice == "off":
        return None
    if choice == "save memory":
        return fused_recomputable
    executors = compile_data.executors
    return lambda b: view_recomputable(b) or (fused_recomputable(b) and fused_by(b, executors))


def needs_autograd(computation: Trace) -> bool:
    """Whether a call must record gradients: grad mode is on and some input requires grad, and the
    program did not run ``loss.backward()`` itself (its gradients are its outputs then)."""
    if ran_backward(computation):
        return False
    return torch.is_grad_enabled() and any(
        isinstance(p, TensorProxy) and p.requires_grad for p in computation.args
    )


@dataclass(frozen=True)
class AutogradPlan:
    """How the compiled forward and backward pair up under torch autograd (autograd_function.py)."""

    cotangent_outputs: list[int]
    saved_inputs_and_outputs: frozenset[int]
    saved_tensors: frozenset[int]
    detached_outputs: frozenset[int]


@dataclass
class TransformedComputation:
    """What the transforms and executors made of a computation trace. Codegen (``link``) needs nothing
    else, so it is what the on-disk cache stores (core/disk_cache.py)."""

    computation_traces: list[Trace]
    backward_traces: list[Trace] = field(default_factory=list)
    autograd: AutogradPlan | None = None  # None: no gradients recorded (``computation_traces[-1]`` runs)
    no_sync_backward: Trace | None = None  # the backward without collectives, run under ``no_sync()``
    saved_for_backward_bytes: int | None = None


def transform_computation(
    computation: Trace, compile_data: CompileData, stats: CompileStats
) -> TransformedComputation:
    """The computation through the transforms and executors, with autograd when the call records gradients."""
    if needs_autograd(computation):
        return transform_with_autograd(computation, compile_data, stats)
    return TransformedComputation(compile_computation(computation, compile_data, stats))


def transform_with_autograd(
    computation: Trace, compile_data: CompileData, stats: CompileStats
) -> TransformedComputation:
    """Split ``computation`` into forward and backward, and compile both."""
    traces = [computation]
    for user_transform in trace_transforms(compile_data.transforms):
        traces.append(user_transform(traces[-1]))
    # before the split: the attention then differentiates as flash's, an RMS norm as one kernel's, the
    # loss computes its gradients
    _transform_if_changed(traces, stats, "causal attention", use_causal_attention)
    _transform_if_changed(traces, stats, "query groups as rows", fold_query_groups)
    _transform_if_changed(traces, stats, "additive attention masks", additive_attention_masks)
    _transform_if_changed(traces, stats, "rms norms as one symbol", rms_norms_as_symbols)
    _transform_if_changed(traces, stats, "fuse linear cross entropy", fuse_linear_cross_entropy)
    start = time.perf_counter()
    split = split_forward_backward(traces[-1])
    stats.last_stage_seconds["autograd"] = time.perf_counter() - start
    recomputable = _recomputable(compile_data)
    if recomputable is not None:
        start = time.perf_counter()
        split = rematerialize(split, recomputable)
        stats.last_stage_seconds["rematerialization"] = time.perf_counter() - start
    unsynchronized = split
    for transform in compile_transforms(compile_data.transforms):  # data parallelism (thunder.distributed)
        split = transform.transform_split(split)
    # The backward takes its saved tensors in a list it empties, so that each is freed at its last use
    # instead of at the end of the backward (autograd_function.py); with CUDA graphs, inside the
    # backward's capture (cuda_graphs.py: it shares the forward's pool).
    split.backward.takes_argument_list = True
    forward_traces = traces + compile_computation(split.forward, compile_data, stats, stage_prefix="forward ")
    backward_traces = compile_computation(split.backward, compile_data, stats, stage_prefix="backward ")
    plan = AutogradPlan(
        split.cotangent_outputs,
        _saved_inputs_and_outputs(split),
        frozenset(i for i, p in enumerate(split.saved) if isinstance(p, TensorProxy)),
        frozenset(split.detached_outputs),
    )
    no_sync = _no_sync_backward(split.backward, unsynchronized, compile_data)
    return TransformedComputation(forward_traces, backward_traces, plan, no_sync, saved_bytes(split.saved))


def link(transformed: TransformedComputation, compile_data: CompileData) -> Callable:
    """The callable that runs ``transformed``: its final traces compiled, paired for torch autograd."""
    graphs = _uses_cuda_graphs(compile_data)
    final = transformed.computation_traces[-1]
    if transformed.autograd is None:
        return with_cuda_graphs(final.python_callable(), graphs, trace=final)
    backward_trace = transformed.backward_traces[-1]
    backward = backward_trace.python_callable()
    if transformed.no_sync_backward is not None:
        backward = backward_choosing_sync(backward, transformed.no_sync_backward.python_callable())
    plan = transformed.autograd
    if graphs:
        graphed = with_cuda_graphs(backward, graphs, "backward", backward_trace)
        assert isinstance(graphed, GraphedFunction)
        backward = graphed.call_with_list  # ThunderFunction passes a list
    activations = tuple(sorted(plan.saved_tensors - plan.saved_inputs_and_outputs))
    forward = with_cuda_graphs(final.python_callable(), graphs, "forward", final, activations)
    return differentiable_callable(
        forward,
        backward,
        plan.cotangent_outputs,
        plan.saved_inputs_and_outputs,
        plan.saved_tensors,
        plan.detached_outputs,
    )


def _rejects_its_own_call(fn: Callable, entry: CacheEntry, args: tuple, kwargs: dict) -> RuntimeError:
    """A program just compiled for a call whose prologue rejects that very call: a guard that cannot
    hold (a value read while tracing that changes on every read). A clear error, not ``GuardFailure``
    (an internal signal) or a recompile on every call."""
    reason = explain_miss(fn, [entry], args, kwargs)
    return RuntimeError(
        f"thunder compiled {getattr(fn, '__qualname__', fn)!r} twice for this call, and both times the "
        f"program's input checks rejected the call they were made for: "
        f"{reason.message.split(' because ', 1)[-1].rstrip(': ')}. A value the program reads changes each time it is "
        "read, so no compiled program can be reused; this is a limitation or bug of thunder's guards "
        "(please report it). Workaround: pass that value as an argument, or read it outside the jitted function."
    )


def _inputs_sharing_memory(
    fn: Callable, entry: CacheEntry, args: tuple, kwargs: dict
) -> InputsShareMemoryError | None:
    """The error for a call whose just-compiled prologue rejects it because an input the program
    writes in place shares memory with another tensor input (core/prologue_write_overlaps.py), or
    None when another check rejected it."""
    reason = explain_miss(fn, [entry], args, kwargs)
    if reason.check != CHECK_WRITES_APART.name:
        return None
    found = f"{reason.what}, which the program writes in place, {reason.after}"
    return InputsShareMemoryError(
        f"thunder cannot run {getattr(fn, '__qualname__', fn)!r} for this call: {found}. thunder traces each tensor input as memory of its "
        "own, so the program's answer could differ from eager's, which sees the write through both. "
        "Pass a copy (.clone()) of one of them, or make the in-place write outside the jitted function."
    )


_dynamo_is_tracing = torch.compiler.is_compiling


@torch._disable_dynamo  # the lazy spelling: torch.compiler.disable imports dynamo at once (seconds)
def _called_outside_dynamo(jitted: JittedFunction, args: tuple, kwargs: dict) -> Any:
    """A jitted function called from code that torch.compile traces (transformers' ``generate()``
    compiles the model's ``__call__`` for a static cache on CUDA, which calls the forward that
    ``model.forward = thunder.jit(model.forward)`` made): Dynamo would trace thunder's own Python
    (and fail on its caches); instead the graph breaks there and the call runs natively, through
    thunder's cache and prologue as any call. The check costs one ``is_compiling()`` per call.
    (``is_compiling()`` is also true while AOT autograd or export trace a function at run time: the
    count of calls in here keeps the call below from coming back.)"""
    _NATIVE_CALLS[0] += 1
    try:
        return jitted(*args, **kwargs)
    finally:
        _NATIVE_CALLS[0] -= 1


_NATIVE_CALLS = [0]  # calls of _called_outside_dynamo under way (a list: Dynamo reads it as a constant)


class JittedFunction:
    """A compiled function: calls run a cached computation when its prologue accepts the inputs."""

    def __init__(self, compile_data: CompileData):
        self._compile_data = compile_data
        self._compile_stats = CompileStats()
        self._cache: list[CacheEntry] = []  # least recently used first
        self._last_entry: CacheEntry | None = None
        compile_data.used_options.add("dynamic")
        self._dynamic_dims = DynamicDims(compile_data.options.get("dynamic"))  # core/symbolic_shapes.py
        self._autograd_blocked_dynamic = False
        self._lock = threading.Lock()  # guards the cache list and the counters; never held while calling out
        functools.update_wrapper(self, compile_data.fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _dynamo_is_tracing() and not _NATIVE_CALLS[0]:
            return _called_outside_dynamo(self, args, kwargs)
        found = self._lookup(args, kwargs)
        if found is None:
            try:
                found = self._compile_once(args, kwargs)
            except Exception as error:  # re-raised here, in the frame the user called, to show no other
                with_user_frames(error)  # the user's frames, not thunder's (THUNDER_FULL_TRACEBACK=1)
                if sys.version_info < (3, 11):
                    raise error  # 3.10's bare raise would restore the traceback it caught
                raise  # 3.11+: re-raised without an entry for this frame either
        entry, inputs = found
        epilogue = entry.epilogue
        if epilogue is None:
            return entry.computation(*inputs)
        if epilogue.before is not None:
            epilogue.before(args, kwargs)
        return epilogue(args, kwargs, entry.computation(*inputs))

    def _lookup(self, args: tuple, kwargs: dict) -> tuple[CacheEntry, Any] | None:
        """The newest entry whose prologue accepts the call, and the inputs it fetched."""
        for entry in reversed(tuple(self._cache)):  # a snapshot: other threads may change the cache
            if entry.grad_mode is not None and entry.grad_mode is not torch.is_grad_enabled():
                continue
            try:
                inputs = entry.prologue(*args, **kwargs)
            except GuardFailure:
                continue
            except Exception:  # a value the prologue fetches is gone (a shorter list, a deleted global)
                continue
            with self._lock:
                self._compile_stats.cache_hits += 1
                if self._cache and self._cache[-1] is not entry and entry in self._cache:
                    self._cache.remove(entry)  # most recently used goes last
                    self._cache.append(entry)
                if entry is not self._last_entry:  # last_traces & co. describe the entry that ran last
                    self._show(entry)
            return entry, inputs
        return None

    def _compile_once(self, args: tuple, kwargs: dict) -> tuple[CacheEntry, Any]:
        with _compile_lock:
            found = self._lookup(args, kwargs)  # another thread may have compiled it meanwhile
            return found if found is not None else self._compile_and_fetch(args, kwargs)

    def _compile_and_fetch(self, args: tuple, kwargs: dict) -> tuple[CacheEntry, Any]:
        if self._cache:  # a miss after the first compile: say which guard failed (only misses pay)
            record_recompile(self._compile_stats, self._compile_data.fn, self._cache, args, kwargs)
        entry = self._compile(args, kwargs)
        try:
            inputs = entry.prologue(*args, **kwargs)
        except GuardFailure:
            shared = _inputs_sharing_memory(self._compile_data.fn, entry, args, kwargs)
            if shared is not None:
                with self._lock:  # no later call can use it either
                    if entry in self._cache:
                        self._cache.remove(entry)
                raise shared from None
            # Tracing changed a value the trace read (transformers sets ``config.problem_type`` on the
            # first call): the program's state is now another one, so trace it again, once.
            entry = self._compile(args, kwargs)
            try:
                inputs = entry.prologue(*args, **kwargs)
            except GuardFailure:
                raise _rejects_its_own_call(self._compile_data.fn, entry, args, kwargs) from None
        return entry, inputs

    def _add(self, entry: CacheEntry) -> None:
        """Cache a finished entry (only finished ones: an interrupted compile leaves nothing behind)."""
        limit = self._compile_data.cache_size
        with self._lock:
            self._cache.append(entry)
            while limit is not None and len(self._cache) > limit:
                self._cache.pop(0)
                self._compile_stats.cache_evictions += 1

    @instrumented_compile  # progress line, save_traces, hints on errors (core/diagnostics)
    def _compile(self, args: tuple, kwargs: dict) -> CacheEntry:
        self._compile_stats.cache_misses += 1
        # a training step traced with symbols is traced again static: under grad mode, once that
        # happened, go static at once rather than tracing every compile twice
        training = torch.is_grad_enabled() and self._autograd_blocked_dynamic
        try:
            return self._compile_entry(args, kwargs, None if training else self._dynamic_dims)
        except _StaticAgain as again:  # symbolic sizes were not possible: the call compiles static
            self._compile_stats.dynamic_fallbacks.append(again.reason)
            self._autograd_blocked_dynamic |= again.reason == _NEEDS_AUTOGRAD
            return self._compile_entry(args, kwargs, None)

    def _compile_entry(self, args: tuple, kwargs: dict, dynamic: DynamicDims | None) -> CacheEntry:
        data, stats = self._compile_data, self._compile_stats
        start = time.perf_counter()
        with symbolic_shapes.dynamic_dims(dynamic) as tracing:
            try:
                result = _run_frontend(data, args, kwargs)
            except Exception as error:
                if not tracing.made_symbols:
                    raise
                raise _StaticAgain(_failure("tracing", error)) from error
        stats.last_stage_seconds = {"frontend": time.perf_counter() - start}
        if not symbolic_shapes.has_symbolic_sizes(result.computation):
            return self._finish_compile(result)
        if needs_autograd(result.computation):
            raise _StaticAgain(_NEEDS_AUTOGRAD)
        try:
            return self._finish_compile(result)
        except Exception as error:  # noqa: BLE001 -- anything symbolic sizes broke compiles static instead
            raise _StaticAgain(_failure("compiling", error)) from error

    def _finish_compile(self, result: FrontendResult) -> CacheEntry:
        data, stats = self._compile_data, self._compile_stats
        grad_mode = _grad_mode_dependence(result.computation)
        transformed = load_or_compile(
            result.computation, data, stats, lambda: transform_computation(result.computation, data, stats)
        )
        stats.last_saved_for_backward_bytes = transformed.saved_for_backward_bytes
        codegen_start = time.perf_counter()
        run = link(transformed, data)
        stats.last_stage_seconds["codegen"] = time.perf_counter() - codegen_start
        codegen_start = time.perf_counter()
        add_size_guards(result.prologue)  # every guard on a symbolic size is known now
        checks = fold_layout_guards(result.prologue)  # and every layout guard
        written = mutated_inputs(result.computation)
        add_write_overlap_check(result.prologue, {result.computation.args[i].name for i in written})
        if checks is not None and isinstance(run, GraphedFunction):
            run.checked_strides = checks.covered  # a graph's key leaves out the strides checked there
        entry = CacheEntry(
            prologue=result.prologue.python_callable(),
            computation=run,
            prologue_traces=[result.prologue],
            computation_traces=transformed.computation_traces,
            backward_traces=transformed.backward_traces,
            grad_mode=grad_mode,
            epilogue=result.epilogue,
        )
        stats.last_stage_seconds["prologue codegen"] = time.perf_counter() - codegen_start
        self._show(entry)
        stats.last_interpreted_instructions = result.instructions
        if data.cache_option != "no caching":
            self._add(entry)
        return entry

    def _show(self, entry: CacheEntry) -> None:
        stats = self._compile_stats
        stats.last_traces = entry.computation_traces
        stats.last_backward_traces = entry.backward_traces
        stats.last_prologue_traces = entry.prologue_traces
        self._last_entry = entry


_NEEDS_AUTOGRAD = "the program needs autograd, which symbolic sizes do not support yet"


def _failure(stage: str, error: Exception) -> str:
    return f"{stage} with symbolic sizes failed: {type(error).__name__}: {str(error)[:300]}"


class _StaticAgain(Exception):
    """A compile with symbolic sizes that cannot go on: the call is compiled with static shapes."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _saved_inputs_and_outputs(split: Any) -> frozenset[int]:
    """Positions of the saved values that are inputs or outputs of the forward (known when compiling)."""
    names = {p.name for p in split.forward.args if isinstance(p, TensorProxy)}
    names.update(p.name for p in tree_flatten(split.forward.output[0])[0] if isinstance(p, TensorProxy))
    return frozenset(i for i, p in enumerate(split.saved) if isinstance(p, TensorProxy) and p.name in names)


def _no_sync_backward(backward: Trace, unsynchronized: Any, compile_data: CompileData) -> Trace | None:
    """Under ``no_sync()``, the compile transforms' backward without collectives, compiled now (not on
    first use: backwards run outside the compile lock, in other threads)."""
    for transform in compile_transforms(compile_data.transforms):
        no_sync = transform.no_sync_backward(unsynchronized)
        if no_sync is not None:
            no_sync.takes_argument_list = backward.takes_argument_list
            return compile_computation(no_sync, compile_data, CompileStats(), stage_prefix="no_sync ")[-1]
    return None


def _run_frontend(data: CompileData, args: tuple, kwargs: dict) -> FrontendResult:
    """The frontend's traces, with the compile transforms' changes to them (thunder.distributed)."""
    transforms = compile_transforms(data.transforms)
    with contextlib.ExitStack() as stack:
        for transform in transforms:
            stack.enter_context(transform.tracing())
        result = data.frontend(data.fn, args, kwargs, data)
        for transform in transforms:
            result.prologue, result.computation = transform.transform_traced(
                result.prologue, result.computation, args, kwargs
            )
    return result


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
    cache_size: int | None = DEFAULT_CACHE_SIZE,
    **options: Any,
) -> JittedFunction:
    """Compile ``fn`` with ``frontend``; see ``thunder.jit`` for the user-facing description.

    Options are checked against ``thunder.core.options.COMPILE_OPTIONS`` here, before anything runs.
    """
    check_callable(fn)
    check_compile_options(
        {
            "executors": executors,
            "cache": cache,
            "transforms": transforms,
            "cache_size": cache_size,
            **options,
        }
    )
    if cache is None:  # checked above: None is the default
        cache = CACHE_OPTIONS[0]
    from thunder.distributed.wrappers import reject_torch_wrappers  # lazily: torch.distributed is big

    reject_torch_wrappers(fn)
    data = CompileData(
        fn=fn,
        frontend=frontend,
        executors=resolve_executors(executors),
        cache_option=cache,
        # a module prepared by thunder.distributed carries its compile transforms (core/compile_transform.py)
        transforms=[*(transforms or ()), *getattr(fn, MODULE_ATTRIBUTE, ())],
        options=dict(options),
        cache_size=cache_size,
    )
    return JittedFunction(data)


def compiled_by_thunder(fn: Any) -> CompileData | None:
    """The compile data of ``fn`` when it is a function or module from ``thunder.jit``, else None."""
    jitted = fn if isinstance(fn, JittedFunction) else getattr(fn, "_thunder_jitted", None)
    return jitted._compile_data if isinstance(jitted, JittedFunction) else None


def jit_arguments(data: CompileData) -> dict[str, Any]:
    """The options that compile ``data.fn`` again as ``data`` says: ``jit(data.fn, **jit_arguments(data))``."""
    own_transforms = len(data.transforms) - len(getattr(data.fn, MODULE_ATTRIBUTE, ()))
    return {
        "executors": list(data.executors),  # already resolved: resolving them again changes nothing
        "cache": data.cache_option,
        "transforms": data.transforms[:own_transforms],  # jit adds the module's own again
        "cache_size": data.cache_size,
        **data.options,
    }


def same_configuration(first: CompileData, second: CompileData) -> bool:
    """Whether two compile data compile the same callable with the same frontend and options."""
    try:
        return bool(
            first.fn is second.fn
            and first.frontend is second.frontend
            and first.executors == second.executors
            and first.cache_option == second.cache_option
            and first.transforms == second.transforms
            and first.cache_size == second.cache_size
            and first.pair_last_traces == second.pair_last_traces
            and first.options == second.options
        )
    except Exception:  # an option value without a usable ``==`` (a tensor): count it as different
        return False


def _jitted(fn: Any) -> JittedFunction:
    jitted = getattr(fn, "_thunder_jitted", fn)
    if not isinstance(jitted, JittedFunction):
        raise TypeError(f"{fn!r} is not a function or module compiled by thunder.jit")
    return jitted


def compile_data(fn: Any) -> CompileData:
    """What ``fn`` (a function or module from ``thunder.jit``) was compiled with: the original callable,
    executors, cache option, transforms and options (``options``; ``used_options`` says which the
    compile read)."""
    return _jitted(fn)._compile_data


def compile_stats(fn: Any) -> CompileStats:
    """Counters and traces of ``fn`` (a function or module from ``thunder.jit``): ``cache_hits``,
    ``cache_misses``, the traces of the last compile, ``last_saved_for_backward_bytes``,
    ``last_stage_seconds``, the seconds each stage of the last compile took, and ``recompile_reasons``,
    why the last calls that missed the cache recompiled (``RecompileReason``, oldest first), and the
    on-disk cache's counters (``disk_cache_hits``, ``disk_cache_misses``, ``disk_cache_writes``,
    ``disk_cache_skips`` with ``disk_cache_skip_reason``; core/disk_cache.py)."""
    return _jitted(fn)._compile_stats
