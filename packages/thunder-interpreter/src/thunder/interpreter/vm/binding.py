"""Binding call arguments to fast-local slots the way CPython does.

Hand-rolled rather than inspect.Signature.bind because it runs on every interpreted call.
"""

from __future__ import annotations

import inspect
from types import CodeType, FunctionType
from typing import Any

from thunder.interpreter.vm.dispatch import NULL

__all__ = ["bind_arguments"]

_VARARGS = inspect.CO_VARARGS
_VARKEYWORDS = inspect.CO_VARKEYWORDS


def bind_arguments(
    function: FunctionType, code: CodeType, local_count: int, args: tuple, kwargs: dict
) -> list:
    positional_count = code.co_argcount
    keyword_only_count = code.co_kwonlyargcount
    slots: list[Any] = [NULL] * local_count
    given = len(args)
    bound = given if given < positional_count else positional_count
    slots[:bound] = args[:bound]
    next_slot = positional_count + keyword_only_count
    if code.co_flags & _VARARGS:
        slots[next_slot] = tuple(args[positional_count:])
        next_slot += 1
    elif given > positional_count:
        _too_many_positional(function, code, given)
    extra: dict[str, Any] | None = None
    if code.co_flags & _VARKEYWORDS:
        extra = {}
        slots[next_slot] = extra
    if kwargs:
        _bind_keywords(function, code, slots, kwargs, extra)
    if bound < positional_count or keyword_only_count:
        _apply_defaults(function, code, slots, bound)
    return slots


def _bind_keywords(
    function: FunctionType, code: CodeType, slots: list, kwargs: dict, extra: dict | None
) -> None:
    names = code.co_varnames
    first = code.co_posonlyargcount
    last = code.co_argcount + code.co_kwonlyargcount
    positional_only_misuse = []
    for name, value in kwargs.items():
        try:
            slot = names.index(name, first, last)
        except ValueError:
            if extra is not None:
                extra[name] = value
                continue
            if name in names[:first]:
                positional_only_misuse.append(name)
                continue
            raise TypeError(
                f"{function.__qualname__}() got an unexpected keyword argument '{name}'"
            ) from None
        if slots[slot] is not NULL:
            raise TypeError(f"{function.__qualname__}() got multiple values for argument '{name}'")
        slots[slot] = value
    if positional_only_misuse:
        raise TypeError(
            f"{function.__qualname__}() got some positional-only arguments passed as keyword "
            f"arguments: '{', '.join(positional_only_misuse)}'"
        )


def _apply_defaults(function: FunctionType, code: CodeType, slots: list, bound: int) -> None:
    names = code.co_varnames
    positional_count = code.co_argcount
    defaults = function.__defaults__ or ()
    first_default = positional_count - len(defaults)
    missing = []
    for slot in range(bound, positional_count):
        if slots[slot] is NULL:
            if slot >= first_default:
                slots[slot] = defaults[slot - first_default]
            else:
                missing.append(names[slot])
    if missing:
        _report_missing(function, missing, "positional")
    keyword_defaults = function.__kwdefaults__ or {}
    for slot in range(positional_count, positional_count + code.co_kwonlyargcount):
        if slots[slot] is NULL:
            name = names[slot]
            if name in keyword_defaults:
                slots[slot] = keyword_defaults[name]
            else:
                missing.append(name)
    if missing:
        _report_missing(function, missing, "keyword-only")


def _report_missing(function: FunctionType, missing: list, kind: str) -> None:
    quoted = [f"'{name}'" for name in missing]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" and {quoted[-1]}"
    plural = "argument" if len(missing) == 1 else "arguments"
    raise TypeError(f"{function.__qualname__}() missing {len(missing)} required {kind} {plural}: {listed}")


def _too_many_positional(function: FunctionType, code: CodeType, given: int) -> Any:
    expected = code.co_argcount
    plural = "argument" if expected == 1 else "arguments"
    was = "was" if given == 1 else "were"
    raise TypeError(f"{function.__qualname__}() takes {expected} positional {plural} but {given} {was} given")
