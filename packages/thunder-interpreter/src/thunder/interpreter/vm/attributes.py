"""Attribute loads with provenance, interpreting user-written properties and ``__getattr__``.

Properties and ``__getattr__`` defined by torch or thunder run natively: their results are
then reported with an AttributeSource (``args[0].fc1.weight``), except a module's submodules,
parameters and buffers found by ``nn.Module.__getattr__``, which are reported as their entry in
the module's table (``args[0]._modules['fc1']._parameters['weight']``): the prologue fetches them
on every call, and the table skips a Python-level ``__getattr__`` call per fetch.
"""

from __future__ import annotations

from types import BuiltinMethodType, FunctionType, MethodType, ModuleType
from typing import Any

from thunder.core.sources import AttributeSource, HasAttributeSource, ModuleEntrySource, Source
from thunder.interpreter.vm.calls import MISSING, call, is_torch_module, lookup_type, symbolic_number_type
from thunder.interpreter.vm.dispatch import NULL

__all__ = ["load_attribute", "load_method", "has_attribute", "is_user_function"]

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
    if name == "__class__" and symbolic_number_type(obj) is not None:
        return symbolic_number_type(obj)  # ``n.__class__ is int``, as ``type(n)`` answers (the frontend)
    try:
        value, interpreted = _get_attribute(context, obj, name)
    except AttributeError:
        _note_missing(context, obj, name)
        raise
    if not interpreted and not _written_by_program(context, obj, name):
        base = context.provenance.source_of(obj)
        if base is not None:
            value = context.load(value, _attribute_source(obj, base, name))
    return value


def has_attribute(context: Any, obj: Any, name: str) -> bool:
    """``hasattr``: its answer, not the attribute's value, is what the trace depends on."""
    try:
        _get_attribute(context, obj, name)
    except AttributeError:
        _note_missing(context, obj, name)
        return False
    base = context.provenance.source_of(obj)
    if base is not None and type(obj) is not ModuleType and not _written_by_program(context, obj, name):
        context.load(True, HasAttributeSource(base, name))
    return True


def _note_missing(context: Any, obj: Any, name: str) -> None:
    """A missing attribute is a fact the trace depends on (``getattr(obj, name, default)``, ``hasattr``)."""
    if type(obj) is ModuleType:
        return
    base = context.provenance.source_of(obj)
    if base is not None and not _written_by_program(context, obj, name):
        context.load(False, HasAttributeSource(base, name))


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
            value = context.load(value, _attribute_source(obj, base, name))
    return NULL, value


_MODULE_TABLES = ("_parameters", "_buffers", "_modules")  # the order nn.Module.__getattr__ looks


def _attribute_source(obj: Any, base: Source, name: str) -> Source:
    """``obj.name``'s source: its module-table entry when ``nn.Module.__getattr__`` is what finds it
    (nothing on the class or in the instance's ``__dict__`` has the name), else the attribute. A
    later call that no longer finds the entry fails the prologue's fetch (a retrace)."""
    if is_torch_module(obj) and not _in_instance_dict(obj, name):
        if lookup_type(type(obj), name) is MISSING:
            for table in _MODULE_TABLES:
                if name in obj.__dict__.get(table, ()):
                    return ModuleEntrySource(base, table, name)
    return AttributeSource(base, name)


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
