"""Notes on exceptions (PEP 678) on every supported Python.

Python 3.11 added ``BaseException.add_note``, whose notes tracebacks print under the message. On 3.10
the ``__notes__`` list is kept for code that reads it (pytest, IPython, ``traceback`` backports); the
message itself is never changed, since an exception raised by the user's code must surface
unchanged, so 3.10's plain traceback does not show thunder's notes.
"""

from __future__ import annotations

__all__ = ["add_note"]


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)``, or on Python 3.10 its ``__notes__`` equivalent."""
    if hasattr(error, "add_note"):
        error.add_note(note)
        return
    error.__notes__ = [*getattr(error, "__notes__", ()), note]
