"""Building, extending, unpacking and subscripting containers; string formatting."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from thunder.core.sources import ItemSource
from thunder.interpreter.vm.calls import (
    _MUTABLE_CONTAINERS,
    call,
    check_lookup_key,
    hashable,
    lookup_type,
    report_mutation,
)
from thunder.interpreter.vm.dispatch import NULL_AFTER_CALLABLE, handles
from thunder.interpreter.vm.iteration import iterate_all
from thunder.interpreter.vm.operators import has_user_dunder


def _pop_many(stack: list, count: int) -> list:
    if count == 0:
        return []
    items = stack[-count:]
    del stack[-count:]
    return items


@handles("BUILD_TUPLE")
def build_tuple(frame: Any, op: Any) -> None:
    frame.stack.append(tuple(_pop_many(frame.stack, op.arg)))


@handles("BUILD_LIST")
def build_list(frame: Any, op: Any) -> None:
    frame.stack.append(_pop_many(frame.stack, op.arg))


@handles("BUILD_SET")
def build_set(frame: Any, op: Any) -> None:
    frame.stack.append({hashable(item) for item in _pop_many(frame.stack, op.arg)})


@handles("BUILD_MAP")
def build_map(frame: Any, op: Any) -> None:
    items = _pop_many(frame.stack, 2 * op.arg)
    frame.stack.append(dict(zip(map(hashable, items[::2]), items[1::2])))


@handles("BUILD_CONST_KEY_MAP")
def build_const_key_map(frame: Any, op: Any) -> None:
    keys = frame.stack.pop()
    frame.stack.append(dict(zip(keys, _pop_many(frame.stack, op.arg))))


@handles("BUILD_STRING")
def build_string(frame: Any, op: Any) -> None:
    frame.stack.append("".join(_pop_many(frame.stack, op.arg)))


@handles("BUILD_SLICE")
def build_slice(frame: Any, op: Any) -> None:
    frame.stack.append(slice(*_pop_many(frame.stack, op.arg)))


@handles("LIST_APPEND")
def list_append(frame: Any, op: Any) -> None:
    value = frame.stack.pop()
    frame.stack[-op.arg].append(value)


@handles("SET_ADD")
def set_add(frame: Any, op: Any) -> None:
    value = frame.stack.pop()
    frame.stack[-op.arg].add(hashable(value))


@handles("MAP_ADD")
def map_add(frame: Any, op: Any) -> None:
    value = frame.stack.pop()
    key = frame.stack.pop()
    frame.stack[-op.arg][hashable(key)] = value


@handles("LIST_EXTEND")
def list_extend(frame: Any, op: Any) -> None:
    iterable = frame.stack.pop()
    try:
        items = iterate_all(frame.context, iterable)
    except TypeError:
        if not hasattr(type(iterable), "__iter__") and not hasattr(type(iterable), "__getitem__"):
            raise TypeError(f"Value after * must be an iterable, not {type(iterable).__name__}") from None
        raise
    frame.stack[-op.arg].extend(items)


@handles("SET_UPDATE")
def set_update(frame: Any, op: Any) -> None:
    iterable = frame.stack.pop()
    frame.stack[-op.arg].update(iterate_all(frame.context, iterable))


@handles("LIST_TO_TUPLE", until=(3, 11))
def list_to_tuple(frame: Any, op: Any) -> None:
    frame.stack[-1] = tuple(frame.stack[-1])


@handles("DICT_UPDATE")
def dict_update(frame: Any, op: Any) -> None:
    update = frame.stack.pop()
    if not hasattr(update, "keys"):
        raise TypeError(f"'{type(update).__name__}' object is not a mapping")
    frame.stack[-op.arg].update(update)


def _function_description(function: Any) -> str:
    """CPython's _PyObject_FunctionStr, used in ``f(**kwargs)`` error messages."""
    qualname = getattr(function, "__qualname__", None)
    if qualname is None:
        return type(function).__name__
    module = getattr(function, "__module__", None)
    return f"{module}.{qualname}" if module and module != "builtins" else qualname


@handles("DICT_MERGE")
def dict_merge(frame: Any, op: Any) -> None:
    update = frame.stack.pop()
    target = frame.stack[-op.arg]
    # the callable (for the error message) lies under the positional arguments, and on 3.13 a NULL
    function = frame.stack[-op.arg - (3 if NULL_AFTER_CALLABLE else 2)]
    name = _function_description(function)
    if not hasattr(update, "keys"):
        raise TypeError(f"{name}() argument after ** must be a mapping, not {type(update).__name__}")
    for key in update.keys():
        if key in target:
            raise TypeError(f"{name}() got multiple values for keyword argument '{key}'")
        target[key] = update[key]


@handles("UNPACK_SEQUENCE")
def unpack_sequence(frame: Any, op: Any) -> None:
    stack = frame.stack
    sequence = stack.pop()
    count = op.arg
    if (
        type(sequence) is tuple
        and len(sequence) == count
        and frame.context.provenance.source_of(sequence) is None
    ):
        stack.extend(reversed(sequence))
        return
    items = iterate_all(frame.context, sequence)
    if len(items) < count:
        raise ValueError(f"not enough values to unpack (expected {count}, got {len(items)})")
    if len(items) > count:
        raise ValueError(f"too many values to unpack (expected {count})")
    stack.extend(reversed(items))


