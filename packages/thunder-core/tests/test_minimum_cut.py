"""The minimum cut of rematerialization (transforms/remat.py) against brute force on small graphs.

Rematerialization saves the tensors whose ``in -> out`` edge the cut crosses, so which of several
cuts of least capacity it picks changes the traces: it must be the one whose sink side is smallest
(what any maximum flow's residual graph gives, and what networkx's ``minimum_cut`` returned before).
"""

from __future__ import annotations

import itertools
import random

import pytest

from thunder.core.transforms.remat import _sink_side_of_minimum_cut


def _brute_force_sink_side(capacities: dict[tuple[str, str], int | None], nodes: list[str]) -> set[str]:
    """The intersection of the sink sides of all cuts of least capacity: the smallest such sink side."""
    inner = [n for n in nodes if n not in ("source", "sink")]
    best, sides = None, []
    for size in range(len(inner) + 1):
        for chosen in itertools.combinations(inner, size):
            sink_side = {"sink", *chosen}
            crossing = [c for (u, v), c in capacities.items() if u not in sink_side and v in sink_side]
            if None in crossing:
                continue
            value = sum(crossing)
            if best is None or value < best:
                best, sides = value, [sink_side]
            elif value == best:
                sides.append(sink_side)
    return set.intersection(*sides)


@pytest.mark.parametrize("seed", range(200))
def test_the_sink_side_is_the_smallest_of_the_cheapest_cuts(seed: int) -> None:
    rng = random.Random(seed)
    nodes = ["source", "sink"] + [f"n{i}" for i in range(rng.randint(1, 7))]
    capacities: dict[tuple[str, str], int | None] = {}
    for _ in range(rng.randint(1, 20)):
        tail, head = rng.sample(nodes, 2)
        if tail != "sink" and head != "source":  # edges into the sink are finite: some cut is
            capacities[(tail, head)] = rng.choice([0, 1, 2, 3, 5] + ([] if head == "sink" else [None]))
    capacities[("source", nodes[2])] = None
    capacities[(nodes[2], "sink")] = rng.choice([1, 4])
    expected = _brute_force_sink_side(capacities, nodes)
    assert _sink_side_of_minimum_cut(capacities, "source", "sink") == expected


def test_a_graph_without_the_source_cuts_nothing() -> None:
    """Everything the sink needs can be recomputed: nothing is saved."""
    assert _sink_side_of_minimum_cut({("a.in", "a.out"): 8, ("a.out", "sink"): None}, "source", "sink") == {
        "sink",
        "a.out",
        "a.in",
    }
