"""Binary, unary and comparison operators."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.calls import call, lookup_type
from thunder.interpreter.vm.dispatch import handles
from thunder.interpreter.vm.operators import (
    binary_operation,
    compare,
    has_user_dunder,
    truth,
    unary_operation,
)


@handles("BINARY_OP")
def binary_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    right = stack.pop()
    stack[-1] = binary_operation(frame.context, op.arg, stack[-1], right)


@handles("UNARY_NEGATIVE")
def unary_negative(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__neg__", frame.stack[-1])


@handles("UNARY_POSITIVE", only=(3, 11))
def unary_positive(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__pos__", frame.stack[-1])


@handles("UNARY_INVERT")
def unary_invert(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__invert__", frame.stack[-1])


@handles("UNARY_NOT")
def unary_not(frame: Any, op: Any) -> None:
    frame.stack[-1] = not truth(frame.context, frame.stack[-1])


@handles("COMPARE_OP")
def compare_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    right = stack.pop()
    stack[-1] = compare(frame.context, op.argval, stack[-1], right)


@handles("IS_OP")
def is_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    right = stack.pop()
    frame.context.hooks.on_identity_test(stack[-1], right)
    stack[-1] = (stack[-1] is right) != bool(op.arg)


@handles("CONTAINS_OP")
def contains_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    container = stack.pop()
    item = stack[-1]
    context = frame.context
    if has_user_dunder(context, type(container), "__contains__"):
        found = truth(
            context, call(context, lookup_type(type(container), "__contains__"), (container, item), {})
        )
    else:
        found = item in container
    stack[-1] = found != bool(op.arg)
