"""A note on errors raised while compiling: where in the user's code, and what to try.

The interpreter already notes each interpreted frame an exception crossed (``thunder: in f at
file:line: source``). This adds one closing note that names the innermost frame of user code (not
thunder's, not torch's) and a suggestion chosen by the kind of error, matched by class name so that
core needs no import of the packages that define some of them.

An error of eager's own types raised while the interpreter ran the user's code is the program's:
thunder's shape, dtype and device checks raise them as eager does, so eager raises it too, and the
note does not call it a thunder bug. Any other error (an internal one, or one raised after tracing,
in a transform or an executor) may be thunder's: the note says so.
"""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path

import torch

from thunder.core.diagnostics.notes import add_note
from thunder.core.diagnostics.tracebacks import frame_notes

__all__ = ["add_hint", "user_location", "HINTS"]

_THUNDER_ROOT = str(Path(__file__).resolve().parents[2])  # .../src/thunder of thunder-core
_LIBRARY_MARKERS = (
    f"{Path(torch.__file__).parent}",
    "/thunder/core/",
    "/thunder/interpreter/",
    "/thunder/executors/",
    "/thunder/dynamo/",
    "/thunder/torch/",
    "/thunder/__init__.py",
    "<frozen ",
    "/site-packages/",
    "/dist-packages/",
    "/lib/python3",
)

EXAMINE = "thunder.examine(fn, *args) lists which operators of the program thunder supports"

# exception class name -> what to try
HINTS = {
    "DataDependentError": (
        "torch.compile(fn, backend=thunder.dynamo.ThunderCompiler()) runs the data-dependent part with "
        "PyTorch and the rest with thunder"
    ),
    "UnsupportedTorchFunctionError": (
        "compute this value outside the jitted function and pass it in, or compile with "
        "torch.compile(fn, backend=thunder.dynamo.ThunderCompiler()), which leaves such operators "
        f"to PyTorch; {EXAMINE}"
    ),
    "InterpreterError": (
        "thunder's interpreter cannot run this Python construct: move it out of the jitted function, "
        "or use torch.compile(fn, backend=thunder.dynamo.ThunderCompiler())"
    ),
    "NoGradientRuleError": (
        "this operation has no gradient rule: call it under torch.no_grad() or on detached tensors if "
        "no gradient must flow through it, or register one with thunder.core.gradients.register_vjp"
    ),
    "UnclaimedSymbolError": (
        "no executor in the list claims this operation: add 'torch' to executors=[...] "
        "(thunder.get_all_executors() lists the installed ones)"
    ),
}
_DEFAULT = (
    f"{EXAMINE}; thunder.jit(fn, save_traces='dir') writes each trace it built to 'dir'. "
    "If eager PyTorch runs this program, this is a thunder bug worth reporting "
    "(THUNDER_FULL_TRACEBACK=1 shows thunder's own frames for the report)"
)
# The exception types thunder's checks raise where eager does; exactly these, not thunder's own
# subclasses of them (InterpreterError is a RuntimeError)
_EAGERS_TYPES = (RuntimeError, TypeError, ValueError, IndexError)
_PROGRAMS_ERROR = (
    "correct the program there; eager PyTorch raises the same error at that line (thunder checks "
    "shapes, dtypes and devices as eager does)"
)


def _is_users(filename: str, line: int) -> bool:
    """A frame of the user's program: not a library's, and from source Python can show (not code a
    library compiled from a string, such as a generated trace or an exec'd copy of a module)."""
    if filename.startswith(_THUNDER_ROOT) or any(marker in filename for marker in _LIBRARY_MARKERS):
        return False
    return bool(linecache.getline(filename, line).strip())


def _noted_location(error: BaseException) -> str | None:
    """``file:line`` of the innermost user frame the interpreter was running when ``error`` arose."""
    return next((f"{file}:{line}" for file, line, _ in frame_notes(error) if _is_users(file, line)), None)


def user_location(error: BaseException) -> str | None:
    """``file:line`` of the innermost user frame: from the interpreter's notes, else the traceback."""
    location = _noted_location(error)
    if location is not None:
        return location
    for frame, line in reversed(list(traceback.walk_tb(error.__traceback__))):
        filename = frame.f_code.co_filename
        if not str(frame.f_globals.get("__name__")).startswith("thunder.") and _is_users(filename, line):
            return f"{filename}:{line}"  # code thunder called, a transform or an executor of the user's
    return None


def _hint(error: BaseException) -> str:
    named = next((HINTS[cls.__name__] for cls in type(error).__mro__ if cls.__name__ in HINTS), None)
    if named is not None:
        return named
    if type(error) in _EAGERS_TYPES and _noted_location(error) is not None:
        return _PROGRAMS_ERROR
    return _DEFAULT


def add_hint(error: BaseException, fn_name: str) -> None:
    """Note where in the user's code ``error`` arose and what to try (once per exception)."""
    if any(note.startswith("thunder: compiling") for note in getattr(error, "__notes__", ())):
        return
    hint = _hint(error)
    location = user_location(error)
    where = f" failed at {location} (your code)" if location else " failed"
    try:
        add_note(error, f"thunder: compiling {fn_name}{where}. What to try: {hint}.")
    except Exception:  # an exception type that refuses notes still propagates unchanged
        pass
