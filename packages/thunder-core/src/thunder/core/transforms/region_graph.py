"""Which fusion regions reach which, with each region counted as one node: so that no join makes a cycle.

Regions are built in program order: a symbol joins a region or opens one. Once the program runs,
a region is one node that runs all of its members at once, so what matters is reachability in
the program whose regions are contracted to single nodes. That is not reachability between
symbols: a region can be entered through a late member and left through an early one. HF Llama's
training step had one: region A held the causal mask (early) and, later, a softmax; the softmax
read a matmul of rotary values from region B; B had, after that, also taken in a conversion
that read a value computed, through matmuls, from A's mask. Each join looked safe symbol by
symbol, and together they formed A -> B -> A.

``RegionGraph`` keeps, per region, the set of regions with a path to it (its ancestors, a bit
set), and per symbol outside regions, the regions that feed it directly or through other outside
symbols (which never changes once the symbol is placed). A symbol may join region R when R is
not an ancestor of any of its producers outside R; after the join, R's new ancestors are handed
to every region R reaches.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["RegionGraph"]


class RegionGraph:
    def __init__(self) -> None:
        self._ancestors: list[int] = []  # per region: bit r set when region r has a path to it
        self._feeds: list[int] = []  # per placed symbol: the regions that feed it (its own, if in one)

    def new_region(self) -> int:
        self._ancestors.append(0)
        return len(self._ancestors) - 1

    def reaches_any(self, region: int, producers: Iterable[int], region_of: list[int | None]) -> bool:
        """Whether ``region`` has a path to one of ``producers`` outside it: joining would close a cycle."""
        bit = 1 << region
        return any(region_of[p] != region and self._upstream(p) & bit for p in producers)

    def place(
        self,
        index: int,
        region: int | None,
        producers: Iterable[int],
        region_of: list[int | None],
        *,
        after_every_region: bool = False,
    ) -> None:
        """Record symbol ``index`` (the next one) in ``region`` (or outside regions, for None).

        ``after_every_region``: it runs after every region begun so far (an in-place op that has an
        output, ordered like a copy-back), so nothing that reads its output may join one of those.
        """
        assert index == len(self._feeds)
        feeding = (1 << len(self._ancestors)) - 1 if after_every_region and region is None else 0
        for p in producers:
            if region is None or region_of[p] != region:
                feeding |= self._upstream(p)
        if region is None:
            self._feeds.append(feeding)
            return
        self._feeds.append(1 << region)
        new = feeding & ~self._ancestors[region]
        if not new:
            return
        bit = 1 << region
        for r, ancestors in enumerate(self._ancestors):  # the region and every region it reaches
            if r == region or ancestors & bit:
                self._ancestors[r] = ancestors | new

    def _upstream(self, index: int) -> int:
        """The regions with a path to symbol ``index``, the region holding it included."""
        feeds, upstream = self._feeds[index], self._feeds[index]
        while feeds:
            low = feeds & -feeds
            upstream |= self._ancestors[low.bit_length() - 1]
            feeds ^= low
        return upstream
