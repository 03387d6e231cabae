"""Moves between fusion regions: a region's separately launched part goes to a region it is linked to.

A fusion executor may launch a region in several parts (``FusionExecutor.stages``): nvFuser runs each
connected part of a region, and outputs computed from lower-rank inputs alone, as fusions of their
own, each costing one launch of host time (tens of microseconds per ``execute``). Region formation
puts work that reads no region's output (a recomputation of a saved value in the backward, say) into
the latest region, where it often shares no tensor with anything else and becomes a part of its own.
Llama's backward had 12 such extra launches for 4 layers: the RMSNorm recomputed for the weight
gradients of q/k/v sat beside the rotary backward, and the SwiGLU product recomputed for w2's weight
gradient beside the previous norm's backward. Each belongs with the region that reads the same
saved tensors (the norm's backward reads the norm's input; the SwiGLU backward reads w1's and w3's
outputs), where it joins that region's launch.

A part moves to another region of its executor when the two share a tensor (one reads what the
other reads or makes), the move lowers the total number of launches of the two regions, the
executor accepts every symbol into the merged region (``can_join``), and the program, with each
region as one node, stays acyclic (data, the random generator's chain and side effects, as the
regions are emitted). The matmuls that read a moved value then simply run after its new region.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from thunder.core.executor import FusionExecutor
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol

__all__ = ["move_parts_between_regions"]

Claimed = list[tuple[BoundSymbol, FusionExecutor | None]]
Node = tuple[str, int]
Regions = list[tuple[FusionExecutor, list[int]]]

# A bound on the moves tried per program (each accepted one rebuilds the node graph).
_MOVES_PER_PROGRAM = 5000


def move_parts_between_regions(
    claimed: Claimed,
    region_of: list[int | None],
    regions: Regions,
    producer_of: dict[str, int],
    chain: dict[int, int],
    forward_pieces: set[int] | None = None,
) -> tuple[dict[Node, list[int]], dict[Node, set[Node]]] | None:
    """Move parts of regions into linked regions where that saves launches (in place).

    ``forward_pieces``: the forward's pieces in a program that ran ``loss.backward()`` itself; a part
    with other work never moves into a region holding forward work (it would run in the forward and
    hold what it makes until the backward reads it).

    Returns the program's nodes and their dependencies (``node_dependencies``) as they stand after
    the moves, when the pass had to build them (the emission of the regions needs them too), else None.
    """
    if len(regions) < 2:
        return None
    readers: dict[str, set[int]] = {}
    for index, (bound_symbol, _) in enumerate(claimed):
        for proxy in bound_symbol.proxy_args():
            readers.setdefault(proxy.name, set()).add(index)
    moves = _Moves(claimed, region_of, regions, producer_of, chain, readers, forward_pieces)
    pending = [r for r in range(len(regions)) if type(regions[r][0]).stages is not FusionExecutor.stages]
    # (an executor that does not say how it launches a region keeps its regions: Triton plans its kernels)
    tries = 0
    while pending and tries < _MOVES_PER_PROGRAM:
        # A round checks moves against one graph, at most one move per region, then verifies them all
        # at once: rebuilding the graph after every move was most of the pass (22 moves in Llama).
        touched: set[int] = set()
        done: list[_Move] = []
        for region in pending:
            if region in touched or not moves.linked_regions(region, regions[region][1], any_size=True):
                continue  # nothing to move to: its parts need not be known
            for part in sorted(moves.parts(region), key=len):
                targets = [t for t in moves.linked_regions(region, part) if t not in touched]
                tries += len(targets)
                move = next((m for t in targets if (m := moves.try_move(region, part, t)) is not None), None)
                if move is not None:
                    done.append(move)
                    touched.update((region, move.target))
                    break
        if not done:
            break
        moves.verify(done)
        pending = sorted(touched)
    graph = moves._graph
    return (graph.members, graph.dependencies) if graph is not None else None


@dataclass(frozen=True, eq=False)
class _Move:
    region: int
    target: int
    part: list[int]
    members: list[int]  # the region's before the move
    target_members: list[int]  # the target's before the move


class _Moves:
    def __init__(
        self,
        claimed: Claimed,
        region_of: list[int | None],
        regions: Regions,
        producer_of: dict[str, int],
        chain: dict[int, int],
        readers: dict[str, set[int]],
        forward_pieces: set[int] | None = None,
    ):
        self.claimed, self.region_of, self.regions = claimed, region_of, regions
        self.forward_pieces = forward_pieces
        self.producer_of, self.chain, self.readers = producer_of, chain, readers
        self._graph: _Graph | None = None  # built on the first move tried
        self._parts: dict[int, list[list[int]]] = {}
        self._sizes: dict[int, set[int]] = {}

    def outputs(self, members: Sequence[int]) -> set[str]:
        inside = set(members)
        made = {p.name for i in members for p in self.claimed[i][0].proxy_outputs()}
        return {name for name in made if self.readers.get(name, set()) - inside}

    def launches(self, executor: FusionExecutor, members: Sequence[int]) -> int:
        if not members:
            return 0
        return len(executor.stages([self.claimed[i][0] for i in members], self.outputs(members)))

    def parts(self, region: int) -> list[list[int]]:
        """The region's launched parts, as indices into ``claimed``."""
        if region not in self._parts:
            executor, members = self.regions[region]
            self._parts[region] = self.parts_of(executor, members)
        return self._parts[region]

    def parts_of(self, executor: FusionExecutor, members: list[int]) -> list[list[int]]:
        if not members:
            return []
        index_of = {id(self.claimed[i][0]): i for i in members}
        stages = executor.stages([self.claimed[i][0] for i in members], self.outputs(members))
        return [[index_of[id(b)] for b in stage] for stage in stages]

    def linked_regions(self, region: int, part: list[int], *, any_size: bool = False) -> list[int]:
        """Other regions of the executor that read or make a tensor (not a number) the part reads or
        makes, and that has a tensor as large as the part's widest.

        A shared number (a learning rate read by every parameter's update) is no link, and a region of
        another size is no home: a fusion of two iteration sizes is segmented by nvFuser, at seconds of
        compile time, into the kernels it had before.
        """
        executor = self.regions[region][0]
        tensors = {
            p.name: p
            for i in part
            for p in (*self.claimed[i][0].proxy_args(), *self.claimed[i][0].proxy_outputs())
            if isinstance(p, TensorProxy)
        }
        if not tensors:
            return []
        widest = max(p.numel() for p in tensors.values())
        linked: set[int] = set()
        for name, proxy in tensors.items():
            if not proxy.shape:
                continue
            for index in (*self.readers.get(name, ()), self.producer_of.get(name)):
                target = self.region_of[index] if index is not None else None
                if target is not None and target != region and self.regions[target][0] is executor:
                    linked.add(target)
        return [target for target in sorted(linked) if any_size or widest in self.sizes(target)]

    def sizes(self, region: int) -> set[int]:
        """The numbers of elements of the region's tensors."""
        if region not in self._sizes:
            symbols = (self.claimed[i][0] for i in self.regions[region][1])
            self._sizes[region] = {
                p.numel()
                for b in symbols
                for p in (*b.proxy_args(), *b.proxy_outputs())
                if isinstance(p, TensorProxy)
            }
        return self._sizes[region]

    @property
    def graph(self) -> _Graph:
        if self._graph is None:
            self._graph = _Graph(self.claimed, self.region_of, self.producer_of, self.chain)
        return self._graph

    def try_move(self, region: int, part: list[int], target: int) -> _Move | None:
        """Move ``part`` of ``region`` into ``target`` if the current graph says that closes no
        cycle and the move saves launches; the move made, to verify, or None."""
        executor, members = self.regions[region]
        target_members = self.regions[target][1]
        part = self._with_dead_readers(region, part)
        if self._forward_takes_backward(part, target_members):
            return None
        if self.graph.closes_cycle(part, target, self.readers):
            return None
        rest = [i for i in members if i not in set(part)]
        merged = self._ordered([*part, *target_members])
        if merged is None or not self._joins(executor, merged):
            return None
        before = len(self.parts(region)) + len(self.parts(target))
        if self.launches(executor, rest) + self.launches(executor, merged) >= before:
            return None
        move = _Move(region, target, part, list(members), list(target_members))
        self._apply(move, rest, merged)
        return move

    def _forward_takes_backward(self, part: list[int], target_members: list[int]) -> bool:
        forward = self.forward_pieces
        return forward is not None and not forward.issuperset(part) and not forward.isdisjoint(target_members)

    def verify(self, moves: list[_Move]) -> None:
        """Keep ``moves`` (each checked against the graph before any of them) if together they make
        no cycle; else undo them and make them again one at a time, each checked on its own."""
        graph = _Graph(self.claimed, self.region_of, self.producer_of, self.chain)
        if graph.acyclic:
            self._graph = graph
            return
        for move in reversed(moves):
            self._apply(move, move.members, move.target_members, undo=True)
        for move in moves:
            rest = [i for i in move.members if i not in set(move.part)]
            merged = self._ordered([*move.part, *move.target_members])
            assert merged is not None
            self._apply(move, rest, merged)
            graph = _Graph(self.claimed, self.region_of, self.producer_of, self.chain)
            if graph.acyclic:
                self._graph = graph
            else:
                self._apply(move, move.members, move.target_members, undo=True)

    def _apply(
        self, move: _Move, members: list[int], target_members: list[int], *, undo: bool = False
    ) -> None:
        executor = self.regions[move.region][0]
        for i in move.part:
            self.region_of[i] = move.region if undo else move.target
        self.regions[move.region] = (executor, members)
        self.regions[move.target] = (executor, target_members)
        for changed in (move.region, move.target):
            self._parts.pop(changed, None)
            self._sizes.pop(changed, None)

    def _with_dead_readers(self, region: int, part: list[int]) -> list[int]:
        """``part`` and the region's dead symbols (in no stage, dropped when the region is emitted)
        that read from it: left behind, they would make the region read the part's new region."""
        members = self.regions[region][1]
        live = {i for stage in self.parts(region) for i in stage}
        moved, made = list(part), {p.name for i in part for p in self.claimed[i][0].proxy_outputs()}
        for i in members:
            if i in live or i in moved:
                continue
            if any(p.name in made for p in self.claimed[i][0].proxy_args()):
                moved.append(i)
                made.update(p.name for p in self.claimed[i][0].proxy_outputs())
        return moved

    def _ordered(self, indices: list[int]) -> list[int] | None:
        """``indices`` in an order where each symbol follows the ones it reads (stable), or None."""
        made_by = {p.name: i for i in indices for p in self.claimed[i][0].proxy_outputs()}
        waiting = {
            i: {made_by[p.name] for p in self.claimed[i][0].proxy_args() if made_by.get(p.name, i) != i}
            for i in indices
        }
        order: list[int] = []
        done: set[int] = set()
        pending = list(indices)
        while pending:
            position = next((k for k, i in enumerate(pending) if waiting[i] <= done), None)
            if position is None:
                return None
            index = pending.pop(position)
            order.append(index)
            done.add(index)
        return order

    def _joins(self, executor: FusionExecutor, merged: list[int]) -> bool:
        symbols = [self.claimed[i][0] for i in merged]
        return all(executor.can_join(symbols[:k], symbols[k]) for k in range(1, len(symbols)))


