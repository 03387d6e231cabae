"""Hand each bound symbol to the first executor that claims it; decompose what nobody claims.

Operator executors lower a claimed symbol to their own operators on the spot. Symbols claimed by
a fusion executor are flattened to the leaves it fuses and marked; afterwards each run of
neighbouring marked symbols of one fusion executor becomes a single region bound symbol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thunder.core.executor import Executor, FusionExecutor, OperatorExecutor, get_default_executors
from thunder.core.fusion_fallback import with_fallback
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.symbolic_shapes import DimProxy, has_symbolic_sizes
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import made_by_forward
from thunder.core.transforms.region_graph import RegionGraph
from thunder.core.transforms.region_moves import move_parts_between_regions
from thunder.core.transforms.region_remat import recompute_between_regions

__all__ = [
    "claim_executors",
    "operator_callable",
    "UnclaimedSymbolError",
    "fused_by",
    "claiming_operator",
    "reads_symbols",
]

_STRUCTURAL = (RETURN, DEL)


class UnclaimedSymbolError(NotImplementedError):
    pass


def claim_executors(trace: Trace, executors: Sequence[Executor]) -> Trace:
    new = from_trace(trace, "Transform for execution")
    # a fusion definition is built for one shape: with symbolic sizes, an op that reads a symbolic size
    # or number runs on the operator executors; the ops of static sizes around it are fused as usual
    # (a decode step's norms and MLP, beside its attention over a growing cache)
    operators_only = [e for e in executors if not isinstance(e, FusionExecutor)]
    symbolic = has_symbolic_sizes(trace) and len(operators_only) < len(executors)
    if symbolic:
        names = ", ".join(e.name for e in executors if isinstance(e, FusionExecutor))
        new.header += f" (symbolic sizes: ops that read them not given to {names})"
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]] = []
    of_forward = made_by_forward(trace)
    forward_pieces: set[int] | None = None if of_forward is None else set()  # with a backward in the program
    with tracectx(new):
        ordered: set[int] = set()  # pieces that draw random numbers or seed: they keep program order
        for bound_symbol in trace.bound_symbols:
            chosen = operators_only if symbolic and reads_symbols(bound_symbol) else executors
            pieces = _claim(bound_symbol, chosen)
            if _draws(bound_symbol):
                ordered.update(len(claimed) + i for i, (_, fuser) in enumerate(pieces) if fuser is None)
            if forward_pieces is not None and of_forward is not None and of_forward(bound_symbol):
                forward_pieces.update(range(len(claimed), len(claimed) + len(pieces)))
            claimed += pieces
        operators = [e for e in executors if isinstance(e, OperatorExecutor)]
        new.bound_symbols.extend(_fuse_regions(claimed, operators, _chain(claimed, ordered), forward_pieces))
    return new


def operator_callable(
    name: str, args: Sequence[Proxy], bound_symbols: Sequence[BoundSymbol], result: object
) -> Callable:
    """``bound_symbols`` as a function of ``args`` returning ``result``, run by the default operator
    executors (torch): a fusion region's fallback, a value computed at compile time."""
    trace = Trace(name)
    trace.args = list(args)  # called positionally
    for bound_symbol in bound_symbols:
        trace.names.update(p.name for p in (*bound_symbol.proxy_args(), *bound_symbol.proxy_outputs()))
    trace.names.update(p.name for p in args)
    with tracectx(trace):
        trace.bound_symbols.extend(bound_symbols)
        trace.bound_symbols.append(BoundSymbol(RETURN, (result,)))
    # the defaults hold a fusion executor on CUDA machines (nvFuser): operator executors only
    operators = [e for e in get_default_executors() if not isinstance(e, FusionExecutor)]
    return claim_executors(trace, operators).python_callable()


def _draws(bound_symbol: BoundSymbol) -> bool:
    """Whether running it draws random numbers or reseeds (a random prim somewhere inside)."""
    return "random" in bound_symbol.symbol.tags or any(_draws(sub) for sub in bound_symbol.subsymbols)


def _chain(claimed: list[tuple[BoundSymbol, FusionExecutor | None]], ordered: set[int]) -> dict[int, int]:
    """Each random piece -> the random piece before it, a dependence that data does not show: the
    generator's state. Regions are formed and placed around it, so a draw never moves past a reseed
    or another draw (fusion executors claim no random prim, so these pieces are never in a region)."""
    chain: dict[int, int] = {}
    previous: int | None = None
    for index, (bound_symbol, fuser) in enumerate(claimed):
        if index in ordered or (fuser is None and "random" in bound_symbol.symbol.tags):
            if previous is not None:
                chain[index] = previous
            previous = index
    return chain


