"""Decoding code objects once into lists of pre-resolved instructions.

Each ``Op`` carries its handler, jump target (as an index into the list) and exception
handler entry, so that the dispatch loop does no lookups per instruction. Decoded code is
cached per code object.
"""

from __future__ import annotations

import dis
from collections.abc import Callable
from types import CodeType
from typing import Any

from thunder.interpreter.vm.dispatch import HANDLERS, PY310

__all__ = ["Op", "DecodedCode", "decode"]

_JUMP_OPCODES = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


class Op:
    __slots__ = (
        "opname",
        "arg",
        "argval",
        "argrepr",
        "offset",
        "lineno",
        "target",
        "handler",
        "exception_entry",
        "index",
    )

    # Declared for type checkers only; bare annotations do not clash with __slots__.
    opname: str
    arg: int | None
    argval: Any
    argrepr: str
    offset: int
    lineno: int | None
    target: int | None
    handler: Callable[..., Any]
    exception_entry: tuple[int, int, bool] | None
    index: int

    def __repr__(self) -> str:
        return f"<Op {self.index} {self.opname} {self.argrepr}>"


class DecodedCode:
    __slots__ = ("code", "ops", "offset_to_index", "local_count", "free_offset")

    def __init__(self, code: CodeType, ops: list[Op], offset_to_index: dict[int, int]) -> None:
        self.code = code
        self.ops = ops
        self.offset_to_index = offset_to_index
        if PY310:  # every cell has its own slot, even an argument's (copied into it at the call)
            cell_slots = list(code.co_cellvars)
        else:  # 3.11+: an argument's cell replaces the argument in its slot
            cell_slots = [name for name in code.co_cellvars if name not in code.co_varnames]
        self.local_count = len(code.co_varnames) + len(cell_slots) + len(code.co_freevars)
        self.free_offset = self.local_count - len(code.co_freevars)


_CACHE: dict[CodeType, DecodedCode] = {}


def decode(code: CodeType) -> DecodedCode:
    decoded = _CACHE.get(code)
    if decoded is None:
        decoded = _decode(code)
        _CACHE[code] = decoded
    return decoded


def _decode(code: CodeType) -> DecodedCode:
    from thunder.interpreter.vm.opcodes_unsupported import fallback_handler

    ops: list[Op] = []
    offset_to_index: dict[int, int] = {}
    lineno: int | None = code.co_firstlineno
    for instruction in dis.get_instructions(code):
        op = Op()
        op.opname = instruction.opname
        op.arg = instruction.arg
        op.argval = instruction.argval
        op.argrepr = instruction.argrepr
        op.offset = instruction.offset
        lineno = _line_of(instruction, lineno)
        op.lineno = lineno
        op.handler = HANDLERS.get(op.opname) or fallback_handler(op.opname)
        op.target = instruction.argval if instruction.opcode in _JUMP_OPCODES else None
        op.index = len(ops)
        offset_to_index[op.offset] = op.index
        ops.append(op)
    if PY310:
        _index_cells_as_locals(code, ops)
    # 3.10 has no exception table: its SETUP_FINALLY blocks are kept at run time (opcodes_blocks.py).
    entries = [] if PY310 else _parse_exception_table(code.co_exceptiontable)
    for op in ops:
        if op.target is not None:
            op.target = offset_to_index[op.target]
        op.exception_entry = _entry_for(op.offset, entries, offset_to_index)
    return DecodedCode(code, ops, offset_to_index)


def _line_of(instruction: dis.Instruction, previous: int | None) -> int | None:
    """The source line of an instruction: the last line started at or before it."""
    positions = getattr(instruction, "positions", None)  # 3.11+
    if positions is not None:
        return positions.lineno if positions.lineno is not None else previous
    started = instruction.starts_line  # 3.10: the line number, on the first instruction of a line
    return started if started is not None else previous


_CELL_OPCODES = frozenset({"LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF"})


def _index_cells_as_locals(code: CodeType, ops: list[Op]) -> None:
    """3.10 numbers cells and free variables from the first cell; the handlers (written for
    3.11+) index them among the fast locals, which come first."""
    first_cell = len(code.co_varnames)
    for op in ops:
        if op.opname in _CELL_OPCODES and op.arg is not None:
            op.arg += first_cell


def _entry_for(offset: int, entries: list, offset_to_index: dict[int, int]) -> Any:
    for start, end, target, depth, lasti in entries:
        if start <= offset < end:
            return (offset_to_index[target], depth, lasti)
    return None


def _parse_varint(iterator: Any) -> int:
    byte = next(iterator)
    value = byte & 63
    while byte & 64:
        value <<= 6
        byte = next(iterator)
        value |= byte & 63
    return value


def _parse_exception_table(table: bytes) -> list[tuple[int, int, int, int, bool]]:
    """The 3.11+ zero-cost exception table: (start, end, target, depth, push_lasti)."""
    iterator = iter(table)
    entries = []
    try:
        while True:
            start = _parse_varint(iterator) * 2
            length = _parse_varint(iterator) * 2
            target = _parse_varint(iterator) * 2
            depth_and_lasti = _parse_varint(iterator)
            entries.append((start, start + length, target, depth_and_lasti >> 1, bool(depth_and_lasti & 1)))
    except StopIteration:
        return entries
