"""Copy-backs as early as they may run: each ``inplace.copy_`` right after the last read of the old value.

Functionalization (``core/inplace.py``) appends one ``inplace.copy_(x, t5)`` per mutated input at the
end of the program, which keeps every new value alive until then. For a training step with its
optimizer inside the program that is a second copy of every parameter and of the optimizer's state
at the peak; a decode step keeps a second copy of each layer's KV cache. Each copy is moved to just
after the later of: the op that makes the new value, and the last op that reads the input's old
value through any alias of it (a view: the copy writes the memory a view reads). Then the lifetimes
pass frees the new value right there.

Aliases are followed through view symbols as functionalization knows them (``inplace.is_view_symbol``:
tagged ``view``, or an eager view such as ``permute``); an op that may alias without saying so would
make a copy move too early, so only those are trusted. The return stays last: outputs see the
written inputs, as before. Nothing moves past a random or side-effecting symbol.
"""

from __future__ import annotations

from thunder.core.inplace import copy_symbol, is_view_symbol
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace

__all__ = ["place_copy_backs", "alias_roots", "BARRIERS"]

BARRIERS = frozenset({"random", "side_effect"})


def place_copy_backs(trace: Trace) -> Trace:
    copy = copy_symbol()
    copies = [b for b in trace.bound_symbols if b.symbol is copy]
    if not copies:
        return trace
    others = [b for b in trace.bound_symbols if b.symbol is not copy and b.symbol is not RETURN]
    returns = [b for b in trace.bound_symbols if b.symbol is RETURN]
    roots = alias_roots(trace, others)
    last_read: dict[str, int] = {}
    made_at: dict[str, int] = {}
    barrier = -1
    for index, bound_symbol in enumerate(others):
        for proxy in bound_symbol.proxy_args():
            root = roots.get(proxy.name)
            if root is not None:
                last_read[root] = index
        for proxy in bound_symbol.proxy_outputs():
            made_at[proxy.name] = index
        if bound_symbol.symbol.tags & BARRIERS:
            barrier = index
    placed: dict[int, list[BoundSymbol]] = {}
    for bound_symbol in copies:
        destination, value = bound_symbol.args[0], bound_symbol.args[1]
        after = max(
            last_read.get(roots.get(destination.name, destination.name), -1),
            made_at.get(value.name, -1),
            barrier,
        )
        placed.setdefault(after, []).append(bound_symbol)
    new = from_trace(trace, trace.header)
    new.name = trace.name
    new.mutations = trace.mutations
    new.bound_symbols.extend(placed.get(-1, []))
    for index, bound_symbol in enumerate(others):
        new.bound_symbols.append(bound_symbol)
        new.bound_symbols.extend(placed.get(index, []))
    new.bound_symbols.extend(returns)
    return new


def alias_roots(
    trace: Trace, bound_symbols: list[BoundSymbol], *, every_tensor: bool = False
) -> dict[str, str]:
    """Each proxy that may share memory with an input of the trace -> that input's name.

    ``every_tensor``: each tensor a non-view symbol makes is a root too (reinplacing asks which proxies
    alias an intermediate value that an in-place op will write into).
    """
    roots = {p.name: p.name for p in trace.args if isinstance(p, TensorProxy)}
    for bound_symbol in bound_symbols:
        base = bound_symbol.args[0] if bound_symbol.args else None
        root = None
        if isinstance(base, TensorProxy) and is_view_symbol(bound_symbol.symbol):
            root = roots.get(base.name)
        for proxy in bound_symbol.proxy_outputs():
            if root is not None:
                roots[proxy.name] = root
            elif every_tensor and isinstance(proxy, TensorProxy):
                roots.setdefault(proxy.name, proxy.name)
    return roots
