"""A note on errors raised while compiling: where in the user's code, and what to try.

The interpreter already notes each interpreted frame an exception crossed (``thunder: in f at
file:line: source``). This adds one closing note that names the innermost frame of user code (not
thunder's, not torch's) and a suggestion chosen by the kind of error, matched by class name so that
core needs no import of the packages that define some of them.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import torch

from thunder.core.diagnostics.notes import add_note

__all__ = ["add_hint", "user_location", "HINTS"]

_FRAME_NOTE = re.compile(r"thunder: in \S+ at (?P<file>.+?):(?P<line>\d+)")
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


def _is_library(filename: str) -> bool:
    return filename.startswith(_THUNDER_ROOT) or any(marker in filename for marker in _LIBRARY_MARKERS)


def user_location(error: BaseException) -> str | None:
    """``file:line`` of the innermost user frame: from the interpreter's notes, else the traceback."""
    for note in getattr(error, "__notes__", ()):
        match = _FRAME_NOTE.search(note)
        if match and not _is_library(match["file"]):
            return f"{match['file']}:{match['line']}"
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    for frame in reversed(frames):
        if not _is_library(frame.filename):
            return f"{frame.filename}:{frame.lineno}"
    return None


def add_hint(error: BaseException, fn_name: str) -> None:
    """Note where in the user's code ``error`` arose and what to try (once per exception)."""
    if any(note.startswith("thunder: compiling") for note in getattr(error, "__notes__", ())):
        return
    hint = next((HINTS[cls.__name__] for cls in type(error).__mro__ if cls.__name__ in HINTS), _DEFAULT)
    location = user_location(error)
    where = f" failed at {location} (your code)" if location else " failed"
    try:
        add_note(error, f"thunder: compiling {fn_name}{where}. What to try: {hint}.")
    except Exception:  # an exception type that refuses notes still propagates unchanged
        pass
