"""Calls, function creation and 3.12 intrinsics."""

from __future__ import annotations

from types import FunctionType
from typing import Any

from thunder.interpreter.vm.calls import call
from thunder.interpreter.vm.dispatch import NULL, handles
from thunder.interpreter.vm.errors import unsupported
from thunder.interpreter.vm.operators import unary_operation


@handles("KW_NAMES")
def kw_names(frame: Any, op: Any) -> None:
    frame.kw_names = frame.code.co_consts[op.arg]  # dis leaves argval unresolved on 3.11


@handles("CALL")
def call_op(frame: Any, op: Any) -> None:
    stack = frame.stack
    count = op.arg
    start = len(stack) - count - 2
    head = stack[start]
    if head is NULL:
        fn = stack[start + 1]
        args = stack[start + 2 :]
    else:  # a method load or with-exit: callable, then self as first argument
        fn = head
        args = stack[start + 1 :]
    del stack[start:]
    names = frame.kw_names
    if names:
        frame.kw_names = ()
        split = len(args) - len(names)
        kwargs = dict(zip(names, args[split:]))
        args = args[:split]
    else:
        kwargs = {}
    stack.append(call(frame.context, fn, tuple(args), kwargs))


@handles("CALL_FUNCTION_EX")
def call_function_ex(frame: Any, op: Any) -> None:
    stack = frame.stack
    kwargs = stack.pop() if op.arg & 1 else {}
    args = stack.pop()
    fn = stack.pop()
    head = stack.pop()
    if head is not NULL:  # not produced by current compilers, but keep CPython's shape
        args = (fn, *args)
        fn = head
    if type(args) is not tuple:
        args = tuple(args)
    if type(kwargs) is not dict:
        kwargs = dict(kwargs)
    stack.append(call(frame.context, fn, args, kwargs))


@handles("MAKE_FUNCTION")
def make_function(frame: Any, op: Any) -> None:
    stack = frame.stack
    code = stack.pop()
    flags = op.arg
    closure = stack.pop() if flags & 0x08 else None
    annotations = stack.pop() if flags & 0x04 else None
    keyword_defaults = stack.pop() if flags & 0x02 else None
    defaults = stack.pop() if flags & 0x01 else None
    function = FunctionType(code, frame.globals, code.co_name, defaults, closure)
    function.__qualname__ = code.co_qualname
    if keyword_defaults is not None:
        function.__kwdefaults__ = keyword_defaults
    if annotations is not None:
        if isinstance(annotations, tuple):
            annotations = dict(zip(annotations[::2], annotations[1::2]))
        function.__annotations__ = annotations
    frame.context.created_functions[id(function)] = function
    stack.append(function)


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


@handles("CALL_INTRINSIC_1", only=(3, 12))
def call_intrinsic_1(frame: Any, op: Any) -> None:
    intrinsic = _INTRINSICS_1.get(op.arg)
    if intrinsic is None:
        raise unsupported(frame, op, _INTRINSIC_NAMES.get(op.arg, op.argrepr))
    frame.stack[-1] = intrinsic(frame, frame.stack[-1])


@handles("CALL_INTRINSIC_2", only=(3, 12))
def call_intrinsic_2(frame: Any, op: Any) -> None:
    construct = "except*" if op.arg == 1 else "PEP 695 type parameters"
    raise unsupported(frame, op, construct)
