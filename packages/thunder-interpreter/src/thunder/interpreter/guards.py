"""The guard model: how the prologue checks each kind of Python value a trace depended on.

Every value the interpreter reads from outside the call (an argument, a global, a closure cell,
an attribute or item of one of those) passes through ``ValueGuards.load`` with its source. The
table below decides, by the value's kind, what the prologue checks on later calls; a reader can
audit here, and only here, which kinds are guarded and how. Read top to bottom, first match wins:

======================================  ==============================================================
kind                                    check on later calls
======================================  ==============================================================
tensor                                  a computation input: shape, dtype, device, requires_grad
read from a tensor (``x.shape[0]``)     nothing more: the tensor's check covers its metadata
int, float (``cache="symbolic values"``)  a computation input: its type only, its value once specialized
int that changed between compiles      a symbolic size (``torch.SymInt``): its type, ``>= 2``, and what
                                        the program decided on it (core/symbolic_shapes.py); 0, 1 and
                                        negative ints, and ints never seen to change, go on below
enum member, ``object()`` sentinel      identity
bool, int, float, complex, str, bytes,  type and value (``True`` is not ``1``, ``1`` is not ``1.0``)
None, Ellipsis, dtype, device, layout,
memory format, ``torch.Size``, range,
slice of those, set and frozenset (a set compared with a copy)
tuple, list                             length, then each item by its own kind
named tuple, other tuple/list subclass  type (identity), length, then each item
``collections.deque``                   type, ``maxlen`` and length, then each item by its own kind
``bytearray``, ``array.array``          type and value, compared with a copy (``typecode`` too); changing
                                        one in place inside the program is refused (vm/calls.py)
dict and its subclasses                 keys in order (by value, or by identity for keys of other
                                        kinds), then each value by its own kind
``functools.partial``                   type, then ``func``, ``args`` and ``keywords`` by kind
bound method                            ``__func__`` by identity, ``__self__`` by kind
bound C method, method-wrapper          type and ``__name__``, ``__self__`` by kind (a new object on
(``f.__get__``, ``d.get``)              every read: identity would never hold)
function, class, Python module,         identity (a function read from a Python module, such as
``nn.Module``, builtin function, code   ``torch.nn.functional.relu``, is taken as it is); what is read
object                                  from a code object (``co_varnames``) needs no check: it is immutable
iterator, generator, numpy array        refused: an error names the value and where it was read
other objects of a Python class         type (identity); every attribute the program reads is
(dataclasses included)                  guarded by its own kind, an attribute found missing by its
                                        absence; an ``is``/``==`` test on the object adds identity
other objects of a C type               identity
======================================  ==============================================================

Globals and closure cells are not a kind: they are sources, and the value read from one is checked
by the table like any other.
"""

from __future__ import annotations

import array
import collections
import copy
import enum
import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.prologue import PrologueBuilder
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_leaves
from thunder.core.sources import (
    AttributeSource,
    GlobalSource,
    ItemSource,
    LengthSource,
    ModuleEntrySource,
    Source,
    StoredItemSource,
    TypeSource,
)

__all__ = [
    "ValueGuards",
    "UnguardableValueError",
    "VALUE_TYPES",
    "IDENTITY_TYPES",
    "is_guarded_by_attributes",
]

# Compared by type and value (``check_value``): immutable, and equal values behave alike.
VALUE_TYPES = (
    bool, int, float, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format,
)  # fmt: skip
# Objects whose identity a trace depends on: rebinding one (a global function, a submodule) must retrace.
IDENTITY_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
    torch.nn.Module,
    enum.Enum,
)


# What is read from an immutable object checked by identity needs no check of its own, if immutable too.
# symbolic sizes (thunder.core.symbolic_shapes): what the program decides on one is a guard of the
# compile's ShapeEnv, checked by the prologue; the value itself is never checked here
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_IMMUTABLE_TYPES = frozenset({types.CodeType, tuple, str, bytes, int, float, bool, type(None), frozenset})


class UnguardableValueError(TypeError):
    """A value of a kind whose changes between calls the prologue cannot see."""


def _is_sentinel(value: Any) -> bool:
    return type(value) is object


