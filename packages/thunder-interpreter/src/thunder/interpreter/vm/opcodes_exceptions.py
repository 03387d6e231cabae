"""Raising and handling exceptions, and with-statements (3.11+ exception-table model; 3.10's
block stack is in opcodes_blocks.py)."""

from __future__ import annotations

from types import FunctionType
from typing import Any

from thunder.interpreter.vm.calls import MISSING, call, lookup_type
from thunder.interpreter.vm.dispatch import handles


@handles("PUSH_EXC_INFO", since=(3, 11))
def push_exc_info(frame: Any, op: Any) -> None:
    stack = frame.stack
    value = stack.pop()
    slots = frame.context.exception_slots
    stack.append(slots[-1])
    slots[-1] = value
    stack.append(value)


@handles("POP_EXCEPT", since=(3, 11))
def pop_except(frame: Any, op: Any) -> None:
    frame.context.exception_slots[-1] = frame.stack.pop()


@handles("CHECK_EXC_MATCH", since=(3, 11))
def check_exc_match(frame: Any, op: Any) -> None:
    stack = frame.stack
    expected = stack.pop()
    check_catchable(expected)
    stack.append(isinstance(stack[-1], expected))


def check_catchable(expected: Any) -> None:
    classes = expected if isinstance(expected, tuple) else (expected,)
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise TypeError("catching classes that do not inherit from BaseException is not allowed")


@handles("RERAISE", since=(3, 11))
def reraise(frame: Any, op: Any) -> None:
    exc = frame.stack.pop()
    frame.context.reraising = exc
    raise exc


@handles("LOAD_ASSERTION_ERROR")
def load_assertion_error(frame: Any, op: Any) -> None:
    frame.stack.append(AssertionError)


@handles("RAISE_VARARGS")
def raise_varargs(frame: Any, op: Any) -> None:
    stack = frame.stack
    context = frame.context
    if op.arg == 0:
        exc = context.handled_exception()
        if exc is None:
            raise RuntimeError("No active exception to reraise")
        context.reraising = exc
        raise exc
    cause = stack.pop() if op.arg == 2 else MISSING
    exc = _instantiate(context, stack.pop(), "exceptions must derive from BaseException")
    if cause is not MISSING:
        if cause is not None:
            cause = _instantiate(context, cause, "exception causes must derive from BaseException")
        exc.__cause__ = cause
        exc.__suppress_context__ = True
    raise exc


def _instantiate(context: Any, value: Any, message: str) -> BaseException:
    if isinstance(value, type) and issubclass(value, BaseException):
        value = call(context, value, (), {})
        if not isinstance(value, BaseException):
            raise TypeError(f"calling {value!r} should have returned an instance of BaseException")
    if not isinstance(value, BaseException):
        raise TypeError(message)
    return value


def bind_special(context: Any, manager: Any, name: str) -> Any:
    method = lookup_type(type(manager), name)
    if method is MISSING:
        return MISSING
    if type(method) is FunctionType:
        return method.__get__(manager, type(manager))
    getter = getattr(type(method), "__get__", None)
    return getter(method, manager, type(manager)) if getter is not None else method


@handles("BEFORE_WITH", since=(3, 11))
def before_with(frame: Any, op: Any) -> None:
    stack = frame.stack
    manager = stack.pop()
    enter = bind_special(frame.context, manager, "__enter__")
    exit_method = bind_special(frame.context, manager, "__exit__")
    if enter is MISSING or exit_method is MISSING:
        hint = " (missed __exit__ method)" if enter is not MISSING else ""
        raise TypeError(
            f"'{type(manager).__name__}' object does not support the context manager protocol{hint}"
        )
    stack.append(exit_method)
    stack.append(call(frame.context, enter, (), {}))


@handles("WITH_EXCEPT_START", since=(3, 11))
def with_except_start(frame: Any, op: Any) -> None:
    stack = frame.stack
    exc = stack[-1]
    exit_method = stack[-4]
    stack.append(call(frame.context, exit_method, (type(exc), exc, exc.__traceback__), {}))
