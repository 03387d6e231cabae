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
from thunder.core import pipeline as _pipeline  # noqa: E402
from thunder.core.executor import Executor, get_all_executors, get_default_executors  # noqa: E402
from thunder.core.module import ThunderModule  # noqa: E402
from thunder.core.pipeline import compile_data, compile_stats  # noqa: E402
from thunder.core.trace import Trace  # noqa: E402
from thunder.interpreter import interpreter_frontend  # noqa: E402

__all__ = [
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
    "list_transforms",
    "last_interpreted_instructions",
    "last_interpreter_log",
    "last_compile_options",
    "get_all_executors",
    "get_default_executors",
    "ThunderModule",
    "Trace",
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
        fn: a function or a ``torch.nn.Module``.
        executors: executors (names or objects) in priority order; the defaults follow them.
        cache: ``"constant values"`` (default: Python values the program reads are checked on
            every call and a change recompiles) or ``"no caching"``.
        transforms: functions ``Trace -> Trace`` applied to the computation trace before execution.

    Returns:
        For a module, a ``ThunderModule`` sharing the module's parameters and buffers; for a
        function, a callable with the same signature.

    Example::

        model = torch.nn.Linear(4, 2)
        jmodel = thunder.jit(model)
        y = jmodel(torch.randn(3, 4))
        print(thunder.last_traces(jmodel)[-1])
    """
    jitted = _pipeline.jit(
        fn,
        frontend=interpreter_frontend,
        executors=executors,
        cache=cache or "constant values",
        transforms=transforms or (),
        **compile_options,
    )
    if isinstance(fn, _pytorch.nn.Module):
        return ThunderModule(fn, jitted)
    return jitted


compile = jit  # the name the MNIST tutorial uses  # noqa: A001


def last_traces(fn: Any) -> list[Trace]:
    """The computation traces of the last compile, from the frontend's to the execution trace."""
    return compile_stats(fn).last_traces


def last_backward_traces(fn: Any) -> list[Trace]:
    """The backward traces of the last compile, from the autograd split to the execution trace.

    Empty when the last compile needed no gradients (no input required grad, or grad mode was off).
    """
    return compile_stats(fn).last_backward_traces


def last_prologue_traces(fn: Any) -> list[Trace]:
    return compile_stats(fn).last_prologue_traces


def cache_option(fn: Any) -> str:
    return compile_data(fn).cache_option


def cache_hits(fn: Any) -> int:
    return compile_stats(fn).cache_hits


def cache_misses(fn: Any) -> int:
    return compile_stats(fn).cache_misses


def list_transforms(fn: Any) -> list[Callable[[Trace], Trace]]:
    return list(compile_data(fn).transforms)


def last_interpreted_instructions(fn: Any) -> list:
    """The instructions the interpreter ran on the last cache miss."""
    return [record for record in compile_stats(fn).last_interpreted_instructions]


def last_interpreter_log(fn: Any) -> list:
    """Instructions and other records the interpreter logged on the last cache miss."""
    return list(compile_stats(fn).last_interpreted_instructions)


def last_compile_options(fn: Any, /) -> None:
    """Print the compile options given to ``thunder.jit`` and whether the compile used them."""
    data = compile_data(fn)
    for name, value in data.options.items():
        status = "used" if name in data.used_options else "not used"
        print(f"{name}={value!r}: {status}")
