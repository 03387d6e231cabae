"""Rematerialization: save less for the backward by recomputing cheap forward work there.

Which forward values to save is a minimum cut. Every tensor ``v`` of the forward becomes an edge
``v.in -> v.out`` whose capacity is its size in bytes (zero for the forward's inputs, which stay
alive anyway); a use of ``v`` by the op that makes ``w`` is an edge ``v.out -> w.in`` of infinite
capacity. The values the backward reads are joined to the sink. The source is joined to the inputs
and to every value that must not be recomputed: made by an op that is expensive (matmul, linear)
or random (recomputing a dropout mask would draw a new one). A minimum cut then crosses ``in ->
out`` edges only: those tensors are saved, and the backward recomputes what lies beyond the cut
from them. Ops tagged ``elementwise``, ``shape`` or ``reduction`` may be recomputed
(``fused_recomputable``); where no fusion executor runs the backward only views are
(``view_recomputable``): there each recomputed op would be a kernel of its own (pipeline.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import from_trace
from thunder.core.transforms.autograd import ForwardBackward, saved_bytes
from thunder.core.transforms.dce import dce

__all__ = [
    "rematerialize",
    "cheapest_cut",
    "recomputation",
    "placed_before_use",
    "fused_recomputable",
    "view_recomputable",
]

RECOMPUTABLE_TAGS = frozenset({"elementwise", "shape", "reduction"})
_SOURCE, _SINK = "source", "sink"


def fused_recomputable(bound_symbol: BoundSymbol) -> bool:
    """Elementwise, shape and reduction ops: cheap where a fusion executor runs them in the backward's kernels."""
    tags = bound_symbol.symbol.tags
    return bool(tags & RECOMPUTABLE_TAGS) and "random" not in tags


def view_recomputable(bound_symbol: BoundSymbol) -> bool:
    """Views only (permute, reshape, expand, ...): free to recompute, and a saved view keeps its base alive."""
    return "view" in bound_symbol.symbol.tags


def rematerialize(
    split: ForwardBackward, recomputable: Callable[[BoundSymbol], bool] = fused_recomputable
) -> ForwardBackward:
    if not split.saved:
        return split
    forward_symbols = [b for b in split.forward.bound_symbols if b.symbol is not RETURN]
    producers = {p.name: b for b in forward_symbols for p in b.proxy_outputs()}
    saved: list[Any] = list(_min_cut(split, forward_symbols, producers, recomputable))
    if {p.name for p in saved} == {p.name for p in split.saved if isinstance(p, TensorProxy)}:
        return split
    # Numbers (cache="symbolic values") are never recomputed: the backward gets those it reads.
    numbers = {p.name: p for p in split.forward.args if isinstance(p, NumberProxy)}
    numbers.update(
        (p.name, p) for b in forward_symbols for p in b.proxy_outputs() if isinstance(p, NumberProxy)
    )
    recomputed = recomputation(
        [*saved, *numbers.values()], split.saved, producers, forward_symbols, recomputable
    )
    read = [p for p in split.saved if isinstance(p, NumberProxy)] + [
        p for b in recomputed for p in b.proxy_args() if isinstance(p, NumberProxy)
    ]
    saved += list({p.name: p for p in read}.values())

    backward = from_trace(split.backward, split.backward.header)
    backward.name = split.backward.name
    cotangents = split.backward.args[len(split.saved) :]
    backward.args = [*saved, *cotangents]
    backward.bound_symbols.extend(placed_before_use(recomputed, split.backward.bound_symbols))
    backward.header = (
        f"Backward: takes {len(saved)} saved tensors and {len(cotangents)} output gradients, "
        f"recomputes {len(recomputed)} forward ops"
    )

    forward = from_trace(split.forward, split.forward.header)
    forward.name = split.forward.name
    output = split.forward.output[0]
    forward.bound_symbols.extend(forward_symbols)
    forward.bound_symbols.append(BoundSymbol(RETURN, ((output, tuple(saved)),)))
    forward = dce(forward)
    forward.header = (
        f"Forward: saves {len(saved)} tensors ({saved_bytes(saved)} bytes) for the backward "
        f"(before rematerialization: {len(split.saved)} tensors, {saved_bytes(split.saved)} bytes)"
    )
    return ForwardBackward(forward, backward, saved, split.cotangent_outputs, split.detached_outputs)


