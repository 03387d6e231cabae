"""The VM's own replacements for builtins that call back into user code.

Each entry runs user callables (keys, predicates, ``__iter__``, ``__getattr__``) through the
VM so that the compiler sees what they do; with only native callables they defer to the
builtin.
"""

from __future__ import annotations

import builtins
import functools
import sys
from collections.abc import Callable
from types import CellType, FunctionType
from typing import Any

from thunder.interpreter.vm.attributes import has_attribute, load_attribute
from thunder.interpreter.vm.calls import DEFER, call
from thunder.interpreter.vm.iteration import get_iterator, next_value
from thunder.interpreter.vm.operators import truth

__all__ = ["INTERNAL_LOOKASIDES"]

# Returning DEFER means "no user code involved": the builtin is then called as an opaque call.

INTERNAL_LOOKASIDES: dict[int, tuple[Any, Callable]] = {}
_NO_DEFAULT = object()


def _replaces(target: Any) -> Callable:
    def register(handler: Callable) -> Callable:
        INTERNAL_LOOKASIDES[id(target)] = (target, handler)
        return handler

    return register


def _interpretable(context: Any, fn: Any) -> bool:
    """User code to step through, or a callable the hooks replace (a torch op given to ``map``)."""
    if type(fn) is FunctionType or hasattr(fn, "__func__") or isinstance(fn, functools.partial):
        return True
    try:
        return context.hooks.lookaside(fn) is not None
    except TypeError:  # unhashable callables
        return False


def _text_of_size(convert: Callable[[Any], str]) -> Callable:
    def handler(context: Any, args: tuple, kwargs: dict) -> Any:
        from thunder.interpreter.vm.opcodes_containers import specialized_size, symbolic_types

        if kwargs or not args or not isinstance(args[0], symbolic_types()):
            return DEFER
        return convert(specialized_size(args[0]), *args[1:])

    return handler


# ``str``, ``repr`` and ``format`` of a symbolic size: its traced value, guarded (see specialized_size)
for _convert in (builtins.str, builtins.repr, builtins.format):
    _replaces(_convert)(_text_of_size(_convert))


@_replaces(builtins.super)
def _super(context: Any, args: tuple, kwargs: dict) -> Any:
    if args or kwargs or not context.frames:
        return DEFER
    frame = context.frames[-1]
    code = frame.code
    if "__class__" not in code.co_freevars:
        raise RuntimeError("super(): __class__ cell not found")
    cell = frame.locals[frame.decoded.free_offset + code.co_freevars.index("__class__")]
    if code.co_argcount == 0:
        raise RuntimeError("super(): no arguments")
    first = frame.locals[0]
    if type(first) is CellType and code.co_varnames[0] in code.co_cellvars:
        first = first.cell_contents
    return super(cell.cell_contents, first)


def _mapped(context: Any, fn: Any, iterables: tuple) -> Any:
    for items in zip(*iterables):
        yield call(context, fn, items, {})


@_replaces(builtins.map)
def _map(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or len(args) < 2 or not _interpretable(context, args[0]):
        return DEFER
    return _mapped(context, args[0], args[1:])


def _filtered(context: Any, fn: Any, iterable: Any) -> Any:
    for item in iterable:
        if truth(context, call(context, fn, (item,), {})):
            yield item


@_replaces(builtins.filter)
def _filter(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or len(args) != 2 or not _interpretable(context, args[0]):
        return DEFER
    return _filtered(context, args[0], args[1])


@_replaces(builtins.sorted)
def _sorted(context: Any, args: tuple, kwargs: dict) -> Any:
    key = kwargs.get("key")
    if key is None or not _interpretable(context, key) or len(args) != 1:
        return DEFER
    items = list(args[0])
    keys = [call(context, key, (item,), {}) for item in items]
    order = sorted(range(len(items)), key=keys.__getitem__, reverse=bool(kwargs.get("reverse", False)))
    return [items[index] for index in order]


def _extreme(native: Callable) -> Callable:
    def replacement(context: Any, args: tuple, kwargs: dict) -> Any:
        key = kwargs.get("key")
        if key is None or not _interpretable(context, key):
            return DEFER
        items = list(args[0]) if len(args) == 1 else list(args)
        if not items and "default" in kwargs:
            return kwargs["default"]
        if not items:
            raise ValueError(f"{native.__name__}() iterable argument is empty")
        keys = [call(context, key, (item,), {}) for item in items]
        return items[native(range(len(items)), key=keys.__getitem__)]

    return replacement


_replaces(builtins.min)(_extreme(min))
_replaces(builtins.max)(_extreme(max))


@_replaces(functools.reduce)
def _reduce(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or not _interpretable(context, args[0]):
        return DEFER
    fn, iterator = args[0], iter(args[1])
    if len(args) > 2:
        accumulated = args[2]
    else:
        try:
            accumulated = next(iterator)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    for item in iterator:
        accumulated = call(context, fn, (accumulated, item), {})
    return accumulated


@_replaces(builtins.iter)
def _iter(context: Any, args: tuple, kwargs: dict) -> Any:
    if len(args) != 1 or kwargs:
        return DEFER
    return get_iterator(context, args[0])


@_replaces(builtins.next)
def _next(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or not 1 <= len(args) <= 2:
        return DEFER
    try:
        return next_value(context, args[0])
    except StopIteration:
        if len(args) == 2:
            return args[1]
        raise


@_replaces(builtins.getattr)
def _getattr(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or not 2 <= len(args) <= 3 or type(args[1]) is not str:
        return DEFER
    try:
        return load_attribute(context, args[0], args[1])
    except AttributeError:
        if len(args) == 3:
            return args[2]
        raise


@_replaces(builtins.hasattr)
def _hasattr(context: Any, args: tuple, kwargs: dict) -> Any:
    if kwargs or len(args) != 2 or type(args[1]) is not str:
        return DEFER
    return has_attribute(context, args[0], args[1])


@_replaces(sys.exc_info)
def _exc_info(context: Any, args: tuple, kwargs: dict) -> Any:
    exc = context.handled_exception()
    return (None, None, None) if exc is None else (type(exc), exc, exc.__traceback__)


if hasattr(sys, "exception"):  # 3.11+

    @_replaces(sys.exception)
    def _exception(context: Any, args: tuple, kwargs: dict) -> Any:
        return context.handled_exception()
