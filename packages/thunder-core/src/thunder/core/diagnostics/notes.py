"""Notes on exceptions (PEP 678) on every supported Python.

Python 3.11 added ``BaseException.add_note``, whose notes tracebacks print under the message. On 3.10
the ``__notes__`` list is kept for code that reads it, and the note is also appended to a string
message, since 3.10's traceback prints no notes: a hint must not vanish on the oldest Python.
"""

from __future__ import annotations

__all__ = ["add_note"]


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)``, or on Python 3.10 its visible equivalent."""
    if hasattr(error, "add_note"):
        error.add_note(note)
        return
    error.__notes__ = [*getattr(error, "__notes__", ()), note]  # type: ignore[attr-defined]
    if error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}", *error.args[1:])