def _claim(
    bound_symbol: BoundSymbol, executors: Sequence[Executor]
) -> list[tuple[BoundSymbol, FusionExecutor | None]]:
    if bound_symbol.symbol in _STRUCTURAL or "python" in bound_symbol.symbol.tags:  # runs as printed
        return [(bound_symbol, None)]
    claimer = _claimer(bound_symbol, executors)
    if isinstance(claimer, OperatorExecutor):
        return [(lowered, None) for lowered in claimer.lower(bound_symbol)]
    if isinstance(claimer, FusionExecutor):
        return [(leaf, claimer) for leaf in _fusible_leaves(bound_symbol, claimer)]
    # decomposed: unclaimed, or left to a fusion executor that takes the parts it can fuse (_DEFERRED)
    if not bound_symbol.symbol.is_leaf:  # an empty decomposition returned its input: nothing to run
        return [pair for sub in bound_symbol.subsymbols for pair in _claim(sub, executors)]
    names = ", ".join(e.name for e in executors)
    raise UnclaimedSymbolError(
        f"no executor can run {bound_symbol.symbol.id} and it has no decomposition (executors tried: {names})"
    )


# an operator executor's implementation left decomposed for a fusion executor listed first
_DEFERRED = "deferred to fusion"


def _claimer(bound_symbol: BoundSymbol, executors: Sequence[Executor]) -> Executor | str | None:
    """Who takes ``bound_symbol`` whole: an operator executor (one call), a fusion executor (its
    fusible leaves), ``_DEFERRED`` (an operator executor's implementation leaves it decomposed for
    a fusion executor listed first, ``defers_to_fusion``), or None (nobody: decomposed). One order of
    decisions for ``_claim``, ``fused_by`` and ``claiming_operator``."""
    kernel = _kernel_over_fusion(bound_symbol, executors)
    if kernel is not None:
        return kernel
    for position, executor in enumerate(executors):
        if not executor.can_execute(bound_symbol):
            continue
        if isinstance(executor, OperatorExecutor):
            if executor.defers_to_fusion(bound_symbol) and _fusion_takes_part(
                bound_symbol, executors[:position]
            ):
                return _DEFERRED
            return executor
        if isinstance(executor, FusionExecutor):
            return executor
    return None


def fused_by(bound_symbol: BoundSymbol, executors: Sequence[Executor]) -> bool:
    """Whether claiming would hand ``bound_symbol`` (or, unclaimed, all its parts) to a fusion executor.

    The same decisions as ``_claim`` (``_claimer``), without lowering anything: rematerialization asks
    it before the executors run, since only fused work is cheap to recompute."""
    if reads_symbols(bound_symbol):
        return False  # ``claim_executors`` gives it to the operator executors
    claimer = _claimer(bound_symbol, executors)
    if claimer is None:
        return bool(bound_symbol.subsymbols) and all(
            fused_by(sub, executors) for sub in bound_symbol.subsymbols
        )
    return claimer is _DEFERRED or isinstance(claimer, FusionExecutor)


def claiming_operator(bound_symbol: BoundSymbol, executors: Sequence[Executor]) -> OperatorExecutor | None:
    """The operator executor that claiming would run ``bound_symbol`` on as one call, if one would
    (``_claimer``); None where a fusion executor or a decomposition would take it."""
    if reads_symbols(bound_symbol):  # ``claim_executors`` gives it to the operator executors
        executors = [e for e in executors if not isinstance(e, FusionExecutor)]
    claimer = _claimer(bound_symbol, executors)
    return claimer if isinstance(claimer, OperatorExecutor) else None


def reads_symbols(bound_symbol: BoundSymbol) -> bool:
    """Whether ``bound_symbol`` (or a piece of its decomposition) has a tensor of a symbolic size, or
    a symbolic size or int among its arguments (``core/symbolic_shapes.py``): no fusion definition of
    one shape can run it. Other number inputs (a learning rate) are not symbolic sizes."""
    for value in tree_leaves((bound_symbol.args, bound_symbol.kwargs, bound_symbol.output)):
        if isinstance(value, TensorProxy):
            if any(type(size) is not int for size in value.shape):
                return True
        elif isinstance(value, DimProxy) or type(value).__name__ in _SYMBOLIC_NUMBERS:
            return True
    return any(reads_symbols(sub) for sub in bound_symbol.subsymbols)


