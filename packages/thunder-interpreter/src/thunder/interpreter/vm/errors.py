"""Errors raised by the VM, and the notes it attaches to user exceptions.

User exceptions keep their type and arguments so that calling code can handle them exactly as
it would the native call; the VM only adds notes saying which interpreted frames they crossed.
"""

from __future__ import annotations

import linecache
from typing import Any

__all__ = [
    "InterpreterError",
    "location_of",
    "describe_location",
    "unsupported",
    "annotate_exception",
    "qualname_of",
]


def qualname_of(code: Any, function: Any = None) -> str:
    """A code object's qualified name. 3.10 code objects know only their short name: there the
    function's ``__qualname__`` stands in."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is None:
        qualname = getattr(function, "__qualname__", code.co_name)
    return qualname


class InterpreterError(RuntimeError):
    """A construct the VM cannot run; the message names it and the user's file:line."""


def location_of(frame: Any, op: Any) -> str:
    """``file:line`` of an instruction, for messages pointing at user code."""
    lineno = op.lineno if op is not None else frame.code.co_firstlineno
    return f"{frame.code.co_filename}:{lineno}"


def describe_location(frame: Any, op: Any) -> str:
    """``file:line: source line`` of an instruction."""
    lineno = op.lineno if op is not None else frame.code.co_firstlineno
    line = linecache.getline(frame.code.co_filename, lineno or 0).strip()
    return f"{frame.code.co_filename}:{lineno}: {line}" if line else f"{frame.code.co_filename}:{lineno}"


def unsupported(frame: Any, op: Any, construct: str) -> InterpreterError:
    return InterpreterError(
        f"thunder's interpreter does not support the {op.opname} instruction ({construct}) "
        f"at {location_of(frame, op)}"
    )


def annotate_exception(frame: Any, op: Any, exc: BaseException) -> None:
    """Add one ``thunder: in ...`` note per interpreted frame, innermost first."""
    code = frame.code
    lineno = op.lineno if op is not None else code.co_firstlineno
    line = linecache.getline(code.co_filename, lineno or 0).strip()
    note = f"  thunder: in {qualname_of(code, frame.function)} at {code.co_filename}:{lineno}: {line}"
    try:
        _add_note(exc, note)
    except Exception:  # an exception type that refuses notes still propagates unchanged
        pass


def _add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)``; on 3.10 (no PEP 678) the ``__notes__`` list alone. The VM imports no torch,
    so it does not share thunder.core's helper."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
        return
    exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
