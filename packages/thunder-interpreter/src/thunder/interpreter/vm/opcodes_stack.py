"""Stack shuffling, constants and no-ops."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import NULL, RETURN, handles


@handles("NOP", "RESUME", "EXTENDED_ARG", "CACHE", "PRECALL", "GEN_START")
def nop(frame: Any, op: Any) -> None:
    # PRECALL (3.11) only unpacks bound methods as an optimisation; CALL handles both shapes.
    # GEN_START (3.10) pops the None of a generator's first send, which the VM never pushes.
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


@handles("RETURN_CONST", since=(3, 12))
def return_const(frame: Any, op: Any) -> Any:
    frame.result = op.argval
    return RETURN


@handles("END_FOR", since=(3, 12), until=(3, 12))
def end_for(frame: Any, op: Any) -> None:
    del frame.stack[-2:]


@handles("END_FOR", since=(3, 13))
def end_for_313(frame: Any, op: Any) -> None:
    frame.stack.pop()  # 3.13 pops the iterator with the POP_TOP that follows


@handles("DUP_TOP", until=(3, 10))
def dup_top(frame: Any, op: Any) -> None:
    frame.stack.append(frame.stack[-1])


@handles("DUP_TOP_TWO", until=(3, 10))
def dup_top_two(frame: Any, op: Any) -> None:
    frame.stack.extend(frame.stack[-2:])


def _rotate(stack: list, count: int) -> None:
    """3.10's ROT_*: the top item moves down to position ``count``, the others up one."""
    stack.insert(len(stack) - count, stack.pop())


@handles("ROT_TWO", until=(3, 10))
def rot_two(frame: Any, op: Any) -> None:
    _rotate(frame.stack, 2)


@handles("ROT_THREE", until=(3, 10))
def rot_three(frame: Any, op: Any) -> None:
    _rotate(frame.stack, 3)


@handles("ROT_FOUR", until=(3, 10))
def rot_four(frame: Any, op: Any) -> None:
    _rotate(frame.stack, 4)


@handles("ROT_N", until=(3, 10))
def rot_n(frame: Any, op: Any) -> None:
    _rotate(frame.stack, op.arg)