_SYMBOLIC_NUMBERS = frozenset({"SymInt", "SymFloat", "SymBool"})


def _kernel_over_fusion(bound_symbol: BoundSymbol, executors: Sequence[Executor]) -> OperatorExecutor | None:
    """The operator executor whose kernel for ``bound_symbol`` beats fusing it
    (``register_implementation``'s ``beats_fusion``), when a fusion executor comes before it and no
    other operator executor does that claims the symbol; else None (the list's order decides)."""
    # a dict lookup per executor first: the checkers run only for a symbol some kernel is marked for
    if not any(isinstance(e, OperatorExecutor) and e.beats_fusion(bound_symbol) for e in executors):
        return None
    if not any(isinstance(e, FusionExecutor) for e in executors):
        return None
    seen_fusion = False
    for executor in executors:
        if isinstance(executor, FusionExecutor):
            seen_fusion = True
        elif isinstance(executor, OperatorExecutor) and executor.can_execute(bound_symbol):
            return executor if seen_fusion and executor.beats_fusion(bound_symbol) else None
    return None


def _fusion_takes_part(bound_symbol: BoundSymbol, earlier: Sequence[Executor]) -> bool:
    fusers = [e for e in earlier if isinstance(e, FusionExecutor)]
    return any(_fuses_some(bound_symbol, fuser) for fuser in fusers)


def _fuses_some(bound_symbol: BoundSymbol, fuser: FusionExecutor) -> bool:
    if fuser.can_fuse(bound_symbol):
        return True
    return any(_fuses_some(sub, fuser) for sub in bound_symbol.subsymbols)


def _fusible_leaves(bound_symbol: BoundSymbol, executor: FusionExecutor) -> list[BoundSymbol]:
    if not bound_symbol.symbol.is_leaf and not bound_symbol.subsymbols:
        return []  # returns its input: nothing to run
    if executor.can_fuse(bound_symbol) or not bound_symbol.subsymbols:
        return [bound_symbol]
    return [leaf for sub in bound_symbol.subsymbols for leaf in _fusible_leaves(sub, executor)]


def _fuse_regions(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    operators: Sequence[Executor] = (),
    chain: dict[int, int] | None = None,
    forward_pieces: set[int] | None = None,
) -> list[BoundSymbol]:
    """Group each fusion executor's symbols into regions by data dependence, never making a cycle.

    A symbol joins a region of its executor unless that region already has a path to one of the
    symbol's producers (through other symbols or regions, see ``region_graph``): the join would
    close a cycle. It prefers the region of a producer (vertical fusion), else the executor's latest
    region (horizontal fusion of independent work), else it opens a new one. Regions are then
    placed in a topological order of the program, each at the earliest place its inputs allow.

    ``forward_pieces``: in a program that ran ``loss.backward()`` itself, the pieces of its forward.
    Other work (the backward's, the optimizer's) never joins a region holding forward work, nor moves
    into one (``region_moves.py``): it would run in the forward, and what it makes would stay alive
    until the backward reads it. A recomputation of a saved value (``program_remat.py``) joined the
    forward's region that reads the same tensors: that undid the recomputation, kept one more tensor
    alive per layer, and the regions waiting for it let the optimizer's state be allocated early.
    """
    region_of: list[int | None] = []  # per claimed symbol
    regions: list[tuple[FusionExecutor, list[int]]] = []
    members: list[list[BoundSymbol]] = []  # per region, its symbols (what ``can_join`` is asked about)
    latest_region: dict[str, int] = {}
    producer_of: dict[str, int] = {}
    graph = RegionGraph()

    chain = chain or {}
    for index, (bound_symbol, executor) in enumerate(claimed):
        producers = sorted(
            {producer_of[p.name] for p in bound_symbol.proxy_args() if p.name in producer_of}
            | ({chain[index]} if index in chain else set())
        )
        chosen: int | None = None
        if executor is not None:
            candidates = [r for p in reversed(producers) if (r := region_of[p]) is not None]
            candidates = [r for r in candidates if regions[r][0] is executor]
            if forward_pieces is not None and index not in forward_pieces:
                candidates = [r for r in candidates if forward_pieces.isdisjoint(regions[r][1])]
            if executor.name in latest_region:
                candidates.append(latest_region[executor.name])
            chosen = next(
                (
                    r
                    for r in candidates
                    if not graph.reaches_any(r, producers, region_of)
                    and executor.can_join(members[r], bound_symbol)
                ),
                None,
            )
            if chosen is None:
                chosen = graph.new_region()
                regions.append((executor, []))
                members.append([])
            regions[chosen][1].append(index)
            members[chosen].append(bound_symbol)
            latest_region[executor.name] = chosen
        # an in-place op runs after every node begun before it (``_emit``), as a copy-back does; unlike
        # a copy-back it has an output, and what reads that must not join a region begun before it
        ordered_after = "side_effect" in bound_symbol.symbol.tags and bool(bound_symbol.proxy_outputs())
        graph.place(index, chosen, producers, region_of, after_every_region=ordered_after)
        region_of.append(chosen)
        for proxy in bound_symbol.proxy_outputs():
            producer_of[proxy.name] = index
    recompute_between_regions(claimed, region_of, regions, producer_of)
    _peel_leading_views(claimed, region_of, regions, operators, producer_of)
    _peel_escaping_views(claimed, region_of, regions, operators, producer_of)
    nodes = move_parts_between_regions(claimed, region_of, regions, producer_of, chain, forward_pieces)
    return _emit(claimed, region_of, regions, producer_of, chain, nodes)