@handles("UNPACK_EX")
def unpack_ex(frame: Any, op: Any) -> None:
    before, after = op.arg & 0xFF, op.arg >> 8
    items = iterate_all(frame.context, frame.stack.pop())
    if len(items) < before + after:
        raise ValueError(
            f"not enough values to unpack (expected at least {before + after}, got {len(items)})"
        )
    middle_end = len(items) - after
    result = items[:before] + [items[before:middle_end]] + items[middle_end:]
    frame.stack.extend(reversed(result))


def subscript(context: Any, container: Any, key: Any) -> Any:
    """``container[key]``, reporting ``base[key]`` for sourced containers and int/str keys."""
    cls = type(container)
    if has_user_dunder(context, cls, "__getitem__"):
        value = call(context, lookup_type(cls, "__getitem__"), (container, key), {})
    else:
        key = check_lookup_key(context, container, key, "[]")
        if isinstance(container, (list, tuple)):  # an index is a decision on the value: guarded, as a key is
            key = hashable(key)
        value = container[key]
    if type(key) is int or type(key) is str:
        base = context.provenance.source_of(container)
        if base is not None:
            value = context.load(value, ItemSource(base, key))
    return value


@handles("BINARY_SUBSCR")
def binary_subscr(frame: Any, op: Any) -> None:
    stack = frame.stack
    key = stack.pop()
    stack[-1] = subscript(frame.context, stack[-1], key)


@handles("STORE_SUBSCR")
def store_subscr(frame: Any, op: Any) -> None:
    stack = frame.stack
    key = stack.pop()
    container = stack.pop()
    value = stack.pop()
    context = frame.context
    if has_user_dunder(context, type(container), "__setitem__"):
        call(context, lookup_type(type(container), "__setitem__"), (container, key, value), {})
    else:
        key = check_lookup_key(context, container, key, "[]=")
        if isinstance(container, _MUTABLE_CONTAINERS):
            report_mutation(context, container, "[]=")
        container[key] = value


@handles("DELETE_SUBSCR")
def delete_subscr(frame: Any, op: Any) -> None:
    key = frame.stack.pop()
    container = frame.stack.pop()
    key = check_lookup_key(frame.context, container, key, "del []")
    if isinstance(container, _MUTABLE_CONTAINERS):
        report_mutation(frame.context, container, "del []")
    del container[key]


@handles("BINARY_SLICE", since=(3, 12))
def binary_slice(frame: Any, op: Any) -> None:
    stack = frame.stack
    end = stack.pop()
    start = stack.pop()
    stack[-1] = subscript(frame.context, stack[-1], slice(start, end))


@handles("STORE_SLICE", since=(3, 12))
def store_slice(frame: Any, op: Any) -> None:
    stack = frame.stack
    end = stack.pop()
    start = stack.pop()
    container = stack.pop()
    container[start:end] = stack.pop()


def specialized_size(value: Any) -> Any:
    """A symbolic size (``torch.SymInt`` & co., thunder.core.symbolic_shapes) turned into text is the
    value it was traced with, guarded: ``str`` of one would print its symbol (``s0``) unguarded, and
    code that branches on the text (a dict key, a comparison) would be baked into the trace."""
    symbolic = symbolic_types()
    if isinstance(value, symbolic):
        return {symbolic[0]: int, symbolic[1]: float, symbolic[2]: bool}[type(value)](value)
    return value


def symbolic_types() -> tuple:
    """torch's symbolic number types; none without torch (the VM runs and is tested without it)."""
    torch = sys.modules.get("torch")
    return (torch.SymInt, torch.SymFloat, torch.SymBool) if torch is not None else ()


def _conversion(convert: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda value: convert(specialized_size(value))


_CONVERSIONS = {0: None, 1: _conversion(str), 2: _conversion(repr), 3: _conversion(ascii)}


def _format(value: Any, spec: str) -> str:
    return value if type(value) is str and not spec else format(specialized_size(value), spec)


@handles("FORMAT_VALUE", until=(3, 12))
def format_value(frame: Any, op: Any) -> None:
    stack = frame.stack
    spec = stack.pop() if op.arg & 0x04 else ""
    value = stack.pop()
    conversion = _CONVERSIONS[op.arg & 0x03]
    if conversion is not None:
        value = conversion(value)
    stack.append(_format(value, spec))


# 3.13 splits FORMAT_VALUE into its conversion and its formatting with or without a spec.
@handles("CONVERT_VALUE", since=(3, 13))
def convert_value(frame: Any, op: Any) -> None:
    conversion = _CONVERSIONS[op.arg]
    assert conversion is not None, "CONVERT_VALUE always names a conversion"
    frame.stack[-1] = conversion(frame.stack[-1])


@handles("FORMAT_SIMPLE", since=(3, 13))
def format_simple(frame: Any, op: Any) -> None:
    frame.stack[-1] = _format(frame.stack[-1], "")


@handles("FORMAT_WITH_SPEC", since=(3, 13))
def format_with_spec(frame: Any, op: Any) -> None:
    spec = frame.stack.pop()
    frame.stack[-1] = _format(frame.stack[-1], spec)