def _min_cut(
    split: ForwardBackward,
    forward_symbols: list[BoundSymbol],
    producers: dict[str, BoundSymbol],
    recomputable: Callable[[BoundSymbol], bool],
) -> list[TensorProxy]:
    inputs = {p.name for p in split.forward.args if isinstance(p, TensorProxy)}

    def weight(proxy: TensorProxy) -> int:
        return 0 if proxy.name in inputs else proxy.numel() * proxy.dtype.itemsize

    needed = [p for p in split.saved if isinstance(p, TensorProxy)]
    if not needed:  # the backward needs only numbers (x * n with n a symbolic value): nothing to cut
        return []
    cut = cheapest_cut(forward_symbols, producers, needed, weight, recomputable)
    made = [p.name for b in forward_symbols for p in b.proxy_outputs()]
    order = {
        name: i for i, name in enumerate([p.name for p in split.forward.args if isinstance(p, Proxy)] + made)
    }
    return sorted(cut, key=lambda p: order.get(p.name, len(order)))  # inputs first, then as made


def cheapest_cut(
    symbols: list[BoundSymbol],
    producers: dict[str, BoundSymbol],
    needed: Iterable[TensorProxy],
    weight: Callable[[TensorProxy], int],
    recomputable: Callable[[BoundSymbol], bool],
) -> list[TensorProxy]:
    """The tensors of least total ``weight`` from which ``needed`` can be recomputed.

    Values that ``symbols`` do not make (inputs), and those made by symbols that are not
    ``recomputable``, can only be kept, never recomputed.
    """
    capacities: dict[tuple[str, str], int | None] = {}  # None: infinite
    tensors: dict[str, TensorProxy] = {}

    def add_tensor(proxy: TensorProxy) -> None:
        if proxy.name in tensors:
            return
        tensors[proxy.name] = proxy
        capacities[(f"{proxy.name}.in", f"{proxy.name}.out")] = weight(proxy)
        producer = producers.get(proxy.name)
        if producer is None or not recomputable(producer):
            capacities[(_SOURCE, f"{proxy.name}.in")] = None

    for bound_symbol in _recomputable_ancestors(symbols, producers, needed, recomputable):
        outputs = [p for p in bound_symbol.proxy_outputs() if isinstance(p, TensorProxy)]
        for output in outputs:
            add_tensor(output)
        for argument in bound_symbol.proxy_args():
            if isinstance(argument, TensorProxy):
                add_tensor(argument)
                for output in outputs:
                    capacities[(f"{argument.name}.out", f"{output.name}.in")] = None
    for proxy in needed:
        add_tensor(proxy)
        capacities[(f"{proxy.name}.out", _SINK)] = None
    sink_side = _sink_side_of_minimum_cut(capacities, _SOURCE, _SINK)
    return [tensors[name] for name in tensors if f"{name}.in" not in sink_side and f"{name}.out" in sink_side]


def _recomputable_ancestors(
    symbols: list[BoundSymbol],
    producers: dict[str, BoundSymbol],
    needed: Iterable[TensorProxy],
    recomputable: Callable[[BoundSymbol], bool],
) -> list[BoundSymbol]:
    """The symbols, in their order, that a recomputation of ``needed`` could run: walking back from
    ``needed`` through recomputable producers. The rest add no path to the sink, so the cut over
    these alone is the same cut (a fusion region of a whole training step holds thousands of
    symbols, of which a cut between two regions meets a few)."""
    chosen: set[int] = set()
    pending = [p.name for p in needed]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        producer = producers.get(name)
        if producer is None or id(producer) in chosen or not recomputable(producer):
            continue
        chosen.add(id(producer))
        pending += [p.name for p in producer.proxy_args() if isinstance(p, TensorProxy)]
    return [b for b in symbols if id(b) in chosen]