# Shape ops that PyTorch runs as views (no copy) of a contiguous input.
_VIEWS = frozenset({"reshape", "transpose", "broadcast_in_dim", "slice_prim"})


def _peel_escaping_views(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    regions: list[tuple[FusionExecutor, list[int]]],
    operators: Sequence[Executor],
    producer_of: dict[str, int],
) -> None:
    """Views whose results only leave their region run outside it, as views, by an operator executor.

    A fusion region writes each of its outputs to fresh memory: a region ending in the transpose
    that a matmul reads would write a transposed copy (GPT-2's logits gradient: 1.5 GB), and one
    whose output is a reshape of its input copies the input. Outside the region the view costs
    nothing, and the region outputs (at most) the tensor it is a view of. Except a reshape of a
    transpose, broadcast or slice made in the region: outside, that reshape of a non-contiguous
    tensor copies (Llama's query and key gradients, permuted back to [B, T, C] after the rotary
    backward: 1 ms per step of copies); inside, the region writes its result contiguously.
    """
    if not operators:
        return
    readers: dict[str, set[int]] = {}
    for index, (bound_symbol, _) in enumerate(claimed):
        for proxy in bound_symbol.proxy_args():
            readers.setdefault(proxy.name, set()).add(index)

    def escapes(index: int, region: int) -> bool:
        bound_symbol = claimed[index][0]
        if bound_symbol.symbol.name not in _VIEWS or bound_symbol.symbol.module != "prims":
            return False
        names = [p.name for p in bound_symbol.proxy_outputs()]
        consumers = set().union(*(readers.get(name, set()) for name in names))
        if not consumers or any(region_of[c] == region for c in consumers):
            return False  # unused, or read inside the region: stays
        # a reshape of a view made in the region would copy outside; inside, the region writes it
        return not _reshapes_a_view_made_in(bound_symbol, region, claimed, region_of, producer_of)

    _move_out_of_regions(claimed, region_of, regions, operators, escapes, last_first=True)


def _move_out_of_regions(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    regions: list[tuple[FusionExecutor, list[int]]],
    operators: Sequence[Executor],
    chosen: Callable[[int, int], bool],
    *,
    last_first: bool,
) -> None:
    """Hand each region symbol that ``chosen(index, region)`` picks to the operator executor that
    claims it, until no more is picked (moving one out can make its neighbour a candidate)."""
    changed = True
    while changed:
        changed = False
        for region, (_, members) in enumerate(regions):
            for index in list(reversed(members)) if last_first else list(members):
                if not chosen(index, region):
                    continue
                lowered = _claim(claimed[index][0], operators)
                if len(lowered) != 1 or lowered[0][1] is not None:
                    continue
                claimed[index] = lowered[0]
                region_of[index] = None
                members.remove(index)
                changed = True


