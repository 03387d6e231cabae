"""Calls, function creation and 3.12+ intrinsics, in each version's stack layout."""

from __future__ import annotations

from types import CellType, CodeType, FunctionType
from typing import Any

from thunder.interpreter.vm.calls import call
from thunder.interpreter.vm.dispatch import NULL, NULL_AFTER_CALLABLE, handles
from thunder.interpreter.vm.errors import unsupported
from thunder.interpreter.vm.operators import unary_operation


@handles("KW_NAMES", since=(3, 11), until=(3, 12))
def kw_names(frame: Any, op: Any) -> None:
    frame.kw_names = frame.code.co_consts[op.arg]  # dis leaves argval unresolved on 3.11


def _callable_and_args_null_first(stack: list, start: int) -> tuple[Any, list]:
    """3.11/3.12 (and 3.10's CALL_METHOD): ``NULL, callable, args`` or ``method, self, args``."""
    head = stack[start]
    if head is NULL:
        return stack[start + 1], stack[start + 2 :]
    return head, stack[start + 1 :]  # a method load or with-exit: callable, then self as first argument


def _callable_and_args_null_second(stack: list, start: int) -> tuple[Any, list]:
    """3.13: ``callable, NULL, args`` or ``method, self, args``."""
    if stack[start + 1] is NULL:
        return stack[start], stack[start + 2 :]
    return stack[start], stack[start + 1 :]


_callable_and_args = _callable_and_args_null_second if NULL_AFTER_CALLABLE else _callable_and_args_null_first


def _split_keywords(args: list, names: tuple) -> tuple[tuple, dict]:
    if not names:
        return tuple(args), {}
    split = len(args) - len(names)
    return tuple(args[:split]), dict(zip(names, args[split:]))


def _call_from_stack(frame: Any, count: int, names: tuple) -> None:
    """Pop a two-slot callable (see ``_callable_and_args``) and ``count`` arguments; push the result."""
    stack = frame.stack
    start = len(stack) - count - 2
    fn, arguments = _callable_and_args(stack, start)
    del stack[start:]
    args, kwargs = _split_keywords(arguments, names)
    stack.append(call(frame.context, fn, args, kwargs))


@handles("CALL", since=(3, 11))
def call_op(frame: Any, op: Any) -> None:
    names = frame.kw_names  # 3.11/3.12: set by the KW_NAMES before it; always () on 3.13
    if names:
        frame.kw_names = ()
    _call_from_stack(frame, op.arg, names)


@handles("CALL_KW", since=(3, 13))
def call_kw(frame: Any, op: Any) -> None:
    _call_from_stack(frame, op.arg, frame.stack.pop())


@handles("CALL_METHOD", until=(3, 10))
def call_method_310(frame: Any, op: Any) -> None:
    _call_from_stack(frame, op.arg, ())


def _call_one_slot(frame: Any, count: int, names: tuple) -> None:
    """3.10's CALL_FUNCTION(_KW): the callable, then ``count`` arguments."""
    stack = frame.stack
    start = len(stack) - count - 1
    fn = stack[start]
    arguments = stack[start + 1 :]
    del stack[start:]
    args, kwargs = _split_keywords(arguments, names)
    stack.append(call(frame.context, fn, args, kwargs))


@handles("CALL_FUNCTION", until=(3, 10))
def call_function_310(frame: Any, op: Any) -> None:
    _call_one_slot(frame, op.arg, ())


@handles("CALL_FUNCTION_KW", until=(3, 10))
def call_function_kw_310(frame: Any, op: Any) -> None:
    _call_one_slot(frame, op.arg, frame.stack.pop())


def _pop_star_arguments(frame: Any, op: Any) -> tuple[tuple, dict]:
    stack = frame.stack
    kwargs = stack.pop() if op.arg & 1 else {}
    args = stack.pop()
    if type(args) is not tuple:
        args = tuple(args)
    if type(kwargs) is not dict:
        kwargs = dict(kwargs)
    return args, kwargs


@handles("CALL_FUNCTION_EX", since=(3, 11), until=(3, 12))
def call_function_ex(frame: Any, op: Any) -> None:
    args, kwargs = _pop_star_arguments(frame, op)
    stack = frame.stack
    fn = stack.pop()
    head = stack.pop()
    if head is not NULL:  # not produced by current compilers, but keep CPython's shape
        args = (fn, *args)
        fn = head
    stack.append(call(frame.context, fn, args, kwargs))


@handles("CALL_FUNCTION_EX", since=(3, 13))
def call_function_ex_313(frame: Any, op: Any) -> None:
    args, kwargs = _pop_star_arguments(frame, op)
    stack = frame.stack
    stack.pop()  # the NULL slot after the callable
    fn = stack.pop()
    stack.append(call(frame.context, fn, args, kwargs))


