"""A VM frame: the fast locals, value stack and position of one interpreted call."""

from __future__ import annotations

from collections.abc import Callable
from types import CellType, CodeType, FunctionType
from typing import Any

from thunder.core.sources import ClosureSource
from thunder.interpreter.vm.binding import bind_arguments
from thunder.interpreter.vm.dispatch import PY310
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
        "blocks",
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
    blocks: list[tuple[str, int | None, int]]  # 3.10's block stack (opcodes_blocks.py); empty on 3.11+

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
    if PY310 and (code.co_cellvars or code.co_freevars):
        _make_cells_310(context, frame)
    frame.globals = function.__globals__
    builtins = function.__builtins__
    frame.builtins = builtins if isinstance(builtins, dict) else builtins.__dict__
    frame.names = None
    frame.kw_names = ()
    frame.result = None
    frame.last_exception = None
    frame.last_exception_op = None
    frame.blocks = []
    closure = function.__closure__
    if closure and id(function) not in context.created_functions:
        register = context.provenance.register_cell
        created_cells = context.created_cells
        for index, cell in enumerate(closure):
            if id(cell) not in created_cells:
                register(cell, ClosureSource(function, index))
    return frame


def _make_cells_310(context: Any, frame: Frame) -> None:
    """What 3.11's MAKE_CELL and COPY_FREE_VARS do, done at the call as 3.10 does: a cell per cell
    variable (holding the argument of that name, if any) after the fast locals, then the closure."""
    code = frame.code
    slots = frame.locals
    varnames = code.co_varnames
    first_cell = len(varnames)
    for index, name in enumerate(code.co_cellvars):
        cell = CellType(slots[varnames.index(name)]) if name in varnames else CellType()
        slots[first_cell + index] = cell
        context.created_cells[id(cell)] = cell  # made by this run: not closure state from before it
    free_offset = frame.decoded.free_offset
    slots[free_offset : free_offset + len(code.co_freevars)] = frame.function.__closure__ or ()
