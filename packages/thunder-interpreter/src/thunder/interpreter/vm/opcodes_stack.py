"""Stack shuffling, constants and no-ops."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import NULL, RETURN, handles


@handles("NOP", "RESUME", "EXTENDED_ARG", "CACHE", "PRECALL")
def nop(frame: Any, op: Any) -> None:
    # PRECALL (3.11) only unpacks bound methods as an optimisation; CALL handles both shapes.
    return None


@handles("POP_TOP")
def pop_top(frame: Any, op: Any) -> None:
    frame.stack.pop()


@handles("PUSH_NULL")
def push_null(frame: Any, op: Any) -> None:
    frame.stack.append(NULL)


@handles("COPY")
def copy(frame: Any, op: Any) -> None:
    frame.stack.append(frame.stack[-op.arg])


@handles("SWAP")
def swap(frame: Any, op: Any) -> None:
    stack = frame.stack
    stack[-1], stack[-op.arg] = stack[-op.arg], stack[-1]


@handles("LOAD_CONST")
def load_const(frame: Any, op: Any) -> None:
    frame.stack.append(op.argval)


@handles("RETURN_VALUE")
def return_value(frame: Any, op: Any) -> Any:
    frame.result = frame.stack.pop()
    return RETURN


@handles("RETURN_CONST", only=(3, 12))
def return_const(frame: Any, op: Any) -> Any:
    frame.result = op.argval
    return RETURN


@handles("END_FOR", only=(3, 12))
def end_for(frame: Any, op: Any) -> None:
    del frame.stack[-2:]
