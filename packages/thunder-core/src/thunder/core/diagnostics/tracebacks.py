"""Tracebacks of compile errors that show the user's frames, as eager's do, and not thunder's.

thunder runs the user's code in its bytecode interpreter, so the Python stack of an error raised
while tracing holds thunder's frames (the pipeline, the interpreter loop, a meta function) and none
of the user's: the interpreter only notes each user frame the error crossed (``thunder: in f at
file:line``). ``with_user_frames`` replaces that stack by one frame per noted user function, in
the user's file at the user's line, so the traceback reads like eager's::

    Traceback (most recent call last):
      File "train.py", line 9, in <module>
        jitted(a, b)
      File "train.py", line 4, in f
        return c @ b
    RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)

Python builds a traceback entry only from a real frame, so each user frame is made real: a code
object compiled with the user's file name, its call placed on the user's line (and spanning the
whole line, so that no caret marks part of it), renamed after the user's function and run once;
the frame it leaves behind is the one the entry points at. The pipeline re-raises with a bare
``raise``, which on Python 3.11+ adds no entry for its own frame; on 3.10 one entry of thunder's
(``raise error`` in ``JittedFunction.__call__``) remains. ``THUNDER_FULL_TRACEBACK=1`` keeps the full
traceback of thunder's frames instead (for reporting a thunder bug).
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import types
from typing import Any

__all__ = ["FULL_TRACEBACK_VARIABLE", "with_user_frames", "full_traceback_requested", "frame_notes"]

FULL_TRACEBACK_VARIABLE = "THUNDER_FULL_TRACEBACK"

# the interpreter's note for each interpreted frame an exception crossed (vm/errors.py)
_FRAME_NOTE = re.compile(r"^\s*thunder: in (?P<name>\S+) at (?P<file>.+?):(?P<line>\d+):(?: |$)")


class _Unwound(BaseException):
    """Raised by the synthesized code to leave its frame behind in a traceback."""


def _unwind() -> None:
    raise _Unwound


def full_traceback_requested() -> bool:
    return os.environ.get(FULL_TRACEBACK_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def _thunder_folders() -> tuple[str, ...]:
    package = sys.modules.get("thunder")
    paths = getattr(package, "__path__", None) or [
        os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    ]
    return tuple(os.path.join(os.path.realpath(path), "") for path in paths)


def _is_thunders(filename: str, folders: tuple[str, ...]) -> bool:
    return filename.startswith("thunder.") or os.path.realpath(filename).startswith(folders)


def frame_notes(error: BaseException) -> list[tuple[str, int, str]]:
    """``(file, line, function)`` of each frame the interpreter noted ``error`` crossed, innermost first."""
    matches = (_FRAME_NOTE.match(note) for note in getattr(error, "__notes__", ()))
    return [(match["file"], int(match["line"]), match["name"]) for match in matches if match]


def _user_frames(error: BaseException, folders: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """``(file, line, function)`` of each interpreted frame that is not thunder's, outermost first."""
    return [frame for frame in reversed(frame_notes(error)) if not _is_thunders(frame[0], folders)]


def _source_for(filename: str, lineno: int) -> str:
    """Code whose call ``_(...)`` sits on ``lineno`` exactly where the user's statement does."""
    line = linecache.getline(filename, lineno).rstrip("\n")
    stripped = line.strip()
    indent = len(line) - len(line.lstrip())
    call = "_(" + " " * max(len(stripped) - 3, 0) + ")"
    if indent and lineno > 1:  # an indented line: an ``if`` block puts the call in the same column
        return "\n" * (lineno - 2) + "if 1:\n" + line[:indent] + call
    return "\n" * (lineno - 1) + call


def _real_frame(filename: str, lineno: int, name: str) -> tuple[types.FrameType, int]:
    code = compile(_source_for(filename, lineno), filename, "exec")
    names: dict[str, Any] = {"co_name": name.rpartition(".")[2]}  # tracebacks print the short name
    if sys.version_info >= (3, 11):
        names["co_qualname"] = name
    code = code.replace(**names)
    try:
        exec(code, {"__name__": name, "_": _unwind})
    except _Unwound as unwound:
        entry = unwound.__traceback__.tb_next  # type: ignore[union-attr]  # the synthesized code's frame
        assert entry is not None
        return entry.tb_frame, entry.tb_lasti
    raise AssertionError("the synthesized frame did not unwind")


def _beyond_thunder(traceback: types.TracebackType | None, folders: tuple[str, ...]) -> Any:
    """The entries after thunder's innermost one: code thunder called for real (torch's Python code)."""
    tail = traceback
    while traceback is not None:
        if _is_thunders(traceback.tb_frame.f_code.co_filename, folders):
            tail = traceback.tb_next
        traceback = traceback.tb_next
    return tail


def with_user_frames(error: BaseException) -> BaseException:
    """``error`` with the user's frames as its traceback instead of thunder's (unless the
    environment sets ``THUNDER_FULL_TRACEBACK=1``).

    Errors that crossed no user frame (a failure in a transform or an executor) keep their traceback.

    Args:
        error: an exception raised while compiling, carrying the interpreter's frame notes.

    Returns:
        ``error`` itself, its traceback replaced and the frame notes it now shows as frames removed.
    """
    if full_traceback_requested():
        return error
    folders = _thunder_folders()
    frames = _user_frames(error, folders)
    if not frames:
        return error
    try:
        traceback = _beyond_thunder(error.__traceback__, folders)
        for filename, lineno, name in reversed(frames):
            frame, lasti = _real_frame(filename, lineno, name)
            traceback = types.TracebackType(traceback, frame, lasti, lineno)
    except Exception:  # noqa: BLE001 -- a traceback thunder cannot rebuild stays as it was
        return error
    error.__notes__ = [note for note in error.__notes__ if not _FRAME_NOTE.match(note)]
    return error.with_traceback(traceback)
