"""Copy-backs taken into fusion regions: a region that makes an input's new value writes it there.

After the executors are claimed, an ``inplace.copy_(x, t)`` whose value ``t`` a fusion region makes
(``nvFusion3`` computing an optimizer's new ``exp_avg``) is one more kernel, which reads ``t`` and
writes ``x``. In a whole training step, with the optimizer inside the program, that is a copy of
every parameter and of every state tensor per step: 156 device copies, 3.2 ms of a 49 ms step of the
4-layer Llama-7B shape on an H200. A fusion executor that can write its inputs
(``FusionExecutor.writes_inputs``) takes such a copy into the region (``write_inputs``) when

- no symbol between the region and the copy reads ``x``'s memory through any alias (``alias_roots``):
  the write now happens where the region runs, no longer where the copy stood;
- the region reads no other alias of ``x`` than ``x`` itself;
- ``x`` and ``t`` have one shape and dtype, and no other copy writes ``x``.

How is the executor's choice; it keeps the copy's meaning. nvFuser writes the value through an output
aliased to the input where one kernel may read and write it, and otherwise copies at the region's
end (``FusionRunner``). The copy stays among the region's subsymbols: the printed trace shows it, and
a region that falls back to torch runs it. The region is tagged ``side_effect`` (DCE keeps it, and
``cuda_graphs.mutated_inputs`` finds the input it writes).
"""

from __future__ import annotations

from collections import Counter

from thunder.core.executor import FusionExecutor
from thunder.core.inplace import copy_symbol
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace
from thunder.core.transforms.copy_backs import alias_roots

__all__ = ["copy_backs_into_fusions"]


def copy_backs_into_fusions(trace: Trace) -> Trace:
    bound_symbols = list(trace.bound_symbols)
    taken = _copies_taken(trace, bound_symbols)
    removed = {index for indices in taken.values() for index in indices}
    still_read = {p.name for i, b in enumerate(bound_symbols) if i not in removed for p in b.proxy_args()}
    replaced: dict[int, BoundSymbol] = {}
    for index, copies in taken.items():
        region = bound_symbols[index]
        outputs = {p.name for p in region.proxy_outputs() if p.name in still_read}
        written = region.symbol.executor.write_inputs(region, [bound_symbols[i] for i in copies], outputs)
        if written is None:  # the executor declined: the copies stay where they are
            removed.difference_update(copies)
        else:
            replaced[index] = written
    if not replaced:
        return trace
    new = from_trace(trace, "Copy-backs taken into fusion regions")
    new.bound_symbols.extend(
        replaced.get(index, b) for index, b in enumerate(bound_symbols) if index not in removed
    )
    return new


def _copies_taken(trace: Trace, bound_symbols: list[BoundSymbol]) -> dict[int, list[int]]:
    """Per fusion region (its index), the indices of the copy-backs it takes in."""
    copy = copy_symbol()
    copies = [i for i, b in enumerate(bound_symbols) if b.symbol is copy]
    if not copies:
        return {}
    written = Counter(bound_symbols[i].args[0].name for i in copies)
    producer = {p.name: i for i, b in enumerate(bound_symbols) for p in b.proxy_outputs()}
    roots = alias_roots(trace, bound_symbols)
    taken: dict[int, list[int]] = {}
    for index in copies:
        destination, value = bound_symbols[index].args
        made_at = producer.get(value.name)
        if made_at is None or written[destination.name] > 1:
            continue
        region = bound_symbols[made_at]
        executor = region.symbol.executor
        if not isinstance(executor, FusionExecutor) or not executor.writes_inputs:
            continue
        if destination.shape != value.shape or destination.dtype != value.dtype:
            continue
        root = roots.get(destination.name, destination.name)

        def aliases(name: str) -> bool:
            return roots.get(name, name) == root

        between = bound_symbols[made_at + 1 : index]
        if any(aliases(p.name) for b in between for p in b.proxy_args()):
            continue
        if any(aliases(p.name) and p.name != destination.name for p in region.proxy_args()):
            continue
        taken.setdefault(made_at, []).append(index)
    return taken