def _is_constant_value(value: Any) -> bool:
    """A value ``check_value`` can compare on its own: of a value type, or made only of such values."""
    value_type = type(value)
    if isinstance(value, VALUE_TYPES) and not isinstance(value, enum.Enum):
        return True
    if value_type is torch.Size:
        return True
    if value_type is slice:
        return all(_is_constant_value(part) for part in (value.start, value.stop, value.step))
    if value_type is range:
        return True
    if value_type is bytearray or value_type is array.array:  # compared with a copy (add_value_guard)
        return True
    # sets compare their items by hash and equality, which is identity for functions, enums, modules
    return value_type is set or value_type is frozenset


def _is_bound_builtin(value: Any) -> bool:
    """A C method bound to an object (``f.__get__``, ``[].append``), not a module's builtin function."""
    if type(value) not in (types.MethodWrapperType, types.BuiltinMethodType):
        return False
    bound_to = getattr(value, "__self__", None)
    return bound_to is not None and not isinstance(bound_to, types.ModuleType)


def _is_refused(value: Any) -> bool:
    if isinstance(value, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        return True
    value_type = type(value)
    if value_type.__module__ == "numpy" and value_type.__name__ == "ndarray":
        return True
    # an iterator's position changes under the trace, which read it only once
    return hasattr(value_type, "__next__") and hasattr(value_type, "__iter__")


def _is_python_object(value: Any) -> bool:
    """An instance of a class written in Python, whose behaviour runs (interpreted) through its attributes."""
    return bool(type(value).__flags__ & (1 << 9)) and type(value).__module__ != "builtins"  # heap type


class ValueGuards:
    """Applies the table above while a call is traced, recording the checks in a ``PrologueBuilder``."""

    def __init__(
        self,
        builder: PrologueBuilder,
        load_tensor: Callable[[torch.Tensor, Source, str | None], Any],
        load_number: Callable[[Any, Source, str | None], Any] | None,
        location: Callable[[], str],
    ):
        self.builder = builder
        self.load_tensor = load_tensor
        self.load_number = load_number  # None unless cache="symbolic values"
        self.location = location
        self._containers: dict[int, tuple[Any, Any]] = {}
        self._python_modules: set[int] = set()  # ids of the sources of Python modules read
        # ids of the objects guarded by type and the attributes read (their first source is in ``_aliases``)
        self._attribute_guarded: set[int] = set()
        self._tensor_sources: set[str] = set()  # where tensors were read from (``args[0]``)
        self._frozen: set[int] = set()  # ids of sources of checked immutable values (code objects)
        # first source of each mutable object loaded: a second path to it gets an ``is`` check
        self._aliases: dict[int, tuple[Any, Source]] = {}
        # the VM's provenance, so that reads through a value loaded inside another are guarded too
        self.register: Callable[[Any, Source], None] = lambda value, source: None

    def load(self, value: Any, source: Source, name: str | None = None) -> Any:
        """The value the traced program sees instead of ``value``, with its checks recorded."""
        if isinstance(value, torch.Tensor):
            self._tensor_sources.add(source.describe())
            return self.load_tensor(value, source, name)
        if isinstance(value, Proxy):
            return value  # loaded before: already an input of the computation
        if isinstance(value, _SYMBOLIC):
            return value  # a symbolic size: decisions on it are guards of their own (symbolic_shapes.py)
        result = self._load(value, source, name)
        if type(value) not in _IMMUTABLE_TYPES:  # so that the program's reads through it are checked too
            self.register(result, source)
        return result

    def _load(self, value: Any, source: Source, name: str | None) -> Any:
        if self._aliases:
            first = self._aliases.get(id(value))
            if first is not None and first[0] is value:  # reached before through another path
                self.builder.add_alias_guard(source, first[1])
                known = self._memo(value)
                return known if known is not None else value
        if _is_aliasable(value):
            self._aliases[id(value)] = (value, source)
        if self._tensor_sources and _is_read_from_tensor(source, self._tensor_sources):
            return value  # ``x.shape[0]``, ``x.dtype``: metadata the tensor's check covers
        if (
            self._frozen
            and id(getattr(source, "base", None)) in self._frozen
            and type(value) in _IMMUTABLE_TYPES
        ):
            self._frozen.add(id(source))  # ``fn.__code__.co_varnames[0]``: fixed once the code object is
            return value
        if self.load_number is not None and type(value) in (int, float):
            return self.load_number(value, source, name)
        if type(value) is int:  # one that changed between compiles is a symbol (core/symbolic_shapes.py)
            symbolic = self.builder.add_symbolic_int(value, source)
            if symbolic is not None:
                return symbolic
        if isinstance(value, enum.Enum) or _is_sentinel(value):
            self.builder.add_identity_guard(value, source)
            return value
        if _is_constant_value(value):
            if type(value) is array.array:
                self.builder.add_value_guard(value.typecode, AttributeSource(source, "typecode"))
            self.builder.add_value_guard(value, source)
            return value
        if isinstance(value, (tuple, list)):  # no class is both a dict and a tuple or list
            return self._sequence(value, source)
        if type(value) is collections.deque:
            self.builder.add_value_guard(value.maxlen, AttributeSource(source, "maxlen"))
            return self._sequence(value, source)
        if isinstance(value, dict):
            return self._dict(value, source)
        value_type = type(value)
        if value_type is functools.partial:
            return self._partial(value, source)
        if value_type is types.MethodType:
            self._identity(value.__func__, AttributeSource(source, "__func__"))
            self.load(value.__self__, AttributeSource(source, "__self__"))
            return value
        if _is_bound_builtin(value):  # made anew on every read (``f.__get__``, ``d.get``): never by identity
            self.builder.add_identity_guard(value_type, TypeSource(source))
            self.builder.add_value_guard(value.__name__, AttributeSource(source, "__name__"))
            self.load(value.__self__, AttributeSource(source, "__self__"))
            return value
        if isinstance(value, IDENTITY_TYPES):
            self._identity(value, source)
            return value
        if _is_refused(value):
            raise UnguardableValueError(
                f"{source.describe()} is a {value_type.__module__}.{value_type.__qualname__}, whose changes "
                "between calls thunder cannot check; pass its contents instead (a list, a tensor)"
                + self._where()
            )
        if _is_python_object(value):
            self.builder.add_identity_guard(value_type, TypeSource(source))
            self._attribute_guarded.add(id(value))  # an aliasable value: ``_aliases`` now holds its source
            return value
        self._identity(value, source)
        return value

    def on_identity_test(self, left: Any, right: Any) -> None:
        """The program compared two values by identity (``is``, or ``==`` without ``__eq__``).

        An object guarded by its type and attributes is then checked by identity too, unless the
        other value is of another type (``obj is None``): the type check already decides that test.
        """
        if type(left) is not type(right) or not self._attribute_guarded:
            return
        for value in (left, right):
            # ``_aliases`` keeps the object alive, so an id found here cannot be another object's
            if id(value) in self._attribute_guarded:
                self.builder.add_identity_guard(value, self._aliases[id(value)][1])

    def _where(self) -> str:
        location = self.location()
        return "" if location.startswith("<") else f" (at {location})"

    def _memo(self, value: Any) -> Any:
        """A container loaded again, through any path, gives the same object back, so that the program's
        own changes to it are seen (a list appended to in one function and read in another)."""
        known = self._containers.get(id(value))
        return known[1] if known is not None and known[0] is value else None

    def _sequence(self, value: Any, source: Source) -> Any:
        # a tuple reached again (``()`` is one object everywhere) is checked again at this path; a list
        # reached again was given an identity check with its first path (``_load``)
        known = self._memo(value) if isinstance(value, (list, collections.deque)) else None
        if known is not None:
            return known
        self.builder.add_container_guard(value, source)
        item_source = _item_source(value)
        loaded = [self.load(item, item_source(source, i)) for i, item in enumerate(value)]
        result = value
        if any(new is not old for new, old in zip(loaded, value)):
            result = _rebuild_sequence(value, loaded)
        self._containers[id(value)] = (value, result)
        return result

    def _dict(self, value: dict, source: Source) -> Any:
        known = self._memo(value)
        if known is not None:
            return known
        if not value and _is_hook_table(source):
            self.builder.add_empty_guard(source)  # no hooks: one truth test, merged with its neighbours'
            self._containers[id(value)] = (value, value)
            return value
        self.builder.add_container_guard(value, source)
        item_source = _item_source(value)
        items = {key: self.load(item, item_source(source, key)) for key, item in dict.items(value)}
        result: Any = value
        if any(items[key] is not item for key, item in dict.items(value)):
            result = _rebuild_dict(value, items)
        self._containers[id(value)] = (value, result)
        return result

    def _partial(self, value: functools.partial, source: Source) -> Any:
        if any(isinstance(leaf, Proxy) for leaf in tree_leaves((value.args, value.keywords))):
            return value  # a tensor method bound to a proxy: made while tracing
        self.builder.add_identity_guard(functools.partial, TypeSource(source))
        func = self.load(value.func, AttributeSource(source, "func"))
        args = self.load(value.args, AttributeSource(source, "args"))
        keywords = self.load(value.keywords, AttributeSource(source, "keywords"))
        if func is value.func and args is value.args and keywords is value.keywords:
            return value
        return functools.partial(func, *args, **keywords)

    def _identity(self, value: Any, source: Source) -> None:
        """The trace depends on this very object (a function it called, a submodule it ran)."""
        if isinstance(value, types.BuiltinFunctionType) and not isinstance(
            getattr(value, "__self__", None), (types.ModuleType, type(None))
        ):
            return  # a bound builtin method (``items.append``) is a new object on every access
        if isinstance(value, types.ModuleType):
            self._python_modules.add(id(source))
        if _read_from_python_module(source, self._python_modules):
            return  # torch.nn.functional.relu: a Python module's functions are taken as they are
        self.builder.add_identity_guard(value, source)
        if type(value) is types.CodeType:
            self._frozen.add(id(source))


def is_guarded_by_attributes(value: Any) -> bool:
    """Whether the table checks ``value`` by its type and the attributes the program reads ("other objects
    of a Python class"), not by identity or value: a later call may pass another such object."""
    if isinstance(value, (torch.Tensor, Proxy, enum.Enum, tuple, list, dict, *IDENTITY_TYPES, *_SYMBOLIC)):
        return False
    if (
        _is_sentinel(value)
        or _is_constant_value(value)
        or type(value) in (functools.partial, types.MethodType)
    ):
        return False
    return not _is_refused(value) and _is_python_object(value)


def _is_aliasable(value: Any) -> bool:
    """A value two paths may share whose identity matters: mutable, or read through its attributes."""
    return isinstance(
        value, (list, dict, set, collections.deque, functools.partial, types.MethodType)
    ) or _is_python_object(value)


def _is_hook_table(source: Source) -> bool:
    """A module's hook table (``m._forward_hooks``), or torch's global one (``_global_forward_hooks`` of
    ``torch.nn.modules.module``): nn.Module always makes them dicts."""
    return (
        isinstance(source, (AttributeSource, ModuleEntrySource, GlobalSource))
        and source.name.startswith("_")
        and source.name.endswith("hooks")
    )


def _item_source(container: Any) -> Callable[[Source, Any], Source]:
    """How the prologue fetches an item: ``base[key]``, or past a subclass's own ``__getitem__``."""
    for base in (dict, list, tuple):
        if isinstance(container, base):
            if type(container).__getitem__ is base.__getitem__:
                return ItemSource
            return functools.partial(StoredItemSource, container=base)
    return ItemSource


def _read_from_python_module(source: Source, python_modules: set[int]) -> bool:
    return isinstance(source, AttributeSource) and id(source.base) in python_modules


def _rebuild_sequence(value: Any, loaded: list) -> Any:
    value_type = type(value)
    if hasattr(value_type, "_fields"):  # a named tuple
        return value_type(*loaded)
    if value_type is collections.deque:
        return collections.deque(loaded, maxlen=value.maxlen)
    return value_type(loaded)


def _rebuild_dict(value: dict, items: dict) -> Any:
    if type(value) is dict:
        return items
    try:  # a subclass keeps its type and attributes
        rebuilt = copy.copy(value)
        rebuilt.clear()
        rebuilt.update(items)
        return rebuilt
    except Exception:  # a subclass that forbids clear() (transformers' ModelOutput) is built anew
        return type(value)(items)


def _is_read_from_tensor(source: Source, tensor_sources: set[str]) -> bool:
    while isinstance(source, (AttributeSource, ModuleEntrySource, ItemSource, LengthSource)):
        source = source.base
        if source.describe() in tensor_sources:
            return True
    return False
