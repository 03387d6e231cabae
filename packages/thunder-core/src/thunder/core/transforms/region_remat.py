"""Rematerialization between fusion regions: a region recomputes cheap values instead of reading them.

Every value that leaves a fusion region is written to memory, held until its last reader, and read
back. When a region hands a later region of the same executor values that are cheap elementwise
work on smaller tensors, the later region can recompute them from those tensors. Llama's SwiGLU
backward is the case in point: the backward's first MLP region makes the bf16 product that the
weight-gradient matmul reads and, beside it, four float32 [2, 2048, 11008] upcasts and activations
(720 MB) for the region after that matmul, which the matmul then runs beside. Recomputed from the
two bf16 matmul outputs (180 MB), nothing float32 is held across the matmul, and both regions move
less memory.

Which values to hand over is the minimum cut of ``remat.py``, taken over the producer region's
symbols: a value costs its size unless it exists anyway (the producer outputs it to someone else, or
it is an input of the producer that the consumer reads already or that lives on past it). The
consumer recomputes only elementwise and shape work (never a reduction, a random op or a matmul),
and only when the cut is cheaper than what it hands over now. It never reads a tensor that an
input's write (a copy-back, or an in-place op from ``reinplace.py``) has overwritten by the time the
consumer region may run: the recomputation would see the new value where the original saw the old.
"""

from __future__ import annotations

from thunder.core.executor import FusionExecutor
from thunder.core.inplace import EAGER_VIEWS, is_view_symbol
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.transforms.common import on_scalars, substitute
from thunder.core.transforms.remat import cheapest_cut, recomputation

__all__ = ["recompute_between_regions", "may_view"]

_CHEAP_TAGS = frozenset({"elementwise", "shape"})

Claimed = list[tuple[BoundSymbol, FusionExecutor | None]]
Regions = list[tuple[FusionExecutor, list[int]]]


def _cheap(bound_symbol: BoundSymbol) -> bool:
    tags = bound_symbol.symbol.tags
    return (
        bool(tags & _CHEAP_TAGS)
        and "random" not in tags
        and bound_symbol.symbol.is_leaf
        # 0-dim work (an optimizer's step sizes, computed together at the program's start:
        # early_updates.py) is read, not recomputed: its values cost nothing to hand over, and
        # recomputed beside an update it is a launch of its own in every region that writes a
        # parameter (nvFuser's stage_groups.scalars_first_groups)
        and not on_scalars(bound_symbol)
    )


def _bytes(proxy: TensorProxy) -> int:
    return proxy.numel() * proxy.dtype.itemsize


def recompute_between_regions(
    claimed: Claimed, region_of: list[int | None], regions: Regions, producer_of: dict[str, int]
) -> None:
    """Move cheap work from producer regions into the regions that read it (in place).

    Recomputed symbols are appended to ``claimed`` with fresh output names and put first in their
    consumer region; the consumer reads those names. The producer keeps its symbols (``_emit`` drops
    the ones nobody reads any more).
    """
    readers: dict[str, set[int]] = {}
    for index, (bound_symbol, _) in enumerate(claimed):
        for proxy in bound_symbol.proxy_args():
            readers.setdefault(proxy.name, set()).add(index)
    writes = _Writes(claimed)
    for consumer in range(len(regions)):
        for producer, handed in _handed_over(claimed, region_of, regions, producer_of, consumer).items():
            _recompute_in_consumer(
                claimed, region_of, regions, producer_of, readers, producer, consumer, handed, writes
            )


def may_view(bound_symbol: BoundSymbol) -> bool:
    """Whether its output may share its input's memory; by name too, since an operator executor's
    ``torch.reshape`` no longer carries the ``view`` tag of the symbol it runs."""
    symbol = bound_symbol.symbol
    return (
        is_view_symbol(symbol)
        or symbol.name in EAGER_VIEWS
        or symbol.name in ("slice_prim", "broadcast_in_dim")
    )


class _Writes:
    """Where the program writes memory in place, by alias root (views and in-place outputs share it)."""

    def __init__(self, claimed: Claimed):
        self.roots: dict[str, str] = {}
        self.positions: dict[str, list[int]] = {}
        for index, (bound_symbol, _) in enumerate(claimed):
            base = bound_symbol.args[0] if bound_symbol.args else None
            if not isinstance(base, TensorProxy):
                continue
            root = self.roots.get(base.name, base.name)
            writes = bound_symbol.symbol.id == "inplace.copy_" or "writes_input" in bound_symbol.symbol.tags
            if writes:
                self.positions.setdefault(root, []).append(index)
            if writes or may_view(bound_symbol):
                for proxy in bound_symbol.proxy_outputs():
                    self.roots[proxy.name] = root

    def overwritten_before(self, names: set[str], position: int) -> bool:
        """Whether one of ``names`` shares memory that a write before ``position`` overwrote."""
        return any(w < position for name in names for w in self.positions.get(self.roots.get(name, name), ()))


