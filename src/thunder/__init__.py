"""thunder: a deep-learning compiler for PyTorch.

``thunder.jit(model_or_fn)`` returns a drop-in replacement that runs the same computation through
thunder's traces and executors. This module assembles the public API from the packages
``thunder.core`` (IR, pipeline), ``thunder.interpreter`` (the frontend) and ``thunder.executors``.
"""

from __future__ import annotations

# The sub-distributions install portions of the ``thunder`` namespace without an __init__.py;
# extending __path__ lets this regular package see them, in editable installs too.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

# PyTorch under another name: importing the submodule thunder.torch rebinds ``torch`` here.
import torch as _pytorch  # noqa: E402

import thunder.executors  # noqa: E402,F401  -- registers the built-in executors
from thunder.core import disk_cache as _disk_cache  # noqa: E402
from thunder.core import pipeline as _pipeline  # noqa: E402
from thunder.core.executor import (  # noqa: E402
    Executor,
    get_all_executors,
    get_default_executors,
    list_executors,
    set_default_executors,
)
from thunder.core.module import ThunderModule  # noqa: E402
from thunder.core.pipeline import compile_data, compile_stats  # noqa: E402
from thunder.core.prologue_write_overlaps import InputsShareMemoryError  # noqa: E402
from thunder.core.proxies import DataDependentError  # noqa: E402
from thunder.core.trace import Trace  # noqa: E402
from thunder.examine import ExamineReport, examine  # noqa: E402
from thunder.interpreter import interpreter_frontend  # noqa: E402
from thunder.interpreter.version import check_python_version  # noqa: E402

__all__ = [
    "examine",
    "ExamineReport",
    "jit",
    "compile",
    "compile_data",
    "compile_stats",
    "last_traces",
    "last_backward_traces",
    "last_prologue_traces",
    "cache_option",
    "cache_hits",
    "cache_misses",
    "cache_dir",
    "clear_cache",
    "list_transforms",
    "last_interpreted_instructions",
    "last_interpreter_log",
    "last_compile_options",
    "get_all_executors",
    "get_default_executors",
    "list_executors",
    "set_default_executors",
    "ThunderModule",
    "Trace",
    "DataDependentError",
    "InputsShareMemoryError",
]


def jit(
    fn: Callable,
    /,
    *,
    executors: Sequence[str | Executor] | None = None,
    cache: str | None = None,
    transforms: Sequence[Callable[[Trace], Trace]] | None = None,
    **compile_options: Any,
) -> Any:
    """Just-in-time compile a callable (function or model).

    Args:
        fn: a function or a ``torch.nn.Module``. A function or module ``thunder.jit`` already
            compiled is compiled again from its original, with its options updated by the ones
            given here; with no option that changes anything, ``fn`` itself is returned.
        executors: executors (names or objects) in priority order; the defaults follow them.
        cache: ``"constant values"`` (default: Python values the program reads are checked on
            every call and a change recompiles), ``"symbolic values"`` (Python ints and floats are
            inputs of the trace, checked by type only; a number whose value decides a branch or a
            shape is checked by value, as with ``"constant values"``) or ``"no caching"``.
        transforms: functions ``Trace -> Trace`` applied to the computation trace before execution.
        cache_size: (a compile option) the most cache entries kept for ``fn``, 32 by default; past it
            the least recently used entry is evicted (``compile_stats(fn).cache_evictions``). ``None``:
            no bound.
        compile_options: ``fallback=False`` makes a torch operator thunder has no symbol for an error
            instead of a ``fallback.<name>`` call run by PyTorch (the default; see ``thunder.examine``).
            ``save_traces="dir"`` writes every trace of each compile to ``dir`` (also
            ``THUNDER_SAVE_TRACES=dir``); ``progress_threshold=seconds`` logs a progress line to stderr
            for compiles slower than that (also ``THUNDER_PROGRESS_THRESHOLD``; default 5).
            ``cuda_graphs=True`` captures each compiled function (the computation, or a training
            step's forward and backward) into a CUDA graph per input layout and replays it: one launch
            instead of one per kernel, for launch-bound programs; inputs other than parameters are
            copied into the graph's buffers and outputs out of them (``thunder.core.cuda_graphs``).
            ``dynamic=False`` keeps every tensor size and Python int a constant of the program; by
            default a dim whose size changed between compiles, or an int the program reads whose value
            did, is symbolic from the next compile on (one program for every length, its prologue
            checking what the program assumed of the size); ``dynamic=True`` makes every dim of every
            input but parameters symbolic from the first compile (ints still only once they change;
            ``thunder.core.symbolic_shapes``).
            ``disk_cache=False`` neither reads nor writes the on-disk cache of compiled programs
            (``THUNDER_CACHE_DIR``; on by default unless ``THUNDER_DISK_CACHE=0``; see
            :func:`clear_cache`).

    The options are declared, each with its documentation, in ``thunder.core.options.COMPILE_OPTIONS``.

    Raises:
        TypeError: ``fn`` is not callable, or an option is unknown (the message lists the valid ones).
        ValueError: an option's value is impossible (an unknown ``cache`` or executor name, ...).

    Returns:
        For a module, a ``ThunderModule`` sharing the module's parameters and buffers; for a
        function, a callable with the same signature.

    Example::

        model = torch.nn.Linear(4, 2)
        jmodel = thunder.jit(model)
        y = jmodel(torch.randn(3, 4))
        print(thunder.last_traces(jmodel)[-1])
    """
    check_python_version()  # refused here, not at the first call, on a Python the interpreter does not know
    given = _given_options(executors=executors, cache=cache, transforms=transforms, **compile_options)
    return _jit(fn, given, pair_last_traces=False)


