"""The opcode dispatch table and the few sentinels handlers share.

Handlers are plain functions ``handler(frame, op)``; they return None to continue with the
next instruction, or RETURN / YIELD to suspend the frame. Keeping them module-level
functions in a dict keeps the per-instruction cost to one dict-free list index and a call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["HANDLERS", "handles", "NULL", "RETURN", "YIELD", "PY311", "PY312"]

PY311 = sys.version_info[:2] == (3, 11)
PY312 = sys.version_info[:2] == (3, 12)

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


def handles(*opnames: str, only: tuple[int, int] | None = None) -> Callable:
    """Register a handler for ``opnames``; ``only`` restricts it to one Python version."""

    def register(handler: Callable) -> Callable:
        if only is None or sys.version_info[:2] == only:
            for opname in opnames:
                HANDLERS[opname] = handler
        return handler

    return register
