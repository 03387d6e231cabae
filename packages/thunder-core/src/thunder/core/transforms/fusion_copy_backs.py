"""Copy-backs taken into fusion regions: a region that makes an input's new value writes it there.

After the executors are claimed, an ``inplace.copy_(x, t)`` whose value ``t`` a fusion region makes
(``nvFusion3`` computing an optimizer's new ``exp_avg``) is one more kernel, which reads ``t`` and
writes ``x``. In a whole training step, with the optimizer inside the program, that is a copy of
every parameter and of every state tensor per step: 156 device copies, 3.2 ms of a 49 ms step of the
4-layer Llama-7B shape on an H200. A fusion executor that can write its inputs
(``FusionExecutor.writes_inputs``) takes such a copy into the region (``write_inputs``) when

- no symbol between the region and the copy reads ``x``'s memory through any alias
  (``_memory_shared``): the write now happens where the region runs, no longer where the copy stood;
- the region reads no other alias of ``x`` than ``x`` itself;
- ``x`` and ``t`` have one shape and dtype, and no other copy writes ``x``.

How is the executor's choice; it keeps the copy's meaning. nvFuser writes the value through an output
aliased to the input where one kernel may read and write it, and otherwise copies at the region's
end (``FusionRunner``). The copy stays among the region's subsymbols: the printed trace shows it, and
a region that falls back to torch runs it. The region is tagged ``side_effect`` (DCE keeps it, and
``cuda_graphs.mutated_inputs`` finds the input it writes).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter

from thunder.core.executor import FusionExecutor
from thunder.core.inplace import EAGER_VIEWS, copy_symbol, is_view_symbol
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace

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
    shared = _memory_shared(trace, bound_symbols)
    read_at: dict[str, list[int]] = {}  # per input, where the program reads its memory (ascending)
    for i, b in enumerate(bound_symbols):
        for root in {r for p in b.proxy_args() for r in shared.get(p.name, ())}:
            read_at.setdefault(root, []).append(i)
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
        root = destination.name
        reads = read_at.get(root, [])
        if bisect_right(reads, made_at) < bisect_left(reads, index):  # read between the region and the copy
            continue
        if any(root in shared.get(p.name, ()) and p.name != destination.name for p in region.proxy_args()):
            continue
        taken.setdefault(made_at, []).append(index)
    return taken


def _memory_shared(trace: Trace, bound_symbols: list[BoundSymbol]) -> dict[str, set[str]]:
    """Each proxy -> the trace's inputs whose memory it may share, through views.

    After claiming, a view runs as an operator that no longer says it is one (``ltorch.narrow`` runs
    as ``torch.narrow``, ``prims.transpose`` as ``torch.permute``, ``x.mT`` as ``tensor_mT``), which
    ``alias_roots`` misses: an operator named as a view is one here.
    """
    shared: dict[str, set[str]] = {p.name: {p.name} for p in trace.args if isinstance(p, TensorProxy)}
    for bound_symbol in bound_symbols:
        if not _is_view(bound_symbol.symbol):
            continue
        read = set().union(*(shared.get(p.name, ()) for p in bound_symbol.proxy_args()))
        for proxy in bound_symbol.proxy_outputs() if read else ():
            shared.setdefault(proxy.name, set()).update(read)
    return shared


# views as the prims that torch runs them as (``torch.reshape``, ``slice_prim``), beside eager's names
_OPERATOR_VIEWS = EAGER_VIEWS | {"slice_prim", "broadcast_in_dim", "reshape", "transpose", "expand"}


def _is_view(symbol: Symbol) -> bool:
    if is_view_symbol(symbol):
        return True
    operator = symbol.executor is not None and not isinstance(symbol.executor, FusionExecutor)
    return operator and symbol.name.removeprefix("tensor_").strip("_") in _OPERATOR_VIEWS