class _Graph:
    """The program with each region as one node (``node_dependencies``), with the regions upstream and
    downstream of each node (bit sets): whether a move closes a cycle, asked in bit operations."""

    def __init__(
        self,
        claimed: Claimed,
        region_of: list[int | None],
        producer_of: dict[str, int],
        chain: dict[int, int],
    ):
        from thunder.core.transforms.claim_executors import node_dependencies

        self.claimed, self.region_of, self.producer_of = claimed, region_of, producer_of
        self.members, self.dependencies = node_dependencies(claimed, region_of, producer_of, chain)
        dependencies = self.dependencies
        self.side_effects = [i for i, (b, _) in enumerate(claimed) if "side_effect" in b.symbol.tags]
        dependents: dict[Node, list[Node]] = {}
        remaining = {node: len(deps) for node, deps in dependencies.items()}
        for node, deps in dependencies.items():
            for dep in deps:
                dependents.setdefault(dep, []).append(node)
        order: list[Node] = []
        ready = [node for node, count in remaining.items() if count == 0]
        while ready:
            node = ready.pop()
            order.append(node)
            for dependent in dependents.get(node, ()):
                remaining[dependent] -= 1
                if remaining[dependent] == 0:
                    ready.append(dependent)
        self.acyclic = len(order) == len(remaining)
        self.upstream: dict[Node, int] = {}  # bit r: region r has a path to the node
        self.downstream: dict[Node, int] = {}  # bit r: the node has a path to region r
        if not self.acyclic:
            return
        for node in order:
            bits = 0
            for dep in dependencies[node]:
                bits |= self.upstream[dep] | (1 << dep[1] if dep[0] == "region" else 0)
            self.upstream[node] = bits
        for node in reversed(order):
            bits = 0
            for dependent in dependents.get(node, ()):
                bits |= self.downstream[dependent] | (1 << dependent[1] if dependent[0] == "region" else 0)
            self.downstream[node] = bits

    def node_of(self, index: int) -> Node:
        region = self.region_of[index]
        return ("region", region) if region is not None else ("symbol", index)

    def closes_cycle(self, part: list[int], target: int, readers: dict[str, set[int]]) -> bool:
        """Whether moving ``part`` into region ``target`` makes a cycle (conservatively: may say yes
        for a move that makes none, never no for one that makes one).

        Every edge the move adds touches the target: from the nodes the part reads from, to the nodes
        that read the part, and to the side effects that begin to follow the target once it begins
        where the part began. A cycle needs the target to reach one of the first or one of the second
        to reach the target.
        """
        home, bit = ("region", target), 1 << target
        inside = set(part)
        for i in part:
            for proxy in self.claimed[i][0].proxy_args():
                source = self.producer_of.get(proxy.name)
                if source is not None and source not in inside:
                    node = self.node_of(source)
                    if node != home and self.upstream[node] & bit:
                        return True
        for i in part:
            for proxy in self.claimed[i][0].proxy_outputs():
                for reader in readers.get(proxy.name, ()):
                    node = self.node_of(reader)
                    if reader not in inside and node != home and self.downstream[node] & bit:
                        return True
        # side effects begun between the part's start and the target's now follow the target
        begun, start = min(part), self.members[home][0]
        first = bisect.bisect_right(self.side_effects, begun)
        for index in self.side_effects[first : bisect.bisect_left(self.side_effects, start)]:
            node = self.node_of(index)
            if node != home and self.downstream[node] & bit:
                return True
        return False