def _peel_leading_views(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    regions: list[tuple[FusionExecutor, list[int]]],
    operators: Sequence[Executor],
    producer_of: dict[str, int],
) -> None:
    """Transposes and dim-splitting reshapes of a region's inputs run before it, as views.

    They are views whatever the input's strides, so outside they cost nothing, and the region
    reads the viewed tensor directly: the rotary embedding slices its input instead of a permuted
    reshape of it, which nvFuser's schedulers reject (its slice must read a fusion input, and the
    fusion is segmented at seconds of compile time per region).
    """
    if not operators:
        return

    def leads(index: int, region: int) -> bool:
        bound_symbol = claimed[index][0]
        if not _is_view_of_any_layout(bound_symbol):
            return False
        source = producer_of.get(bound_symbol.args[0].name)
        return source is None or region_of[source] != region  # not computed in the region

    _move_out_of_regions(claimed, region_of, regions, operators, leads, last_first=False)


def _is_view_of_any_layout(bound_symbol: BoundSymbol) -> bool:
    """A transpose, or a reshape that only splits dims and inserts or removes size-1 dims."""
    if bound_symbol.symbol.module != "prims":
        return False
    if bound_symbol.symbol.name == "transpose":
        return True
    if bound_symbol.symbol.name != "reshape":
        return False
    old, new = bound_symbol.args[0].shape, tuple(bound_symbol.args[1])
    position = 0
    for size in old:
        if size == 1:
            continue
        product = 1
        while product < size and position < len(new):
            product *= new[position]
            position += 1
        if product != size:
            return False
    return all(size == 1 for size in new[position:])


def _reshapes_a_view_made_in(
    bound_symbol: BoundSymbol,
    region: int,
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    producer_of: dict[str, int],
) -> bool:
    """Whether ``bound_symbol`` reshapes a non-contiguous view of data the region computes.

    A view chain that starts at a region input stays peeled: outside, it is a view of that input
    (cuDNN's attention gradients, permuted back, reshape without a copy), inside it would be a copy.
    """
    if bound_symbol.symbol.name != "reshape":
        return False
    source = producer_of.get(bound_symbol.args[0].name)
    if (
        source is None
        or region_of[source] != region
        or claimed[source][0].symbol.name not in _VIEWS - {"reshape"}
    ):
        return False
    while claimed[source][0].symbol.name in _VIEWS:  # down to the data the views look at
        source = producer_of.get(claimed[source][0].args[0].name)
        if source is None or region_of[source] != region:
            return False
    return True


Node = tuple[str, int]  # ("region", region) or ("symbol", index in claimed)


def node_dependencies(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    producer_of: dict[str, int],
    chain: dict[int, int],
) -> tuple[dict[Node, list[int]], dict[Node, set[Node]]]:
    """The program with each region as one node: each node's members (indices in ``claimed``, in
    order) and the nodes it must run after (data, the random generator's chain, side effects)."""
    node_of = [("region", r) if r is not None else ("symbol", i) for i, r in enumerate(region_of)]
    members: dict[Node, list[int]] = {}
    for index, node in enumerate(node_of):
        members.setdefault(node, []).append(index)
    dependencies: dict[Node, set[Node]] = {node: set() for node in members}
    for index, (bound_symbol, _) in enumerate(claimed):
        for proxy in bound_symbol.proxy_args():
            producer = producer_of.get(proxy.name)
            # a symbol recomputed for a region is appended after the program (region_remat.py), and one
            # peeled out of that region again is a node of its own that the region reads: later in
            # ``claimed``, still a dependency (it was emitted after the return)
            if producer is not None and node_of[producer] != node_of[index]:
                dependencies[node_of[index]].add(node_of[producer])
    for index, previous in chain.items():
        if node_of[previous] != node_of[index]:
            dependencies[node_of[index]].add(node_of[previous])
    # A side effect (an input's copy-back, placed after the last read of its old value) runs after every
    # node that begins before it: a region holding an earlier reader is emitted once all its inputs
    # exist, which may be later, and must still read the old value. Each side effect depends on the one
    # before it and on the nodes begun since (the rest follows): every node for every side effect was
    # quadratic, 1.4 s of a whole GPT-2 training step's compile with its 592 copy-backs.
    starts = sorted((m[0], n) for n, m in members.items())
    cursor, last_effect = 0, None
    for index, (bound_symbol, _) in enumerate(claimed):
        if "side_effect" in bound_symbol.symbol.tags:
            node = node_of[index]
            begun = []
            while cursor < len(starts) and starts[cursor][0] < index:
                begun.append(starts[cursor][1])
                cursor += 1
            if last_effect is not None:
                begun.append(last_effect)
            dependencies[node].update(n for n in begun if n != node)
            last_effect = node
    return members, dependencies


