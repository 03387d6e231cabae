"""Objects the program creates and returns holding what it computed: built anew by the epilogue.

The computation returns containers it builds again on every call (tuples, lists, dicts, named tuples,
dict dataclasses such as transformers' ``ModelOutput``); any other object in its output is a constant
of the trace, the very object made while tracing. One the program created that holds a tensor or a
symbolic size it computed handed the caller the trace's proxies, the same object on every call
(found in an audit: ``model(ids).past_key_values``, a ``DynamicCache`` transformers creates when no
cache is passed, held ``TensorProxy`` keys; ``return Result(loss=...)`` with a plain dataclass gave
``Result(loss=<TensorProxy t0>)``). The epilogue now puts a copy of such an object in the output on
every call, with the values this call computed in its attributes (``side_effects._created_object``).
Objects that came in with the call are the caller's and are not concerned.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.proxies import Proxy

__all__ = ["attributes", "created_objects", "holds_traced", "is_plain_object", "replace_at"]

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_DEPTH = 8


def created_objects(output: Any, source_of: Callable[[Any], Any], location: str) -> list[tuple[tuple, Any]]:
    """Where in ``output`` (a key path) an object the program made sits (made anew per call, as eager
    makes it: the caller may change it). Raises NotImplementedError for one the epilogue cannot reach
    (under a dict key not a str or int)."""
    found: list[tuple[tuple, Any]] = []

    def visit(value: Any, path: tuple, depth: int) -> None:
        if depth == 0:
            return
        if isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                visit(item, (*path, index), depth - 1)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, (*path, key), depth - 1)
        elif is_plain_object(value) and source_of(value) is None:
            if any(type(key) not in (str, int) for key in path):
                raise NotImplementedError(
                    f"the jitted function returns a {type(value).__module__}.{type(value).__qualname__} object it "
                    "created, holding a tensor or size it computed, under a dict key thunder cannot write; return "
                    f"it under a str or int key{location}"
                )
            found.append((path, value))

    visit(output, (), _DEPTH)
    return found


def is_plain_object(value: Any) -> bool:
    """An instance of a Python class with a ``__dict__`` or ``__slots__`` (not a proxy, tensor, module,
    enum, class or callable)."""
    if isinstance(value, (Proxy, torch.Tensor, *_SYMBOLIC, type, torch.nn.Module, enum.Enum)) or callable(
        value
    ):
        return False
    return isinstance(getattr(value, "__dict__", None), dict) or bool(slot_names(type(value)))


def attributes(value: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` and the slots that are set."""
    found = dict(vars(value)) if isinstance(getattr(value, "__dict__", None), dict) else {}
    for name in slot_names(type(value)):
        if name not in found and hasattr(value, name):
            found[name] = getattr(value, name)
    return found


def slot_names(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                names.append(name)
    return tuple(names)


def holds_traced(value: Any, depth: int = _DEPTH) -> bool:
    """Whether ``value`` holds a proxy or a symbolic size, through containers and objects' attributes."""
    if isinstance(value, (Proxy, *_SYMBOLIC)):
        return True
    if depth == 0 or isinstance(value, (torch.Tensor, str, bytes, int, float, type)):
        return False
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(holds_traced(item, depth - 1) for item in value)
    if isinstance(value, dict):
        return any(holds_traced(item, depth - 1) for item in value.values())
    if is_plain_object(value):
        return any(holds_traced(item, depth - 1) for item in attributes(value).values())
    return False


def replace_at(output: Any, path: tuple, value: Any) -> Any:
    """``output`` with ``value`` at ``path``: lists and dicts written in place, tuples rebuilt."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(output, tuple):
        items = list(output)
        items[key] = replace_at(items[key], rest, value)
        return type(output)(*items) if hasattr(output, "_fields") else type(output)(items)
    output[key] = replace_at(output[key], rest, value)
    return output
