"""Operators with Python semantics; user-written dunders are interpreted, the rest is native.

Native ``operator`` calls cover builtin types and thunder's proxies (whose dunders live in
``thunder.*``). Only when a user class defines the dunder in Python does the VM spell out the
binary-operator protocol (reflected operands, subclass priority, NotImplemented).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import FunctionType
from typing import Any

from thunder.interpreter.vm.calls import MISSING, call, lookup_type

__all__ = ["binary_operation", "compare", "unary_operation", "truth", "has_user_dunder", "call_dunder"]

_BINARY_SPECS = [
    (operator.add, operator.iadd, "add", "+"),
    (operator.and_, operator.iand, "and", "&"),
    (operator.floordiv, operator.ifloordiv, "floordiv", "//"),
    (operator.lshift, operator.ilshift, "lshift", "<<"),
    (operator.matmul, operator.imatmul, "matmul", "@"),
    (operator.mul, operator.imul, "mul", "*"),
    (operator.mod, operator.imod, "mod", "%"),
    (operator.or_, operator.ior, "or", "|"),
    (operator.pow, operator.ipow, "pow", "**"),
    (operator.rshift, operator.irshift, "rshift", ">>"),
    (operator.sub, operator.isub, "sub", "-"),
    (operator.truediv, operator.itruediv, "truediv", "/"),
    (operator.xor, operator.ixor, "xor", "^"),
]
# BINARY_OP's oparg indexes this: 0-12 binary, 13-25 in-place, each with its dunder names.
_BINARY = [
    (native, inplace, f"__{name}__", f"__r{name}__", f"__i{name}__", symbol)
    for native, inplace, name, symbol in _BINARY_SPECS
]
_COMPARISONS = {
    "<": (operator.lt, "__lt__", "__gt__"),
    "<=": (operator.le, "__le__", "__ge__"),
    "==": (operator.eq, "__eq__", "__eq__"),
    "!=": (operator.ne, "__ne__", "__ne__"),
    ">": (operator.gt, "__gt__", "__lt__"),
    ">=": (operator.ge, "__ge__", "__le__"),
}
_NATIVE_TYPES = frozenset(
    {int, float, bool, str, bytes, list, tuple, dict, set, frozenset, type(None), complex, slice, range}
)


def has_user_dunder(context: Any, cls: type, name: str) -> bool:
    if cls in _NATIVE_TYPES:
        return False
    key = (cls, name)
    cache = context.type_cache
    found = cache.get(key)
    if found is None:
        method = lookup_type(cls, name)
        module = getattr(method, "__module__", None) or ""
        found = type(method) is FunctionType and not module.startswith("thunder.")
        cache[key] = found
    return found


def call_dunder(context: Any, method: Any, obj: Any, *args: Any) -> Any:
    if type(method) is FunctionType:
        return call(context, method, (obj, *args), {})
    return method.__get__(obj, type(obj))(*args)


def binary_operation(context: Any, index: int, left: Any, right: Any) -> Any:
    inplace = index >= 13
    native, native_inplace, name, reflected, inplace_name, symbol = _BINARY[index - 13 if inplace else index]
    left_type, right_type = type(left), type(right)
    if left_type in _NATIVE_TYPES and right_type in _NATIVE_TYPES:
        return native_inplace(left, right) if inplace else native(left, right)
    user_inplace = inplace and has_user_dunder(context, left_type, inplace_name)
    if not (
        user_inplace
        or has_user_dunder(context, left_type, name)
        or has_user_dunder(context, right_type, reflected)
    ):
        return native_inplace(left, right) if inplace else native(left, right)
    if inplace:
        method = lookup_type(left_type, inplace_name)
        if method is not MISSING and method is not None:
            result = call_dunder(context, method, left, right)
            if result is not NotImplemented:
                return result
        symbol += "="
    return _dispatch_binary(context, left, right, name, reflected, symbol)


def _dispatch_binary(context: Any, left: Any, right: Any, name: str, reflected: str, symbol: str) -> Any:
    left_type, right_type = type(left), type(right)
    left_method = lookup_type(left_type, name)
    right_method = lookup_type(right_type, reflected) if right_type is not left_type else MISSING
    attempts = [(left_method, left, right), (right_method, right, left)]
    if (
        right_method is not MISSING
        and issubclass(right_type, left_type)
        and right_method is not lookup_type(left_type, reflected)
    ):
        attempts.reverse()
    for method, obj, other in attempts:
        if method is MISSING or method is None:
            continue
        result = call_dunder(context, method, obj, other)
        if result is not NotImplemented:
            return result
    raise TypeError(
        f"unsupported operand type(s) for {symbol}: '{left_type.__name__}' and '{right_type.__name__}'"
    )


def compare(context: Any, symbol: str, left: Any, right: Any) -> Any:
    native, name, reflected = _COMPARISONS[symbol]
    if not (has_user_dunder(context, type(left), name) or has_user_dunder(context, type(right), reflected)):
        if symbol == "==" or symbol == "!=":  # without __eq__, objects are equal by identity
            context.hooks.on_identity_test(left, right)
        return native(left, right)
    left_type, right_type = type(left), type(right)
    attempts = [
        (lookup_type(left_type, name), left, right),
        (lookup_type(right_type, reflected), right, left),
    ]
    if right_type is not left_type and issubclass(right_type, left_type) and attempts[1][0] is not MISSING:
        attempts.reverse()
    for method, obj, other in attempts:
        if method is MISSING or method is None:
            continue
        result = call_dunder(context, method, obj, other)
        if result is not NotImplemented:
            return result
    if symbol == "==" or symbol == "!=":
        context.hooks.on_identity_test(left, right)
        return (left is right) == (symbol == "==")
    raise TypeError(
        f"'{symbol}' not supported between instances of '{left_type.__name__}' and '{right_type.__name__}'"
    )


_UNARY: dict[str, Callable[[Any], Any]] = {
    "__neg__": operator.neg,
    "__pos__": operator.pos,
    "__invert__": operator.invert,
}


def unary_operation(context: Any, name: str, value: Any) -> Any:
    if has_user_dunder(context, type(value), name):
        return call(context, lookup_type(type(value), name), (value,), {})
    return _UNARY[name](value)


def truth(context: Any, value: Any) -> bool:
    if value is True or value is False or value is None:
        return value is True
    cls = type(value)
    if has_user_dunder(context, cls, "__bool__"):
        result = call(context, lookup_type(cls, "__bool__"), (value,), {})
        if type(result) is not bool:
            raise TypeError(f"__bool__ should return bool, returned {type(result).__name__}")
        return result
    if lookup_type(cls, "__bool__") is MISSING and has_user_dunder(context, cls, "__len__"):
        return call(context, lookup_type(cls, "__len__"), (value,), {}) != 0
    return bool(value)
