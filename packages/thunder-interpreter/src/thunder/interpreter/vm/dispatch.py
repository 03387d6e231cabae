"""The opcode dispatch table and the few sentinels handlers share.

Handlers are plain functions ``handler(frame, op)``; they return None to continue with the
next instruction, or RETURN / YIELD to suspend the frame. Keeping them module-level
functions in a dict keeps the per-instruction cost to one dict-free list index and a call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = [
    "HANDLERS",
    "handles",
    "NULL",
    "RETURN",
    "YIELD",
    "VERSION",
    "PY310",
    "PY311",
    "PY312",
    "PY313",
    "NULL_AFTER_CALLABLE",
]

# The running Python's (major, minor): the bytecode the VM reads is this version's.
VERSION: tuple[int, int] = (sys.version_info[0], sys.version_info[1])
PY310 = VERSION == (3, 10)
PY311 = VERSION == (3, 11)
PY312 = VERSION == (3, 12)
PY313 = VERSION == (3, 13)
# Calls take two stack slots from 3.11 on: ``NULL, callable`` until 3.12, ``callable, NULL`` from 3.13.
NULL_AFTER_CALLABLE = VERSION >= (3, 13)

HANDLERS: dict[str, Callable] = {}


class _Null:
    """The C NULL that CPython pushes for calls and unbound local slots."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<NULL>"


NULL = _Null()


class _Signal:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


RETURN = _Signal("RETURN")
YIELD = _Signal("YIELD")


def handles(
    *opnames: str,
    since: tuple[int, int] | None = None,
    until: tuple[int, int] | None = None,
) -> Callable:
    """Register a handler for ``opnames`` on the Python versions ``since`` .. ``until`` (both
    inclusive). An opcode whose meaning changed between versions gets one small handler per
    meaning, each registered for its versions; the table holds only the running version's.
    """
    first = since or (3, 0)
    last = until or (3, 99)

    def register(handler: Callable) -> Callable:
        if first <= VERSION <= last:
            for opname in opnames:
                HANDLERS[opname] = handler
        return handler

    return register