def _sink_side_of_minimum_cut(
    capacities: dict[tuple[str, str], int | None], source: str, sink: str
) -> set[str]:
    """The nodes that can still reach ``sink`` once a maximum flow from ``source`` runs (Dinic's algorithm).

    Every maximum flow leaves the same such set: the sink side of the minimum cut whose sink side is
    smallest. ``None`` is an infinite capacity; it is stood in for by more than all finite capacities
    together, which no flow fills, since cutting every finite edge is a cut.
    """
    infinite = sum(c for c in capacities.values() if c is not None) + 1
    # residual graph: edge i runs heads[i ^ 1] -> heads[i], with residual capacity residual[i]
    heads: list[str] = []
    residual: list[int] = []
    edges_of: dict[str, list[int]] = {}
    for (tail, head), capacity in capacities.items():
        edges_of.setdefault(tail, []).append(len(heads))
        heads.append(head)
        residual.append(infinite if capacity is None else capacity)
        edges_of.setdefault(head, []).append(len(heads))
        heads.append(tail)
        residual.append(0)
    if source in edges_of and sink in edges_of:
        while True:
            level = _levels(source, sink, edges_of, heads, residual)
            if sink not in level:
                break
            next_edge: dict[str, int] = {}  # per node, the first of its edges that may still carry flow
            while _push_path(source, sink, level, next_edge, edges_of, heads, residual):
                pass
    reaching = {sink}
    pending = [sink]
    while pending:  # backwards: a node reaches v when the edge into v has residual capacity
        node = pending.pop()
        for edge in edges_of.get(node, ()):
            tail = heads[edge]
            if tail not in reaching and residual[edge ^ 1] > 0:
                reaching.add(tail)
                pending.append(tail)
    return reaching


def _levels(
    source: str, sink: str, edges_of: dict[str, list[int]], heads: list[str], residual: list[int]
) -> dict[str, int]:
    """Breadth-first distances from ``source`` over edges with residual capacity."""
    level = {source: 0}
    frontier = [source]
    while frontier and sink not in level:
        following = []
        for node in frontier:
            for edge in edges_of[node]:
                head = heads[edge]
                if residual[edge] > 0 and head not in level:
                    level[head] = level[node] + 1
                    following.append(head)
        frontier = following
    return level


def _push_path(
    source: str,
    sink: str,
    level: dict[str, int],
    next_edge: dict[str, int],
    edges_of: dict[str, list[int]],
    heads: list[str],
    residual: list[int],
) -> bool:
    """Push flow along one path of increasing level from ``source`` to ``sink``; False when none is left.

    Dead ends are dropped from ``level`` so that later searches of the phase skip them.
    """
    path: list[int] = []
    node = source
    while node != sink:
        edges = edges_of[node]
        position = next_edge.get(node, 0)
        while position < len(edges):
            edge = edges[position]
            head = heads[edge]
            if residual[edge] > 0 and level.get(head, -1) == level[node] + 1:
                break
            position += 1
        next_edge[node] = position
        if position == len(edges):  # a dead end: back up one edge
            del level[node]
            if not path:
                return False
            node = heads[path.pop() ^ 1]
            continue
        path.append(edges[position])
        node = heads[edges[position]]
    pushed = min(residual[edge] for edge in path)
    for edge in path:
        residual[edge] -= pushed
        residual[edge ^ 1] += pushed
    return True


def placed_before_use(recomputed: list[BoundSymbol], backward: list[BoundSymbol]) -> list[BoundSymbol]:
    """The backward with each recomputed op just before the first op that reads what it makes.

    Recomputing everything up front would keep every recomputed value alive from the start of the
    backward (and a fusion executor would fuse it all into one region with many outputs).
    """
    position = {p.name: i for i, b in enumerate(recomputed) for p in b.proxy_outputs()}
    placed: set[int] = set()
    result: list[BoundSymbol] = []
    for bound_symbol in backward:
        needed: set[int] = set()
        pending = [p.name for p in bound_symbol.proxy_args()]
        while pending:  # the recomputed ops this one needs, directly or through other recomputed ops
            index = position.get(pending.pop())
            if index is not None and index not in placed and index not in needed:
                needed.add(index)
                pending += [p.name for p in recomputed[index].proxy_args()]
        placed |= needed
        result += [recomputed[i] for i in sorted(needed)]  # forward order is a topological order
        result.append(bound_symbol)
    return result


def recomputation(
    saved: list[Any],  # tensors, and the numbers that are available too
    needed: Iterable[TensorProxy],
    producers: dict[str, BoundSymbol],
    forward_symbols: list[BoundSymbol],
    recomputable: Callable[[BoundSymbol], bool] = fused_recomputable,
) -> list[BoundSymbol]:
    """The ops of ``forward_symbols`` that recompute ``needed`` from ``saved``, in their order."""
    available = {p.name for p in saved}
    chosen: set[int] = set()
    pending = [p.name for p in needed if p.name not in available]
    while pending:
        name = pending.pop()
        producer = producers[name]
        if id(producer) in chosen:
            continue
        assert recomputable(producer), f"rematerialization would recompute {producer.symbol.id}"
        chosen.add(id(producer))
        pending += [p.name for p in producer.proxy_args() if p.name not in available]
    return [b for b in forward_symbols if id(b) in chosen]
