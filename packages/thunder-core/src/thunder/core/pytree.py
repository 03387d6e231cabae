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


# Every traced operation maps over its arguments: plain tuples, lists and dicts take a direct path
# (same results as torch's pytree, several times faster); other containers go through torch's.


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    kind = type(tree)
    if kind is tuple:
        return tuple([tree_map(fn, item) for item in tree])
    if kind is list:
        return [tree_map(fn, item) for item in tree]
    if kind is dict:
        return {key: tree_map(fn, value) for key, value in tree.items()}
    if isinstance(tree, (tuple, list, dict)) or kind in _pytree.SUPPORTED_NODES:
        return _pytree.tree_map(fn, tree)
    return fn(tree)


def tree_leaves(tree: Any) -> list[Any]:
    leaves: list[Any] = []
    _collect_leaves(tree, leaves)
    return leaves


def _collect_leaves(tree: Any, leaves: list[Any]) -> None:
    kind = type(tree)
    if kind is tuple or kind is list:
        for item in tree:
            _collect_leaves(item, leaves)
    elif kind is dict:
        for value in tree.values():
            _collect_leaves(value, leaves)
    elif isinstance(tree, (tuple, list, dict)) or kind in _pytree.SUPPORTED_NODES:
        leaves.extend(_pytree.tree_leaves(tree))
    else:
        leaves.append(tree)
