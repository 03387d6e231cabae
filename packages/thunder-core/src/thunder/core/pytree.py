"""Flattening of nested Python containers (tuples, lists, dicts, namedtuples): torch's pytree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils import _pytree

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "TreeSpec"]

TreeSpec = _pytree.TreeSpec


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    return _pytree.tree_flatten(tree)


def tree_unflatten(leaves: list[Any], spec: TreeSpec) -> Any:
    return _pytree.tree_unflatten(leaves, spec)


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    return _pytree.tree_map(fn, tree)


def tree_leaves(tree: Any) -> list[Any]:
    return _pytree.tree_leaves(tree)
