"""Updates that may run as soon as their inputs exist, moved there (``Trace.early_outputs``).

An optimizer step inside the program (``interpreter/optimizers.py``) is recorded after the whole
backward, so every gradient stays alive until the last update. Each update only needs its own
gradient, parameter and state: moved to just after the op that makes the last of its inputs, it runs
while the backward goes on and its gradient is freed there, as issue 24 asks ("an update can run as
soon as its gradient exists, and that gradient is then freed"). The copy-backs of the updated
parameters then follow the last read of their old values (``transforms/copy_backs.py``), so a
parameter the rest of the backward still reads is written only after that read.

The order is: the other ops as they were, each followed by the movable ops whose latest input it makes
(an anchor), in their original order; an input made by another movable op takes that op's anchor.
A movable op that reads only the program's inputs waits for its first reader instead, unless it
computes 0-dim values from 0-dim values alone (an optimizer's step counter, the bias corrections and
step sizes made from it): those run first, together, so that a fusion executor computes every
parameter's in one kernel at the start rather than one beside each update (nvFuser's
``stage_groups.scalars_first_groups``, which splits them off an update so that it writes in place). Their values
are numbers in tensors: alive through the program, they cost nothing.
"""

from __future__ import annotations

from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace
from thunder.core.transforms.common import on_scalars

__all__ = ["place_updates_early"]


def place_updates_early(trace: Trace) -> Trace:
    movable_names = trace.early_outputs
    if not movable_names:
        return trace

    def movable(bound_symbol: BoundSymbol) -> bool:
        outputs = bound_symbol.proxy_outputs()
        return (
            bool(outputs)
            and all(p.name in movable_names for p in outputs)
            and bound_symbol.symbol is not RETURN
        )

    anchor_of_name: dict[str, int] = {}  # proxy name -> index of the fixed op after which it is made
    anchored: dict[int, list[BoundSymbol]] = {}
    fixed: list[BoundSymbol] = []
    for bound_symbol in trace.bound_symbols:
        if movable(bound_symbol):
            anchor = max((anchor_of_name.get(p.name, -1) for p in bound_symbol.proxy_args()), default=-1)
            anchored.setdefault(anchor, []).append(bound_symbol)
        else:
            fixed.append(bound_symbol)
            anchor = len(fixed) - 1
        for proxy in bound_symbol.proxy_outputs():
            anchor_of_name[proxy.name] = anchor
    # ops that read only the program's inputs (a momentum buffer scaled) wait for their first reader:
    # moved to the start they would keep their results alive through the whole program; 0-dim ones
    # do not, and run first
    order = [b for b in anchored.get(-1, []) if on_scalars(b)]
    first = {id(b) for b in order}
    waiting = {p.name: b for b in anchored.get(-1, []) if id(b) not in first for p in b.proxy_outputs()}

    def emit(bound_symbol: BoundSymbol) -> None:
        for proxy in bound_symbol.proxy_args():
            early = waiting.pop(proxy.name, None)
            if early is not None:
                emit(early)
        order.append(bound_symbol)

    for index, bound_symbol in enumerate(fixed):
        emit(bound_symbol)
        for early in anchored.get(index, []):
            emit(early)
    if all(a is b for a, b in zip(order, trace.bound_symbols)):
        return trace  # already where they may run
    new = from_trace(trace, trace.header)
    new.name = trace.name
    new.mutations = trace.mutations
    new.bound_symbols.extend(order)
    return new
