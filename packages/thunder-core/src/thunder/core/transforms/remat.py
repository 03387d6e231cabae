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

import networkx as nx

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import from_trace
from thunder.core.transforms.autograd import ForwardBackward, saved_bytes
from thunder.core.transforms.dce import dce

__all__ = ["rematerialize", "cheapest_cut", "recomputation", "fused_recomputable", "view_recomputable"]

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
    backward.bound_symbols.extend(_placed_before_use(recomputed, split.backward.bound_symbols))
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
    graph = nx.DiGraph()
    tensors: dict[str, TensorProxy] = {}

    def add_tensor(proxy: TensorProxy) -> None:
        if proxy.name in tensors:
            return
        tensors[proxy.name] = proxy
        graph.add_edge(f"{proxy.name}.in", f"{proxy.name}.out", capacity=weight(proxy))
        producer = producers.get(proxy.name)
        if producer is None or not recomputable(producer):
            graph.add_edge(_SOURCE, f"{proxy.name}.in")  # no capacity: infinite

    for bound_symbol in symbols:
        outputs = [p for p in bound_symbol.proxy_outputs() if isinstance(p, TensorProxy)]
        for output in outputs:
            add_tensor(output)
        for argument in bound_symbol.proxy_args():
            if isinstance(argument, TensorProxy):
                add_tensor(argument)
                for output in outputs:
                    graph.add_edge(f"{argument.name}.out", f"{output.name}.in")
    for proxy in needed:
        add_tensor(proxy)
        graph.add_edge(f"{proxy.name}.out", _SINK)
    _, (source_side, _) = nx.minimum_cut(graph, _SOURCE, _SINK)
    return [
        tensors[name] for name in tensors if f"{name}.in" in source_side and f"{name}.out" not in source_side
    ]


def _placed_before_use(recomputed: list[BoundSymbol], backward: list[BoundSymbol]) -> list[BoundSymbol]:
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
