"""A stage's symbols in an order set by what they compute, not by where the trace put them.

Stages of one structure share a compiled nvFuser definition (``translate.structure_key``, which
numbers values by first appearance). The same computation met in another topological order gets
another key and compiles again: the 4-layer Llama's rotary-embedding backward came as three
orders of its 22 ops (its converts and broadcasts interleaved differently from layer to layer), three
definitions at about 0.5 s of compile each on an H200. Sorting a stage's symbols by a hash of what
each computes (its op, its constants, the hashes of its operands, and how its results are used)
gives equal computations one order, whatever the trace's.

The order only changes which stages share a key; a key still describes its computation whole, so
sharing stays sound whatever order comes out.
"""

from __future__ import annotations

import functools
import heapq
import zlib
from collections.abc import Callable
from typing import Any

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol

__all__ = ["canonical_order", "in_canonical_order", "ordered_outputs"]


def canonical_order(region: list[BoundSymbol], outputs: list[TensorProxy]) -> list[BoundSymbol]:
    """``region`` in a topological order that depends on its computation alone (ties: the trace's)."""
    if len(region) < 2:
        return region
    computes = _forward_hashes(region)
    uses = _backward_hashes(region, outputs, computes)
    producer = {p.name: i for i, b in enumerate(region) for p in b.proxy_outputs()}
    waiting = [0] * len(region)  # per symbol: its operands not yet placed
    consumers: list[list[int]] = [[] for _ in region]
    for i, b in enumerate(region):
        for j in {producer[p.name] for p in b.proxy_args() if p.name in producer}:
            waiting[i] += 1
            consumers[j].append(i)
    ready = [(computes[i], uses[i], i) for i in range(len(region)) if waiting[i] == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        *_, i = heapq.heappop(ready)
        ordered.append(region[i])
        for c in consumers[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (computes[c], uses[c], c))
    return ordered


def in_canonical_order(
    region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]
) -> tuple[list[BoundSymbol], list[TensorProxy], list[TensorProxy]]:
    """A stage's symbols, inputs (by first read; an input no symbol reads, such as the destination of
    a write, last) and outputs in the order of its computation."""
    ordered = canonical_order(region, outputs)
    first_read: dict[str, int] = {}
    for i, b in enumerate(ordered):
        for p in b.proxy_args():
            first_read.setdefault(p.name, i)
    ordered_inputs = sorted(inputs, key=lambda p: first_read.get(p.name, len(ordered)))
    return ordered, ordered_inputs, ordered_outputs(ordered, outputs)


def ordered_outputs(ordered: list[BoundSymbol], outputs: list[TensorProxy]) -> list[TensorProxy]:
    """``outputs`` in the order ``ordered`` computes them (the key numbers them by place)."""
    position = {p.name: (i, k) for i, b in enumerate(ordered) for k, p in enumerate(b.proxy_outputs())}
    return sorted(outputs, key=lambda p: position.get(p.name, (-1, 0)))


def _forward_hashes(region: list[BoundSymbol]) -> list[int]:
    """Per symbol: its op and constants, with the hashes of the values it reads. Inputs are all
    alike, as in the structure key, which leaves their dtypes, ranks and shapes to the layouts (the
    updates of parameters of many shapes share one structure): what tells them apart is their uses."""
    values: dict[str, int] = {}

    def value(p: TensorProxy) -> int:
        return values.get(p.name, _INPUT)

    hashes = []
    for b in region:
        h = hash((_stable(b.symbol.name), _encoded(b.args, value), _encoded(b.kwargs, value)))
        for k, p in enumerate(b.proxy_outputs()):
            values[p.name] = hash((h, k, _stable(repr(getattr(p, "dtype", None)))))
        hashes.append(h)
    return hashes


def _backward_hashes(region: list[BoundSymbol], outputs: list[TensorProxy], computes: list[int]) -> list[int]:
    """Per symbol: how its results are used, by what (and the uses of those), and at which operand
    position; being a stage output counts as a use (whatever its place among the outputs, which the
    trace sets: ``ordered_outputs`` puts them in this order)."""
    used: dict[str, list[tuple]] = {p.name: [(_OUTPUT,)] for p in outputs}
    hashes = [0] * len(region)
    for i in range(len(region) - 1, -1, -1):
        b = region[i]
        hashes[i] = hash(tuple(tuple(sorted(used.get(p.name, []))) for p in b.proxy_outputs()))
        for position, p in enumerate(b.proxy_args()):  # each read once, in order
            used.setdefault(p.name, []).append((computes[i], position, hashes[i]))
    return hashes


def _encoded(x: Any, value: Callable[[TensorProxy], int]) -> Any:
    """``x`` with tensors as their hashes and every other value as a number: ``hash`` of ints, floats,
    bools and tuples is the same in every process, of a str it is not (``_stable``)."""
    if isinstance(x, TensorProxy):
        return value(x)
    if isinstance(x, (list, tuple)):
        return tuple(_encoded(v, value) for v in x)
    if isinstance(x, (bool, int, float)) or x is None:
        return (type(x) is bool, type(x) is float, x)
    if isinstance(x, dict):
        return tuple(sorted((_stable(str(k)), _encoded(v, value)) for k, v in x.items()))
    return _stable(f"{type(x).__name__}:{x!r}")


@functools.lru_cache(maxsize=4096)
def _stable(text: str) -> int:
    """A number for ``text`` that is the same in every process."""
    return zlib.crc32(text.encode())


_INPUT, _OUTPUT = _stable("input"), _stable("output")
