"""Side table from live objects to the Source describing where they were read from.

Keyed by ``id`` because most values (tensors, modules, proxies) are unhashable or hash by
value; each entry keeps a reference to the object so that its id is not reused while the
table lives.
"""

from __future__ import annotations

from types import CellType
from typing import Any

from thunder.core.sources import Source

__all__ = ["ProvenanceTable", "UNTRACKED_TYPES"]

# Values of these types are interned or copied freely, so an id says nothing about where
# they came from; they are never used as the base of a longer path.
UNTRACKED_TYPES = frozenset({int, float, bool, str, type(None), complex, bytes})


class ProvenanceTable:
    __slots__ = ("_objects", "_cells")

    def __init__(self) -> None:
        self._objects: dict[int, tuple[Any, Source]] = {}
        self._cells: dict[int, tuple[CellType, Source]] = {}

    def register(self, value: Any, source: Source) -> None:
        """Remember the first source seen for ``value``: the earliest path is the simplest."""
        if type(value) in UNTRACKED_TYPES:
            return
        key = id(value)
        if key not in self._objects:
            self._objects[key] = (value, source)

    def source_of(self, value: Any) -> Source | None:
        entry = self._objects.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        return None

    def register_cell(self, cell: CellType, source: Source) -> None:
        key = id(cell)
        if key not in self._cells:
            self._cells[key] = (cell, source)

    def cell_source(self, cell: CellType) -> Source | None:
        if not self._cells:
            return None
        entry = self._cells.get(id(cell))
        if entry is not None and entry[0] is cell:
            return entry[1]
        return None
