"""Attribute loads with provenance, interpreting user-written properties and ``__getattr__``.

Properties and ``__getattr__`` defined by torch or thunder run natively: their results are
then reported with an AttributeSource (``args[0].fc1.weight``) instead of a path through
torch internals (``args[0]._parameters['weight']``).
"""

from __future__ import annotations

from types import BuiltinMethodType, FunctionType, MethodType, ModuleType
from typing import Any

from thunder.core.sources import module_attribute_source
from thunder.interpreter.vm.calls import MISSING, call, lookup_type
from thunder.interpreter.vm.dispatch import NULL

__all__ = ["load_attribute", "load_method", "is_user_function"]

_LIBRARY_PREFIXES = ("thunder.", "torch.")


def is_user_function(value: Any) -> bool:
    """Python code that is not part of thunder or torch, which the VM should step through."""
    if type(value) is not FunctionType:
        return False
    module = value.__module__
    return module is None or not module.startswith(_LIBRARY_PREFIXES)


def _written_by_program(context: Any, obj: Any, name: str) -> bool:
    return context.written_attributes.get((id(obj), name)) is obj


def load_attribute(context: Any, obj: Any, name: str) -> Any:
    value, interpreted = _get_attribute(context, obj, name)
    if not interpreted and not _written_by_program(context, obj, name):
        base = context.provenance.source_of(obj)
        if base is not None:
            value = context.load(value, module_attribute_source(obj, base, name))
    return value


def _get_attribute(context: Any, obj: Any, name: str) -> tuple[Any, bool]:
    # Any, not type: ``cls.__getattribute__(obj, name)`` calls the unbound slot of ``cls``.
    cls: Any = type(obj)
    if cls is ModuleType:
        return getattr(obj, name), False
    descriptor = lookup_type(cls, name)
    if type(descriptor) is property and is_user_function(descriptor.fget):
        return call(context, descriptor.fget, (obj,), {}), True
    hook = lookup_type(cls, "__getattr__")
    if hook is MISSING or not is_user_function(hook):
        return getattr(obj, name), False
    try:
        return cls.__getattribute__(obj, name), False
    except AttributeError:
        return call(context, hook, (obj, name), {}), True


def load_method(context: Any, obj: Any, name: str) -> tuple[Any, Any]:
    """CPython's method-load: ``(function, self)`` for plain methods, else ``(NULL, attr)``.

    Bound methods are not values worth tracking, so they skip ``on_load``.
    """
    cls = type(obj)
    if cls is not ModuleType:
        descriptor = lookup_type(cls, name)
        if type(descriptor) is FunctionType and not _in_instance_dict(obj, name):
            return descriptor, obj
    value, interpreted = _get_attribute(context, obj, name)
    if not interpreted and not _is_bound_to(value, obj) and not _written_by_program(context, obj, name):
        base = context.provenance.source_of(obj)
        if base is not None:
            value = context.load(value, module_attribute_source(obj, base, name))
    return NULL, value


def _in_instance_dict(obj: Any, name: str) -> bool:
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return False
    return isinstance(namespace, dict) and name in namespace


def _is_bound_to(value: Any, obj: Any) -> bool:
    value_type = type(value)
    if value_type is MethodType:
        return True
    return value_type is BuiltinMethodType and getattr(value, "__self__", None) is obj
