"""thunder.core.pytree: the same leaves and specs as torch's pytree, without its per-call garbage."""

from __future__ import annotations

import collections
import gc

import pytest
import torch
from torch.utils import _pytree

import thunder
from thunder.core.pytree import tree_flatten, tree_unflatten

Pair = collections.namedtuple("Pair", "first second")
_tensor = torch.ones(2)
_TREES = [
    _tensor,
    None,
    3,
    "text",
    (),
    [],
    {},
    ((),),
    (_tensor, [_tensor, {"x": _tensor, "y": (1, 2.0)}]),
    Pair(_tensor, [None]),
    collections.OrderedDict(a=_tensor, b=[1]),
]


@pytest.mark.parametrize("tree", _TREES, ids=lambda tree: type(tree).__name__)
def test_tree_flatten_matches_torch(tree: object) -> None:
    leaves, spec = tree_flatten(tree)
    expected_leaves, expected_spec = _pytree.tree_flatten(tree)
    assert spec == expected_spec and str(spec) == str(expected_spec)
    assert len(leaves) == len(expected_leaves) and all(a is b for a, b in zip(leaves, expected_leaves))
    assert _pytree.tree_flatten(tree_unflatten(leaves, spec)) == (expected_leaves, expected_spec)


def _garbage_of(fn: object) -> list:
    """The objects only the cycle collector could free that ``fn()`` left behind."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        fn()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_tree_flatten_makes_no_reference_cycles() -> None:
    assert _garbage_of(lambda: [tree_flatten(tree) for tree in _TREES]) == []


def test_training_step_cache_hit_makes_no_reference_cycles() -> None:
    # Garbage made on every call fills the young generation and brings full collections of the heap,
    # which then cost more than the step (a compiled program holds many objects).
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    jitted = thunder.jit(model)
    x = torch.randn(3, 4)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        jitted(x).sum().backward()

    step()
    assert _garbage_of(lambda: [step() for _ in range(3)]) == []
