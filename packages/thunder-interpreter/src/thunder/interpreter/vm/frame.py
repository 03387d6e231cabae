"""A VM frame: the fast locals, value stack and position of one interpreted call."""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

from thunder.core.sources import ClosureSource
from thunder.interpreter.vm.binding import bind_arguments
from thunder.interpreter.vm.instructions import DecodedCode, Op, decode

__all__ = ["Frame", "make_frame"]


class Frame:
    __slots__ = (
        "context",
        "function",
        "code",
        "decoded",
        "ops",
        "index",
        "stack",
        "locals",
        "globals",
        "builtins",
        "names",
        "kw_names",
        "result",
        "last_exception",
        "last_exception_op",
    )

    # Declared for type checkers only: bare annotations create no class attributes, so
    # they do not clash with __slots__.
    context: Any
    function: Callable[..., Any]  # a FunctionType; declared as Callable so mypy does not bind it
    code: CodeType
    decoded: DecodedCode
    ops: list[Op]
    index: int
    stack: list[Any]
    locals: list[Any]
    globals: dict[str, Any]
    builtins: dict[str, Any]
    names: Any
    kw_names: tuple[str, ...]
    result: Any
    last_exception: BaseException | None
    last_exception_op: Op | None

    def current_op(self) -> Any:
        return self.ops[self.index - 1] if self.index > 0 else None


def make_frame(context: Any, function: FunctionType, args: tuple, kwargs: dict) -> Frame:
    """Bind arguments into a new frame; closure cells from outside the run get a source."""
    code = function.__code__
    decoded = decode(code)
    frame = Frame()
    frame.context = context
    frame.function = function
    frame.code = code
    frame.decoded = decoded
    frame.ops = decoded.ops
    frame.index = 0
    frame.stack = []
    frame.locals = bind_arguments(function, code, decoded.local_count, args, kwargs)
    frame.globals = function.__globals__
    builtins = function.__builtins__  # type: ignore[attr-defined]  # exists at runtime (3.10+)
    frame.builtins = builtins if isinstance(builtins, dict) else builtins.__dict__
    frame.names = None
    frame.kw_names = ()
    frame.result = None
    frame.last_exception = None
    frame.last_exception_op = None
    closure = function.__closure__
    if closure and id(function) not in context.created_functions:
        register = context.provenance.register_cell
        created_cells = context.created_cells
        for index, cell in enumerate(closure):
            if id(cell) not in created_cells:
                register(cell, ClosureSource(function, index))
    return frame
