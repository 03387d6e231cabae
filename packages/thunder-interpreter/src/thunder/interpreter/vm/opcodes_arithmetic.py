"""Binary, unary and comparison operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder.interpreter.vm.calls import call, check_lookup_key, lookup_type
from thunder.interpreter.vm.dispatch import PY313, handles
from thunder.interpreter.vm.opcodes_containers import specialized_size, symbolic_types
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


# 3.10's one opcode per operator, in BINARY_OP's operand order (0-12; +13 for the in-place form).
_OPERATOR_NAMES_310 = (
    "ADD AND FLOOR_DIVIDE LSHIFT MATRIX_MULTIPLY MULTIPLY MODULO OR POWER RSHIFT SUBTRACT TRUE_DIVIDE XOR"
).split()


def _binary_handler_310(index: int) -> Callable[[Any, Any], None]:
    def handler(frame: Any, op: Any) -> None:
        stack = frame.stack
        right = stack.pop()
        stack[-1] = binary_operation(frame.context, index, stack[-1], right)

    return handler


for _index, _name in enumerate(_OPERATOR_NAMES_310):
    handles(f"BINARY_{_name}", until=(3, 10))(_binary_handler_310(_index))
    handles(f"INPLACE_{_name}", until=(3, 10))(_binary_handler_310(_index + 13))


@handles("UNARY_NEGATIVE")
def unary_negative(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__neg__", frame.stack[-1])


@handles("UNARY_POSITIVE", until=(3, 11))
def unary_positive(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__pos__", frame.stack[-1])


@handles("UNARY_INVERT")
def unary_invert(frame: Any, op: Any) -> None:
    frame.stack[-1] = unary_operation(frame.context, "__invert__", frame.stack[-1])


@handles("UNARY_NOT")
def unary_not(frame: Any, op: Any) -> None:
    frame.stack[-1] = not truth(frame.context, frame.stack[-1])


@handles("TO_BOOL", since=(3, 13))
def to_bool(frame: Any, op: Any) -> None:
    frame.stack[-1] = truth(frame.context, frame.stack[-1])


_COMPARE_TO_BOOL = 16  # 3.13: a comparison feeding a branch also converts its result to bool


@handles("COMPARE_OP")
def compare_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    right = stack.pop()
    result = compare(frame.context, op.argval, stack[-1], right)
    if PY313 and op.arg & _COMPARE_TO_BOOL:
        result = truth(frame.context, result)
    stack[-1] = result


@handles("IS_OP")
def is_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    right = stack.pop()
    frame.context.hooks.on_identity_test(stack[-1], right)
    left, right = _identity_operands(stack[-1], right)
    stack[-1] = (left is right) != bool(op.arg)


_NUMBER_TYPES = (int, float, bool)


def _identity_operands(left: Any, right: Any) -> tuple[Any, Any]:
    """A symbolic size is one object standing for many ints: compared by identity with a number, it is
    its value (specialized, so guarded), as eager's ints are (``n is 5`` holds for small ints). Against
    anything else (``n is None``) the answer is False either way and nothing is specialized."""
    symbolic = symbolic_types()
    if not symbolic or not (isinstance(left, symbolic) or isinstance(right, symbolic)):
        return left, right
    if all(isinstance(value, (*symbolic, *_NUMBER_TYPES)) for value in (left, right)):
        return specialized_size(left), specialized_size(right)
    return left, right


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
        item = check_lookup_key(context, container, item, "in")
        found = item in container
    stack[-1] = found != bool(op.arg)
