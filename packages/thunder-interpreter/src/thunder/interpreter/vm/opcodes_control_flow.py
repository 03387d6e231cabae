"""Jumps and for-loops."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import VERSION, handles
from thunder.interpreter.vm.iteration import get_iterator, next_value
from thunder.interpreter.vm.operators import truth

END_FOR_AFTER_LOOP = VERSION >= (3, 12)


# dis gives every jump's target as an offset whether the argument counts bytes (3.11+) or
# instructions (3.10) and whether it is relative or absolute; decoding turned that into an index.
@handles(
    "JUMP_FORWARD",
    "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT",
    "JUMP",
    "JUMP_NO_INTERRUPT",
    "JUMP_ABSOLUTE",
)
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


@handles("JUMP_IF_FALSE_OR_POP", until=(3, 11))
def jump_if_false_or_pop(frame: Any, op: Any) -> None:
    if truth(frame.context, frame.stack[-1]):
        frame.stack.pop()
    else:
        frame.index = op.target


@handles("JUMP_IF_TRUE_OR_POP", until=(3, 11))
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
        if END_FOR_AFTER_LOOP:
            # 3.12+ jumps past END_FOR (3.13: and the POP_TOP after it) after popping the
            # iterator; landing on END_FOR with a placeholder pushed is equivalent.
            stack.append(None)
        else:
            stack.pop()
        frame.index = op.target