def compile(fn: Callable, **options: Any) -> Any:  # noqa: A001 -- the name the MNIST tutorial uses
    """The older name of :func:`jit`, taking the same options.

    One difference is kept from the API this name comes from, so that the MNIST tutorial runs as
    written: after a compile that built a backward, ``last_traces`` returns the pair
    ``[forward_traces, backward_traces]`` instead of the forward traces alone.
    """
    check_python_version()
    return _jit(fn, _given_options(**options), pair_last_traces=True)


def _given_options(**options: Any) -> dict[str, Any]:
    """The options given; ``None`` for executors, cache or transforms means "the default", as if not given."""
    defaults = ("executors", "cache", "transforms")
    return {name: value for name, value in options.items() if not (name in defaults and value is None)}


def _jit(fn: Callable, given: dict[str, Any], pair_last_traces: bool) -> Any:
    """``thunder.jit`` and ``thunder.compile``.

    Jitting a jitted function or ThunderModule compiles its original callable again, with the
    options it was compiled with updated by the ones given now; when that changes nothing, the
    compiled object itself is returned (its cache and statistics stay shared).
    """
    previous = _pipeline.compiled_by_thunder(fn)
    if previous is not None:
        given = {**_pipeline.jit_arguments(previous), **given}
        compiled, fn = fn, previous.fn
    jitted = _pipeline.jit(fn, frontend=interpreter_frontend, **{"cache": "constant values", **given})
    compile_data(jitted).pair_last_traces = pair_last_traces
    if previous is not None and _pipeline.same_configuration(previous, compile_data(jitted)):
        return compiled
    if isinstance(fn, _pytorch.nn.Module):
        return ThunderModule(fn, jitted)
    return jitted


def last_traces(fn: Any) -> list[Trace]:
    """The computation traces of the last compile, from the frontend's to the execution trace.

    With a backward (some input required grad), these are the forward's traces; for a function
    made by :func:`compile` they come paired with the backward's: ``[forward_traces, backward_traces]``.
    """
    stats = compile_stats(fn)
    if compile_data(fn).pair_last_traces and stats.last_backward_traces:
        return [stats.last_traces, stats.last_backward_traces]  # type: ignore[list-item]
    return stats.last_traces


def last_backward_traces(fn: Any) -> list[Trace]:
    """The backward traces of the last compile, from the autograd split to the execution trace.

    Empty when the last compile needed no gradients (no input required grad, or grad mode was off).
    """
    return compile_stats(fn).last_backward_traces


def last_prologue_traces(fn: Any) -> list[Trace]:
    """The prologue traces of the cache entry the last call ran (what it fetched and checked)."""
    return compile_stats(fn).last_prologue_traces


def cache_option(fn: Any) -> str:
    """The cache option ``fn`` was compiled with: ``"constant values"``, ``"symbolic values"`` or ``"no caching"``."""
    return compile_data(fn).cache_option


def cache_hits(fn: Any) -> int:
    """How many calls of ``fn`` ran a cached computation (its prologue accepted the inputs)."""
    return compile_stats(fn).cache_hits


def cache_misses(fn: Any) -> int:
    """How many calls of ``fn`` traced and compiled anew (every call with ``"no caching"``)."""
    return compile_stats(fn).cache_misses


def cache_dir() -> str:
    """The folder of the on-disk cache: ``THUNDER_CACHE_DIR`` if set, else ``~/.cache/thunder``.

    A process that compiles a program another process compiled before (same program, options,
    thunder, torch, executors and device) loads what the transforms and executors made from there
    instead of making it again; ``compile_stats(fn).disk_cache_hits`` counts those compiles. Triton
    keeps its kernels in ``<cache_dir>/triton`` unless ``TRITON_CACHE_DIR`` is set.

    Example::

        print(thunder.cache_dir())  # /home/me/.cache/thunder
    """
    return _disk_cache.cache_dir()


def clear_cache() -> None:
    """Delete the on-disk cache (the folder :func:`cache_dir` names), thunder's entries and the Triton
    kernels kept there. Functions already compiled keep their compiled programs in memory.

    Example::

        thunder.clear_cache()
    """
    _disk_cache.clear_cache()


def list_transforms(fn: Any) -> list[Callable[[Trace], Trace]]:
    """The transforms given to ``thunder.jit(fn, transforms=...)``, in the order they run."""
    return list(compile_data(fn).transforms)


def last_interpreted_instructions(fn: Any) -> list[tuple[str, str, int, str, str]]:
    """The instructions the interpreter ran while tracing, on the last cache miss.

    Returns:
        One ``(function qualname, file name, line, opname, argument)`` tuple per executed instruction,
        in execution order.

    Example::

        jitted = thunder.jit(lambda x: x * 2)
        jitted(torch.ones(2))
        [record[3] for record in thunder.last_interpreted_instructions(jitted)][-1]  # 'RETURN_VALUE'
    """
    return [record for record in compile_stats(fn).last_interpreted_instructions if type(record) is tuple]


def last_interpreter_log(fn: Any) -> list:
    """The instructions and other events of the interpreter's last run (on the last cache miss).

    Returns:
        The records of :func:`last_interpreted_instructions` interleaved, in order, with
        ``InterpreterEvent(kind, detail)`` records: ``"lookaside"`` (a torch callable replaced by a
        thunder symbol), ``"opaque call"`` (a callable without Python code run natively).
    """
    return list(compile_stats(fn).last_interpreted_instructions)


def last_compile_options(fn: Any, /) -> None:
    """Print the compile options given to ``thunder.jit`` and whether the compile used them."""
    data = compile_data(fn)
    for name, value in data.options.items():
        status = "used" if name in data.used_options else "not used"
        print(f"{name}={value!r}: {status}")
