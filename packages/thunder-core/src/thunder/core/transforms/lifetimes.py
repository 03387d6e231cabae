"""Free intermediates at their last use by inserting ``del [t0, ...]`` statements."""

from __future__ import annotations

from thunder.core.proxies import Proxy
from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace

__all__ = ["insert_deletes"]


def insert_deletes(trace: Trace) -> Trace:
    """Delete each proxy after the bound symbol that uses it last.

    Outputs stay, and so do inputs unless the trace takes its inputs in a list that it empties
    (``Trace.takes_argument_list``): only then is a ``del`` of an input the last reference to it.
    """
    keep = set() if trace.takes_argument_list else {p.name for p in trace.args}
    last_use: dict[str, int] = {}
    for index, bound_symbol in enumerate(trace.bound_symbols):
        if bound_symbol.symbol is RETURN:
            keep.update(p.name for p in bound_symbol.proxy_args())
            continue
        for proxy in bound_symbol.proxy_args() + bound_symbol.proxy_outputs():
            last_use[proxy.name] = index
    dying: dict[int, dict[str, Proxy]] = {}
    for index, bound_symbol in enumerate(trace.bound_symbols):
        for proxy in bound_symbol.proxy_args() + bound_symbol.proxy_outputs():
            if last_use.get(proxy.name) == index and proxy.name not in keep:
                dying.setdefault(index, {})[proxy.name] = proxy
    # No header: this is the execution trace, the program that runs, and it prints as that program
    # alone, without a comment naming the last pass as if it were the program's title.
    new = from_trace(trace)
    for index, bound_symbol in enumerate(trace.bound_symbols):
        new.bound_symbols.append(bound_symbol)
        if dying.get(index):
            new.bound_symbols.append(
                BoundSymbol(DEL, tuple(dying[index][name] for name in sorted(dying[index])))
            )
    return new
