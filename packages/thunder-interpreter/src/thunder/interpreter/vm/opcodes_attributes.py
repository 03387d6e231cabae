"""Attribute access, super() and imports."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.attributes import load_attribute, load_method
from thunder.interpreter.vm.calls import call
from thunder.interpreter.vm.dispatch import NULL, NULL_AFTER_CALLABLE, handles


@handles("LOAD_ATTR", until=(3, 11))
def load_attr(frame: Any, op: Any) -> None:
    stack = frame.stack
    stack.append(load_attribute(frame.context, stack.pop(), op.argval))


@handles("LOAD_ATTR", since=(3, 12))
def load_attr_or_method(frame: Any, op: Any) -> None:
    """3.12+: the low bit asks for a method load (two stack slots for the CALL that follows)."""
    stack = frame.stack
    obj = stack.pop()
    if not op.arg & 1:
        stack.append(load_attribute(frame.context, obj, op.argval))
        return
    first, second = load_method(frame.context, obj, op.argval)
    if first is NULL and NULL_AFTER_CALLABLE:
        first, second = second, NULL
    stack.append(first)
    stack.append(second)


@handles("LOAD_METHOD", until=(3, 11))
def load_method_311(frame: Any, op: Any) -> None:
    stack = frame.stack
    stack.extend(load_method(frame.context, stack.pop(), op.argval))


@handles("STORE_ATTR")
def store_attr(frame: Any, op: Any) -> None:
    stack = frame.stack
    obj = stack.pop()
    value = stack.pop()
    context = frame.context
    # Only objects read from outside the call outlive it; those the program made itself hold anything.
    if context.provenance.source_of(obj) is None:
        setattr(obj, op.argval, value)
    elif not context.hooks.on_store_attr(obj, op.argval, value):
        setattr(obj, op.argval, value)
        context.written_attributes[(id(obj), op.argval)] = obj


@handles("DELETE_ATTR")
def delete_attr(frame: Any, op: Any) -> None:
    obj = frame.stack.pop()
    if frame.context.provenance.source_of(obj) is not None:  # an object that outlives the call
        frame.context.hooks.on_delete_attr(obj, op.argval)
    delattr(obj, op.argval)


@handles("LOAD_SUPER_ATTR", since=(3, 12))
def load_super_attr(frame: Any, op: Any) -> None:
    stack = frame.stack
    self_value = stack.pop()
    cls = stack.pop()
    global_super = stack.pop()
    if global_super is super:
        proxy = super(cls, self_value)
    else:
        arguments = (cls, self_value) if op.arg & 2 else ()
        proxy = call(frame.context, global_super, arguments, {})
    value = load_attribute(frame.context, proxy, op.argval)
    if not op.arg & 1:
        stack.append(value)
    elif NULL_AFTER_CALLABLE:
        stack.extend((value, NULL))
    else:
        stack.extend((NULL, value))


@handles("IMPORT_NAME")
def import_name(frame: Any, op: Any) -> None:
    stack = frame.stack
    fromlist = stack.pop()
    level = stack.pop()
    importer = frame.builtins["__import__"]
    stack.append(importer(op.argval, frame.globals, frame.names, fromlist, level))


@handles("IMPORT_FROM")
def import_from(frame: Any, op: Any) -> None:
    module = frame.stack[-1]
    name = op.argval
    try:
        value = getattr(module, name)
    except AttributeError:
        import sys

        full_name = f"{getattr(module, '__name__', '?')}.{name}"
        value = sys.modules.get(full_name)
        if value is None:
            raise ImportError(
                f"cannot import name '{name}' from '{getattr(module, '__name__', '?')}'", name=name
            ) from None
    frame.stack.append(value)


@handles("LOAD_BUILD_CLASS")
def load_build_class(frame: Any, op: Any) -> None:
    # Class bodies run natively inside __build_class__; their methods are interpreted when called.
    frame.stack.append(frame.builtins["__build_class__"])