def _emit(
    claimed: list[tuple[BoundSymbol, FusionExecutor | None]],
    region_of: list[int | None],
    regions: list[tuple[FusionExecutor, list[int]]],
    producer_of: dict[str, int],
    chain: dict[int, int],
    nodes: tuple[dict[Node, list[int]], dict[Node, set[Node]]] | None = None,
) -> list[BoundSymbol]:
    """The program with each region as one node, in a topological order close to the original;
    ``nodes``: ``node_dependencies``' result for this state, if it is at hand."""
    members, dependencies = nodes or node_dependencies(claimed, region_of, producer_of, chain)
    # per value, how many nodes read it: a region outputs what another node reads
    readers: dict[str, int] = {}
    for indices in members.values():
        for name in {p.name for i in indices for p in claimed[i][0].proxy_args()}:
            readers[name] = readers.get(name, 0) + 1
    # RETURN reads everything it returns; DEL must stay after the last use: keep structural symbols
    # after every node that precedes them in the original order.
    order = sorted(members, key=lambda node: members[node][0])
    rank = {node: position for position, node in enumerate(order)}
    emitted: set[tuple[str, int]] = set()
    result: list[BoundSymbol] = []
    counters: dict[str, int] = {}
    pending = list(order)

    def structural(node: Node) -> bool:
        return claimed[members[node][0]][0].symbol in _STRUCTURAL

    def ready(node: Node) -> bool:
        if not dependencies[node] <= emitted:
            return False
        return not structural(node) or all(n in emitted for n in order[: rank[node]])

    def emit(node: Node) -> None:
        pending.remove(node)
        emitted.add(node)
        if node[0] == "symbol":
            result.append(claimed[node[1]][0])
            return
        executor, indices = regions[node[1]]
        outputs = _read_elsewhere([claimed[i][0] for i in indices], readers)
        live = _live([claimed[i][0] for i in indices], outputs)
        if not live:
            return  # everything it made is recomputed where it is read
        region_index = counters.get(executor.name, 0)
        counters[executor.name] = region_index + 1
        region = executor.fuse(live, region_index, outputs=outputs)
        result.append(with_fallback(region, executor.name))  # a run-time failure degrades to torch

    while pending:
        # The next node in order comes next when what it waits for can run now: a symbol recomputed
        # for its region and peeled out of it again sorts last, and scanning ahead for any ready node
        # ran unrelated later work first (the first training step allocated its optimizer state in the
        # forward, while a forward region waited for such a reshape of an input). Otherwise the first
        # ready node runs: pulling in a longer chain ran a tied weight's gradient region, which sorts
        # where its first part is but waits for the embedding's backward, with all the backward's
        # input gradients before the weight gradients that free the saved activations.
        head = pending[0]
        waits = sorted(dependencies[head] - emitted, key=rank.__getitem__)
        if all(ready(n) and not structural(n) for n in waits):
            for node in waits:
                emit(node)
            emit(head)
            continue
        fallback = next((n for n in pending if ready(n)), None)
        if fallback is None:
            raise AssertionError("fusion regions form a cycle")
        emit(fallback)
    return result


def _read_elsewhere(region: list[BoundSymbol], readers: dict[str, int]) -> set[str]:
    """The values ``region`` makes that a node other than the region reads (``readers``: per value,
    the number of nodes reading it, the region among them when it reads the value itself)."""
    made = {p.name for b in region for p in b.proxy_outputs()}
    read_here = {p.name for b in region for p in b.proxy_args()}
    return {name for name in made if readers.get(name, 0) > (name in read_here)}


def _live(region: list[BoundSymbol], outputs: set[str]) -> list[BoundSymbol]:
    """The region's symbols that contribute to its outputs (recomputation can leave some unread)."""
    wanted = set(outputs)
    live: list[BoundSymbol] = []
    for bound_symbol in reversed(region):
        if any(p.name in wanted for p in bound_symbol.proxy_outputs()):
            live.append(bound_symbol)
            wanted.update(p.name for p in bound_symbol.proxy_args())
    return live[::-1]