@handles("CALL_FUNCTION_EX", until=(3, 10))
def call_function_ex_310(frame: Any, op: Any) -> None:
    args, kwargs = _pop_star_arguments(frame, op)
    fn = frame.stack.pop()
    frame.stack.append(call(frame.context, fn, args, kwargs))


def _new_function(
    frame: Any, code: CodeType, qualname: str, defaults: Any = None, closure: Any = None
) -> FunctionType:
    if closure is None and code.co_freevars:
        # 3.13 creates the function before SET_FUNCTION_ATTRIBUTE gives it its closure; a
        # function needs cells at creation, so it gets empty ones until then.
        closure = tuple(CellType() for _ in code.co_freevars)
    function = FunctionType(code, frame.globals, code.co_name, defaults, closure)
    function.__qualname__ = qualname
    frame.context.created_functions[id(function)] = function
    return function


_FUNCTION_CLOSURE = 0x08
_FUNCTION_ANNOTATIONS = 0x04
_FUNCTION_KEYWORD_DEFAULTS = 0x02
_FUNCTION_DEFAULTS = 0x01


def _set_function_attribute(frame: Any, function: FunctionType, flag: int, value: Any) -> FunctionType:
    if flag == _FUNCTION_CLOSURE:  # __closure__ is read-only: a new function with the same state
        replacement = _new_function(
            frame, function.__code__, function.__qualname__, function.__defaults__, value
        )
        replacement.__kwdefaults__ = function.__kwdefaults__
        replacement.__annotations__ = function.__annotations__
        del frame.context.created_functions[id(function)]
        return replacement
    if flag == _FUNCTION_ANNOTATIONS:
        if isinstance(value, tuple):
            value = dict(zip(value[::2], value[1::2]))
        function.__annotations__ = value
    elif flag == _FUNCTION_KEYWORD_DEFAULTS:
        function.__kwdefaults__ = value
    elif flag == _FUNCTION_DEFAULTS:
        function.__defaults__ = value
    return function


def _make_function(frame: Any, flags: int, code: CodeType, qualname: str) -> None:
    """MAKE_FUNCTION up to 3.12: the flagged attributes lie under the code object."""
    stack = frame.stack
    closure = stack.pop() if flags & _FUNCTION_CLOSURE else None
    function = _new_function(frame, code, qualname, closure=closure)
    for flag in (_FUNCTION_ANNOTATIONS, _FUNCTION_KEYWORD_DEFAULTS, _FUNCTION_DEFAULTS):
        if flags & flag:
            function = _set_function_attribute(frame, function, flag, stack.pop())
    stack.append(function)


@handles("MAKE_FUNCTION", since=(3, 11), until=(3, 12))
def make_function(frame: Any, op: Any) -> None:
    code = frame.stack.pop()
    _make_function(frame, op.arg, code, code.co_qualname)


@handles("MAKE_FUNCTION", until=(3, 10))
def make_function_310(frame: Any, op: Any) -> None:
    qualname = frame.stack.pop()  # 3.10 code objects have no co_qualname
    code = frame.stack.pop()
    _make_function(frame, op.arg, code, qualname)


@handles("MAKE_FUNCTION", since=(3, 13))
def make_function_313(frame: Any, op: Any) -> None:
    code = frame.stack.pop()
    frame.stack.append(_new_function(frame, code, code.co_qualname))


@handles("SET_FUNCTION_ATTRIBUTE", since=(3, 13))
def set_function_attribute(frame: Any, op: Any) -> None:
    stack = frame.stack
    function = stack.pop()
    value = stack.pop()
    stack.append(_set_function_attribute(frame, function, op.arg, value))


def _stopiteration_error(frame: Any, exc: Any) -> Any:
    if isinstance(exc, StopIteration):
        error = RuntimeError("generator raised StopIteration")
        error.__cause__ = exc
        error.__context__ = exc
        return error
    return exc


_INTRINSICS_1 = {
    3: _stopiteration_error,
    5: lambda frame, value: unary_operation(frame.context, "__pos__", value),
    6: lambda frame, value: tuple(value),
}
_INTRINSIC_NAMES = {
    1: "interactive print",
    2: "from module import *",
    4: "async generator",
    7: "PEP 695 type parameters",
    8: "PEP 695 type parameters",
    9: "PEP 695 type parameters",
    10: "PEP 695 generic subscript",
    11: "PEP 695 type alias",
}


@handles("CALL_INTRINSIC_1", since=(3, 12))
def call_intrinsic_1(frame: Any, op: Any) -> None:
    intrinsic = _INTRINSICS_1.get(op.arg)
    if intrinsic is None:
        raise unsupported(frame, op, _INTRINSIC_NAMES.get(op.arg, op.argrepr))
    frame.stack[-1] = intrinsic(frame, frame.stack[-1])


@handles("CALL_INTRINSIC_2", since=(3, 12))
def call_intrinsic_2(frame: Any, op: Any) -> None:
    construct = "except*" if op.arg == 1 else "PEP 695 type parameters"
    raise unsupported(frame, op, construct)
