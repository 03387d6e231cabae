"""State shared by all frames of one ``interpret`` call."""

from __future__ import annotations

from typing import Any

from thunder.core.sources import Source
from thunder.interpreter.vm.hooks import InterpreterHooks
from thunder.interpreter.vm.provenance import ProvenanceTable

__all__ = ["InterpreterContext"]

_LIBRARY_PREFIXES = ("thunder.", "torch.", "torch")


class InterpreterContext:
    """Hooks, provenance, the interpreted call stack and the handled-exception chain.

    ``exception_slots`` models CPython's ``exc_info`` chain: PUSH_EXC_INFO / POP_EXCEPT write
    the last slot, and each running generator pushes its own slot.
    ``propagating`` / ``reraising`` mark an exception that already got its ``__context__`` so
    that frames it passes through do not chain it again.
    """

    __slots__ = (
        "hooks",
        "provenance",
        "frames",
        "exception_slots",
        "created_functions",
        "created_cells",
        "propagating",
        "reraising",
        "type_cache",
        "next_methods",
        "dict_views",
        "located",
        "written_attributes",
    )

    def __init__(self, hooks: InterpreterHooks) -> None:
        self.hooks = hooks
        self.provenance = ProvenanceTable()
        self.frames: list = []
        self.exception_slots: list = [None]
        self.created_functions: dict[int, Any] = {}
        self.created_cells: dict[int, Any] = {}
        self.propagating: BaseException | None = None
        self.reraising: BaseException | None = None
        self.type_cache: dict = {}
        self.next_methods: dict = {}
        self.dict_views: dict = {}
        self.located: BaseException | None = None  # the exception on_exception last saw
        # (id(obj), name) -> obj for attributes the program assigned on objects read from outside the
        # call: reading one back gives what the program itself wrote, which needs no prologue check
        self.written_attributes: dict[tuple[int, str], Any] = {}

    def load(self, value: Any, source: Source) -> Any:
        """Report a value with known provenance and remember the source of what is used."""
        value = self.hooks.on_load(value, source)
        self.provenance.register(value, source)
        return value

    def user_location(self) -> str:
        """``file:line: source`` of the innermost interpreted frame that is not torch's or thunder's."""
        from thunder.interpreter.vm.errors import describe_location

        frames = self.frames
        if not frames:
            return "<not interpreting>"
        for frame in reversed(frames):
            module = getattr(frame.function, "__module__", None) or ""
            if not module.startswith(_LIBRARY_PREFIXES):
                return describe_location(frame, frame.current_op())
        return describe_location(frames[-1], frames[-1].current_op())

    def handled_exception(self) -> BaseException | None:
        """The innermost exception being handled, like ``sys.exception()``."""
        for value in reversed(self.exception_slots):
            if value is not None:
                return value
        return None

    def chain(self, exc: BaseException) -> None:
        """Set ``__context__`` as CPython's ``_PyErr_SetObject`` does, avoiding cycles."""
        handled = self.handled_exception()
        if handled is None or handled is exc or exc.__context__ is not None:
            return
        node = handled
        while (inner := node.__context__) is not None:
            if inner is exc:
                node.__context__ = None
                break
            node = inner
        exc.__context__ = handled
