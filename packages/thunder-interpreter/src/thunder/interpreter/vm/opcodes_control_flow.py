"""Jumps and for-loops."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import PY312, handles
from thunder.interpreter.vm.iteration import get_iterator, next_value
from thunder.interpreter.vm.operators import truth


@handles("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT")
def jump(frame: Any, op: Any) -> None:
    frame.index = op.target


@handles(
    "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE",
)
def pop_jump_if_false(frame: Any, op: Any) -> None:
    if not truth(frame.context, frame.stack.pop()):
        frame.index = op.target


@handles("POP_JUMP_IF_TRUE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE")
def pop_jump_if_true(frame: Any, op: Any) -> None:
    if truth(frame.context, frame.stack.pop()):
        frame.index = op.target


@handles("POP_JUMP_IF_NONE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE")
def pop_jump_if_none(frame: Any, op: Any) -> None:
    if frame.stack.pop() is None:
        frame.index = op.target


@handles("POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")
def pop_jump_if_not_none(frame: Any, op: Any) -> None:
    if frame.stack.pop() is not None:
        frame.index = op.target


@handles("JUMP_IF_FALSE_OR_POP", only=(3, 11))
def jump_if_false_or_pop(frame: Any, op: Any) -> None:
    if truth(frame.context, frame.stack[-1]):
        frame.stack.pop()
    else:
        frame.index = op.target


@handles("JUMP_IF_TRUE_OR_POP", only=(3, 11))
def jump_if_true_or_pop(frame: Any, op: Any) -> None:
    if truth(frame.context, frame.stack[-1]):
        frame.index = op.target
    else:
        frame.stack.pop()


@handles("GET_ITER")
def get_iter(frame: Any, op: Any) -> None:
    frame.stack[-1] = get_iterator(frame.context, frame.stack[-1])


@handles("FOR_ITER")
def for_iter(frame: Any, op: Any) -> None:
    stack = frame.stack
    try:
        stack.append(next_value(frame.context, stack[-1]))
    except StopIteration:
        if PY312:
            # 3.12 jumps past END_FOR after popping the iterator; landing on END_FOR with a
            # placeholder pushed is equivalent.
            stack.append(None)
        else:
            stack.pop()
        frame.index = op.target
