"""Flattening of nested Python containers (tuples, lists, dicts, namedtuples): torch's pytree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "TreeSpec"]

TreeSpec = _pytree.TreeSpec
LEAF_SPEC = _pytree.tree_flatten(None)[1]  # the spec torch gives every leaf (one object)
_is_leaf = getattr(_pytree, "tree_is_leaf", None) or _pytree._is_leaf  # torch < 2.6: only the private name


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    """torch's ``tree_flatten``, the same leaves and spec. torch's recursion is a closure that refers to
    itself, a reference cycle per call that only the garbage collector frees; compiled functions
    flatten their outputs on every call, and these cycles then trigger full collections of the heap."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(node: Any, leaves: list[Any]) -> TreeSpec:
    if _is_leaf(node):
        leaves.append(node)
        return LEAF_SPEC
    node_type = _pytree._get_node_type(node)
    children, context = _pytree.SUPPORTED_NODES[node_type].flatten_fn(node)
    return TreeSpec(node_type, context, [_flatten(child, leaves) for child in children])


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
    if kind is torch.Size:  # torch's pytree rebuilds a torch.Size as a tuple; a program's shape stays one
        items = [tree_map(fn, item) for item in tree]
        return torch.Size(items) if all(isinstance(i, (int, torch.SymInt)) for i in items) else tuple(items)
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
