"""The options of ``thunder.jit``: one table, checked when ``thunder.jit`` is called.

Every option that any part of the pipeline reads is declared here with a line of documentation and
a cheap check of its value. ``thunder.jit``, ``thunder.compile``, ``thunder.functional.jit`` and
``ThunderCompiler(**thunder_options)`` check what they are given against this table, so that a
misspelt option or an impossible value fails at once, naming the option and the valid choices,
instead of being ignored or failing at the first call.

A new option is one more entry below; the code that reads it uses ``compile_data.options.get(name)``
(and adds the name to ``compile_data.used_options``).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CompileOption", "COMPILE_OPTIONS", "CACHE_OPTIONS", "REMATERIALIZATION_OPTIONS", "check_compile_options",
    "check_callable",
]  # fmt: skip

CACHE_OPTIONS = ("constant values", "symbolic values", "no caching")
REMATERIALIZATION_OPTIONS = ("auto", "save memory", "off")


@dataclass(frozen=True)
class CompileOption:
    """One option of ``thunder.jit``: its name, what it does, and what makes its value wrong."""

    name: str
    doc: str
    # the reason a value is wrong, or None when it is fine (None, the default, is always fine)
    problem: Callable[[Any], str | None]


def _one_of(choices: Sequence[str]) -> Callable[[Any], str | None]:
    return lambda value: None if value in choices else f"choose one of {', '.join(map(repr, choices))}"


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "expected True or False"


def _cache_size(value: Any) -> str | None:
    if type(value) is int and value >= 1:
        return None
    return "expected a positive int, or None for no bound"


def _seconds(value: Any) -> str | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan  # not a number: fails the comparison below, as NaN does
    return None if seconds >= 0 else "expected a number of seconds >= 0"


def _folder(value: Any) -> str | None:
    return None if isinstance(value, (str, os.PathLike)) else "expected a folder name (str or path)"


def _executors(value: Any) -> str | None:
    # names are resolved (and unknown ones reported with the known ones) by resolve_executors
    if isinstance(value, Sequence) or hasattr(value, "name"):  # a str is a Sequence
        return None
    return "expected a sequence of executor names or Executor objects"


def _transforms(value: Any) -> str | None:
    if isinstance(value, Sequence) and not isinstance(value, str) and all(callable(t) for t in value):
        return None
    return "expected a sequence of callables Trace -> Trace"


COMPILE_OPTIONS: Mapping[str, CompileOption] = {
    option.name: option
    for option in (
        CompileOption(
            "executors",
            "executors (names or Executor objects) in priority order; the defaults follow them",
            _executors,
        ),
        CompileOption(
            "cache",
            "'constant values' (default), 'symbolic values' or 'no caching': what a cache entry assumes",
            _one_of(CACHE_OPTIONS),
        ),
        CompileOption("transforms", "functions Trace -> Trace applied to the computation trace", _transforms),
        CompileOption(
            "cache_size",
            "the most cache entries kept (least recently used evicted); 32 by default",
            _cache_size,
        ),
        CompileOption(
            "fallback",
            "False: a torch operator without a thunder symbol is an error, not a PyTorch call (default True)",
            _bool,
        ),
        CompileOption(
            "rematerialization",
            "'auto' (default: the backward recomputes cheap forward ops only where a fusion executor runs"
            " them), 'save memory' (recompute whatever saves memory, also unfused) or 'off'",
            _one_of(REMATERIALIZATION_OPTIONS),
        ),
        CompileOption(
            "dynamic",
            "None (default): a dim whose size changed between compiles is traced as a symbol from then on;"
            " True: every dim of every input but parameters from the first compile; False: shapes stay"
            " static (core/symbolic_shapes.py)",
            _bool,
        ),
        CompileOption(
            "cuda_graphs", "True: capture each compiled function in a CUDA graph and replay it", _bool
        ),
        CompileOption(
            "fold_rms_norms",
            "True: fold a one-row RMS norm (and the residual add before it) into the Triton GEMV that"
            " reads it (core/transforms/fold_rms_norms.py); off by default: slower than the norm's own"
            " kernel on an H100 for the 8B shapes",
            _bool,
        ),
        CompileOption(
            "disk_cache",
            "False: neither read nor write the on-disk cache of compiled programs (THUNDER_CACHE_DIR);"
            " on by default unless THUNDER_DISK_CACHE=0",
            _bool,
        ),
        CompileOption(
            "save_traces", "a folder to write every trace of each compile to (THUNDER_SAVE_TRACES)", _folder
        ),
        CompileOption(
            "progress_threshold",
            "seconds after which a compile logs progress (THUNDER_PROGRESS_THRESHOLD; default 5)",
            _seconds,
        ),
    )
}


def _valid_options() -> str:
    return ", ".join(sorted(COMPILE_OPTIONS))


def check_compile_options(options: Mapping[str, Any], caller: str = "thunder.jit") -> None:
    """Raise for an option ``COMPILE_OPTIONS`` does not declare or a value it rejects.

    Args:
        options: the options as given (``None`` values stand for the defaults and always pass).
        caller: the function named in the message.

    Raises:
        TypeError: an unknown option, as Python does for an unexpected keyword argument; the message
            lists the valid options and the closest match.
        ValueError: a known option with an impossible value; the message says what is expected.
    """
    for name, value in options.items():
        option = COMPILE_OPTIONS.get(name)
        if option is None:
            close = difflib.get_close_matches(name, COMPILE_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"{caller}() got an unknown option {name!r}{hint}; valid options: {_valid_options()}"
            )
        problem = None if value is None else option.problem(value)
        if problem is not None:
            raise ValueError(f"{caller}() option {name}={value!r} is invalid: {problem}")


def check_callable(fn: Any, caller: str = "thunder.jit") -> None:
    """Raise TypeError, as ``torch.compile`` does, when ``fn`` cannot be called."""
    if not callable(fn):
        raise TypeError(
            f"{caller}() expects a function or a torch.nn.Module, not {type(fn).__name__} ({fn!r:.60})"
        )