def _handed_over(
    claimed: Claimed,
    region_of: list[int | None],
    regions: Regions,
    producer_of: dict[str, int],
    consumer: int,
) -> dict[int, list[TensorProxy]]:
    """The tensors each earlier region of the same executor hands to ``consumer``, by region."""
    executor, members = regions[consumer]
    handed: dict[int, dict[str, TensorProxy]] = {}
    for index in members:
        for proxy in claimed[index][0].proxy_args():
            source = producer_of.get(proxy.name)
            region = region_of[source] if source is not None else None
            if region is None or region == consumer or regions[region][0] is not executor:
                continue
            if isinstance(proxy, TensorProxy):
                handed.setdefault(region, {})[proxy.name] = proxy
    return {region: list(tensors.values()) for region, tensors in handed.items()}


def _recompute_in_consumer(
    claimed: Claimed,
    region_of: list[int | None],
    regions: Regions,
    producer_of: dict[str, int],
    readers: dict[str, set[int]],
    producer: int,
    consumer: int,
    handed: list[TensorProxy],
    writes: _Writes,
) -> None:
    producer_members, consumer_members = set(regions[producer][1]), set(regions[consumer][1])
    symbols = [claimed[i][0] for i in regions[producer][1]]
    made_here = {p.name for b in symbols for p in b.proxy_outputs()}
    consumer_reads = {p.name for i in consumer_members for p in claimed[i][0].proxy_args()}
    consumer_start = min(consumer_members)

    def exists_anyway(name: str) -> bool:
        others = readers.get(name, set()) - producer_members - consumer_members
        if name in made_here:
            return bool(others)  # the producer outputs it to someone else
        return name in consumer_reads or any(i > consumer_start for i in others)

    needed = [p for p in handed if not exists_anyway(p.name)]
    if not needed:
        return

    def weight(proxy: TensorProxy) -> int:
        return 0 if exists_anyway(proxy.name) else _bytes(proxy)

    producers = {p.name: b for b in symbols for p in b.proxy_outputs()}
    cut = cheapest_cut(symbols, producers, needed, weight, _cheap)
    if sum(weight(p) for p in cut) >= sum(_bytes(p) for p in needed):
        return
    recomputed = recomputation(cut, needed, producers, symbols)
    # a region that begins after a write is emitted after it (``_emit``): it must not read what it wrote
    if writes.overwritten_before({p.name for b in recomputed for p in b.proxy_args()}, consumer_start):
        return
    executor = regions[consumer][0]
    region_symbols = [claimed[i][0] for i in regions[consumer][1]]
    if not _joins(executor, recomputed, region_symbols):
        return
    _add_recomputation(claimed, region_of, regions, producer_of, readers, consumer, recomputed)


def _joins(executor: FusionExecutor, recomputed: list[BoundSymbol], region: list[BoundSymbol]) -> bool:
    """Whether the consumer region takes the recomputed symbols, and its members that read them
    still agree to be in it (nvFuser refuses a reshape of an expanding broadcast made in its region)."""
    if not all(executor.can_join(region, b) for b in recomputed):
        return False
    made = {p.name for b in recomputed for p in b.proxy_outputs()}
    readers = [b for b in region if any(p.name in made for p in b.proxy_args())]
    return all(executor.can_join([*recomputed, *region], b) for b in readers)


def _add_recomputation(
    claimed: Claimed,
    region_of: list[int | None],
    regions: Regions,
    producer_of: dict[str, int],
    readers: dict[str, set[int]],
    consumer: int,
    recomputed: list[BoundSymbol],
) -> None:
    executor, members = regions[consumer]
    renames: dict[str, Proxy] = {}
    copies: list[int] = []
    for bound_symbol in recomputed:
        for output in bound_symbol.proxy_outputs():
            assert isinstance(output, TensorProxy)
            renames[output.name] = output.replace()  # a fresh name, in the trace being built
        copy = substitute(bound_symbol, renames)
        index = len(claimed)
        claimed.append((copy, executor))
        region_of.append(consumer)
        copies.append(index)
        for proxy in copy.proxy_args():
            readers.setdefault(proxy.name, set()).add(index)
        for proxy in copy.proxy_outputs():
            producer_of[proxy.name] = index
    for index in members:
        bound_symbol = claimed[index][0]
        if not any(p.name in renames for p in bound_symbol.proxy_args()):
            continue
        renamed = substitute(bound_symbol, renames)
        claimed[index] = (renamed, executor)
        _retarget_readers(readers, index, bound_symbol, renamed)
    members[:0] = copies  # the recomputation reads only what exists before the region


def _retarget_readers(readers: dict[str, set[int]], index: int, old: BoundSymbol, new: BoundSymbol) -> None:
    for proxy in old.proxy_args():
        readers.get(proxy.name, set()).discard(index)
    for proxy in new.proxy_args():
        readers.setdefault(proxy.name, set()).add(index)
