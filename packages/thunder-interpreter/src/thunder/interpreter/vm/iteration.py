"""Iteration through the VM: user ``__iter__``/``__next__`` are interpreted, and iterating a
container with a known source yields elements with ItemSources.
"""

from __future__ import annotations

import sys
from typing import Any

from thunder.core.sources import ItemSource, Source
from thunder.interpreter.vm.attributes import is_user_function
from thunder.interpreter.vm.calls import MISSING, call, lookup_type

__all__ = ["get_iterator", "next_value", "iterate_all", "SourcedIterator", "is_sourced_sequence"]

_PLAIN_ITERABLES = frozenset({list, tuple, dict, set, frozenset, str, range, bytes})


class SourcedIterator:
    """Iterates a list/tuple/ModuleList/Sequential by index, reporting ``base[i]`` loads."""

    __slots__ = ("_context", "_container", "_source", "_index")

    def __init__(self, context: Any, container: Any, source: Source) -> None:
        self._context = context
        self._container = container
        self._source = source
        self._index = 0

    def __iter__(self) -> SourcedIterator:
        return self

    def __next__(self) -> Any:
        index = self._index
        if index >= len(self._container):
            raise StopIteration
        self._index = index + 1
        return self._context.load(self._container[index], ItemSource(self._source, index))


def is_sourced_sequence(value: Any) -> bool:
    if type(value) in (list, tuple):
        return True
    container = sys.modules.get("torch.nn.modules.container")
    return container is not None and isinstance(value, (container.ModuleList, container.Sequential))


_ITEMS_VIEW: type = type({}.items())
_VALUES_VIEW: type = type({}.values())


def _iterate_dict_view(context: Any, view: Any, mapping: dict, source: Source) -> Any:
    for key, value in mapping.items():
        if type(key) is int or type(key) is str:
            value = context.load(value, ItemSource(source, key))
        yield (key, value) if type(view) is _ITEMS_VIEW else value


def get_iterator(context: Any, obj: Any) -> Any:
    cls = type(obj)
    if (cls is _ITEMS_VIEW or cls is _VALUES_VIEW) and context.dict_views:
        entry = context.dict_views.get(id(obj))
        if entry is not None and entry[0] is obj:
            return _iterate_dict_view(context, obj, entry[1], entry[2])
    if cls in _PLAIN_ITERABLES and cls not in (list, tuple):
        return iter(obj)
    source = context.provenance.source_of(obj)
    if source is not None and is_sourced_sequence(obj):
        return SourcedIterator(context, obj, source)
    method = lookup_type(cls, "__iter__")
    if method is not MISSING and is_user_function(method):
        iterator = call(context, method, (obj,), {})
        if lookup_type(type(iterator), "__next__") is MISSING:
            raise TypeError(f"iter() returned non-iterator of type '{type(iterator).__name__}'")
        return iterator
    return iter(obj)


def next_value(context: Any, iterator: Any) -> Any:
    """``next(iterator)``; raises StopIteration when exhausted."""
    cls = type(iterator)
    cache = context.next_methods
    method = cache.get(cls, MISSING)
    if method is None:
        return next(iterator)
    if method is MISSING:
        found = lookup_type(cls, "__next__")
        method = found if is_user_function(found) else None
        cache[cls] = method
        if method is None:
            return next(iterator)
    return call(context, method, (iterator,), {})


def iterate_all(context: Any, obj: Any) -> list:
    """All elements, as UNPACK_SEQUENCE / LIST_EXTEND see them."""
    if type(obj) in _PLAIN_ITERABLES and context.provenance.source_of(obj) is None:
        return list(obj)
    iterator = get_iterator(context, obj)
    items = []
    while True:
        try:
            items.append(next_value(context, iterator))
        except StopIteration:
            return items
