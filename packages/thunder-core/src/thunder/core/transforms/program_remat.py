"""Rematerialization inside one program: a training step that runs ``loss.backward()`` itself.

Such a step is one trace (``inline_backward.py``), never split into a forward and a backward, so
``remat.py`` never sees it, and every forward value the backward reads stays alive from where the
forward makes it to where the backward last reads it. Here the same minimum cut (``remat.py``) is
taken over the program's forward, the symbols recorded before its ``backward`` (their outputs are
``Trace.made_before_backward``): the values the rest of the program reads are needed, a value costs
its size unless it is an input of the program, and cheap ops (the ``rematerialization`` option's
predicate, as for the autograd path) may be recomputed. The recomputed ops are copied with fresh
names, each placed just before the first op after the forward that reads what it makes.

Llama's SwiGLU is the case in point: the backward reads both gate matmuls' outputs and their product
``silu(a) * b`` (w2's weight gradient); the autograd path saves the two and recomputes the product,
the one program kept all three (3 x 86 MiB a layer at the benchmark's shape).

Not recomputed: an op that reads memory the program writes in place anywhere (an input copied back
to, a view of one): a recomputation placed later could read the new value where the original read
the old. Programs that call ``backward`` more than once are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from thunder.core.inplace import copy_symbol
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import made_by_forward, substitute
from thunder.core.transforms.dce import dce
from thunder.core.transforms.region_remat import may_view
from thunder.core.transforms.remat import cheapest_cut, placed_before_use, recomputation

__all__ = ["rematerialize_program"]


def rematerialize_program(trace: Trace, recomputable: Callable[[BoundSymbol], bool] | None) -> Trace:
    of_forward = made_by_forward(trace)
    if recomputable is None or of_forward is None:
        return trace
    symbols = list(trace.bound_symbols)
    boundary = next(
        (i for i, b in enumerate(symbols) if b.proxy_outputs() and not of_forward(b)), len(symbols)
    )
    forward, later = symbols[:boundary], symbols[boundary:]
    producers = {p.name: b for b in forward for p in b.proxy_outputs()}
    needed = list(
        {
            p.name: p
            for b in later
            for p in b.proxy_args()
            if isinstance(p, TensorProxy) and p.name in producers
        }.values()
    )
    if not needed:
        return trace
    written = _written_memory(symbols)
    allowed = lambda b: recomputable(b) and not _reads(b, written)  # noqa: E731
    inputs = {p.name for p in trace.args if isinstance(p, TensorProxy)}
    returned = {p.name for b in later if b.symbol is RETURN for p in b.proxy_args()}

    def weight(proxy: TensorProxy) -> int:
        return 0 if proxy.name in inputs or proxy.name in returned else proxy.numel() * proxy.dtype.itemsize

    cut = cheapest_cut(forward, producers, needed, weight, allowed)
    if sum(weight(p) for p in cut) >= sum(weight(p) for p in needed):
        return trace
    recomputed = recomputation(cut, needed, producers, forward, allowed)
    new = from_trace(trace)
    with tracectx(new):
        renames = _fresh_names(recomputed)
    if renames is None:
        return trace
    copies = [substitute(b, renames) for b in recomputed]
    renamed_later = [substitute(b, renames) for b in later]
    new.bound_symbols.extend(forward)
    new.bound_symbols.extend(placed_before_use(copies, renamed_later))
    result = dce(new)
    result.header = (
        f"Rematerialization in the program: the backward recomputes {len(recomputed)} forward ops from "
        f"{len(cut)} values ({sum(weight(p) for p in cut)} bytes) instead of reading {len(needed)} "
        f"({sum(weight(p) for p in needed)} bytes)"
    )
    return result


def _fresh_names(recomputed: list[BoundSymbol]) -> dict[str, Proxy] | None:
    """A fresh proxy for every value the copies make, their decompositions' included: a name is made
    once in a program (region formation finds a value's producer by its name). None where one of
    them makes a value other than a tensor (a number), which is not recomputed."""
    renames: dict[str, Proxy] = {}

    def rename(bound_symbol: BoundSymbol) -> bool:
        read = {p.name for p in bound_symbol.proxy_args()}
        for proxy in bound_symbol.proxy_outputs():
            if proxy.name in renames or proxy.name in read:
                continue
            if not isinstance(proxy, TensorProxy):
                return False
            renames[proxy.name] = proxy.replace()
        return all(rename(sub) for sub in bound_symbol.subsymbols)

    if not all(rename(b) for b in recomputed):
        return None
    return renames


def _written_memory(symbols: list[BoundSymbol]) -> set[str]:
    """Names of values whose memory the program writes in place: each written tensor, what it is a
    view of, and every view of those (views by symbol, as region_remat.py finds them)."""
    copy = copy_symbol()
    root: dict[str, str] = {}
    for b in symbols:
        base = b.args[0] if b.args else None
        if isinstance(base, TensorProxy) and may_view(b):
            for proxy in b.proxy_outputs():
                root[proxy.name] = root.get(base.name, base.name)
    written_roots = {
        root.get(b.args[0].name, b.args[0].name)
        for b in symbols
        if (b.symbol is copy or "writes_input" in b.symbol.tags)
        and b.args
        and isinstance(b.args[0], TensorProxy)
    }
    names = {name for name, r in root.items() if r in written_roots}
    return names | written_roots


def _reads(bound_symbol: BoundSymbol, names: set[str]) -> bool:
    return any(p.name in names for p in bound_symbol.proxy_args())
