"""The customisation points a compiler uses to steer the VM."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder.core.sources import Source

__all__ = ["InterpreterHooks"]


class InterpreterHooks:
    """Subclass and override; the defaults make the VM behave like a plain Python call.

    ``instruction_log``: when a list, the VM appends ``(qualname, filename, lineno, opname,
    argrepr)`` for every executed instruction, which is how tests and debugging tools see
    exactly what ran.
    """

    instruction_log: list | None = None

    def lookaside(self, fn: Any) -> Callable | None:
        """A replacement to call natively instead of ``fn`` (e.g. a torch op recorder)."""
        return None

    def check_lookup_key(self, container: Any, key: Any, operation: str) -> None:
        """``container`` (a dict or set read from outside the call) is about to be looked up by ``key``."""

    def unwrapped(self, fn: Any) -> Any:
        """The function to call in place of ``fn``, a wrapper whose only job the program does not need."""
        return fn

    def interpreted_instead(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """A callable to interpret in place of the callable object ``fn`` (not a function or method)
        called with ``args`` and ``kwargs``, or None: a compiled function met inside the program stands
        for its original."""
        return None

    def on_load(self, value: Any, source: Source) -> Any:
        """A value read from a place with known provenance; the return value is used instead."""
        return value

    def on_identity_test(self, left: Any, right: Any) -> None:
        """The program compared two values by identity (``is``, or ``==`` without ``__eq__``)."""
        return None

    def check_opaque_call(self, fn: Any, args: tuple, kwargs: dict) -> None:
        """Called before a non-Python callable runs natively; raise to forbid it."""
        return None

    def on_store_attr(self, obj: Any, name: str, value: Any) -> bool:
        """Called before ``obj.name = value``; True when the hook took care of it (nothing is assigned)."""
        return False

    def on_delete_attr(self, obj: Any, name: str) -> None:
        """Called before ``del obj.name`` on an object read from outside the call; raise to forbid it."""
        return None

    def on_store_global(self, globals_dict: dict, name: str, value: Any) -> None:
        """Called before ``global name`` is assigned or deleted (``value`` is None then); raise to forbid it."""
        return None

    def on_mutation(self, obj: Any, source: Source, operation: str) -> None:
        """Called before a list, dict or set read from outside the call (``source``) is changed in place
        by ``operation`` (``append``, ``[]=``); raise to forbid it."""
        return None

    def on_exception(self, exc: BaseException, location: str) -> None:
        """Called once for each exception leaving the frame that raised it (StopIteration and the
        like excepted); ``location`` is ``file:line: source`` of the innermost user frame."""
        return None

    def source_of(self, value: Any) -> Source | None:
        """Where the program read ``value`` from, if from outside the call; ``interpret`` replaces this."""
        return None

    def register_source(self, value: Any, source: Source) -> None:
        """Tell the VM where ``value`` came from (found inside another loaded value); ``interpret`` replaces this."""
        return None

    def current_location(self) -> str:
        """``file:line: source`` of the innermost user frame; ``interpret`` replaces this."""
        return "<not interpreting>"
