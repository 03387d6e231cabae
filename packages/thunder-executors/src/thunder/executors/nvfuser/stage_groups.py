"""Which symbols each stage of an nvFuser region runs, and from what: the plan ``FusionRunner`` builds its
stages from (``executor.py``), and what ``NvFuserExecutor.stages`` tells region moves.

A region is one stage, except that outputs computed from lower-rank inputs alone get a first stage
(``side_outputs``), independent parts are stages of their own (``connected_groups``; work on 0-dim
tensors alone in runs of one form, ``scalar_chunks``), and a region that writes inputs may be
planned with its 0-dim computations first (``scalars_first_groups``), so that an optimizer's updates
write their parameters in place.
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.executors.nvfuser.translate import ELEMENTWISE

__all__ = [
    "POINTWISE",
    "SCALAR_STAGE_MAX_OPS",
    "Group",
    "inputs_of",
    "is_scalar_stage",
    "scalar_groups_merged",
    "scalars_first_groups",
    "stage_groups",
    "writes_in_place",
]


# A longer computation on 0-dim tensors stays one nvFuser kernel: torch would launch one per op.
SCALAR_STAGE_MAX_OPS = 2

# The most independent 0-dim computations (one per parameter, for an optimizer) one stage runs.
SCALAR_CHUNK_PARTS = 16


def is_scalar_stage(region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]) -> bool:
    return len(region) <= SCALAR_STAGE_MAX_OPS and all(len(p.shape) == 0 for p in (*inputs, *outputs))


def side_outputs(region: list[BoundSymbol], outputs: list[TensorProxy]) -> set[str]:
    """Outputs computed only from region inputs of lower rank than the region's widest tensor.

    nvFuser 0.2.36 schedules such an output with the region's wide iteration (an inner persistent
    softmax over [2, 4, 16, 16], say) and then returns wrong values for it: seen on an H100 with
    the causal mask ``~tril`` of a training step, whose values in the saved output changed from
    call to call with what the allocator handed out (test_fusion_training's GPT step, and
    test_nvfuser's ``test_low_rank_outputs_beside_a_softmax_...``). They are computed by a stage of their own.
    """
    widest = max(
        len(p.shape)
        for b in region
        for p in (*b.proxy_args(), *b.proxy_outputs())
        if isinstance(p, TensorProxy)
    )
    wide: set[str] = set()  # values of the widest rank or computed from one
    for b in region:
        tensors = [p for p in b.proxy_args() if isinstance(p, TensorProxy)]
        if any(p.name in wide or len(p.shape) == widest for p in tensors) or len(b.output.shape) == widest:
            wide.update(p.name for p in b.proxy_outputs())
    return {p.name for p in outputs if p.name not in wide}


def scalars_first_groups(
    region: list[BoundSymbol], outputs: list[TensorProxy], written: frozenset[str] | set[str] = frozenset()
) -> list[tuple[Group, str]] | None:
    """The region's 0-dim computations as the first stages, then the 0-dim values the rest broadcasts
    as stride-0 views of them (``ExpandStage``), then the rest; None where there is nothing to move.

    An optimizer's update computes its step size and bias corrections from the step counter (0-dim
    tensors) and broadcasts them over the parameter. In one stage with the update that broadcast is
    a ``BroadcastOp``, after which nvFuser's ``SegmentInplaceUpdatePass`` will not let the update
    write its parameter in place. Computed by a stage before it and read as expanded inputs (no
    ``BroadcastOp``), they leave the update a pointwise stage that writes the parameter and its
    state in place; the step counter's own update is written in place by the first stage. An update
    beside the reduction that makes its gradient (a bias, a norm's weight) becomes a stage of its own
    after that reduction's (``updates_split_off``), so that it too writes in place.
    """
    produced = names_made(region)
    scalars: set[str] = set()  # values computed from 0-dim values alone
    first: list[BoundSymbol] = []
    for b in region:
        tensors = [p for p in b.proxy_args() if isinstance(p, TensorProxy)]
        made = [p for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        if made and all(p.shape == () for p in made) and all(p.shape == () for p in tensors):
            if all(p.name in scalars or p.name not in produced for p in tensors):
                scalars.update(p.name for p in made)
                first.append(b)
    device = widest_device(region)
    moved = {id(b) for b in first}
    rest = [b for b in region if id(b) not in moved]
    wanted = {p.name for p in outputs}
    expands = [
        b
        for b in rest
        if expands_a_scalar(b, device)
        and b.output.name not in wanted
        and (b.args[0].name in scalars or b.args[0].name not in produced)  # made before the rest
    ]
    moved.update(id(b) for b in expands)
    rest = [b for b in region if id(b) not in moved]
    if (not first and not expands) or not rest:
        return None
    first_outputs = read_after(first, [*expands, *rest], outputs)
    computed_first = {p.name for p in first_outputs}
    rest_groups = stage_groups(rest, inputs_of(rest), [p for p in outputs if p.name not in computed_first])
    later = scalar_groups_merged(
        [part for group in rest_groups for part in updates_split_off(group, written)]
    )
    later = [with_broadcasts(group, kind, expands) for group, kind in later]
    expanded = {p.name for (symbols, inputs, _), _ in later for p in inputs}
    expands = [b for b in expands if b.output.name in expanded]
    groups: list[tuple[Group, str]] = []
    if first_outputs:
        groups += scalar_groups_merged(connected_groups(first, inputs_of(first), first_outputs))
    if expands:
        groups.append(((expands, inputs_of(expands), [b.output for b in expands]), "expand"))
    return groups + later


def scalar_chunks(first: list[BoundSymbol], outputs: list[TensorProxy]) -> list[Group]:
    """A computation on 0-dim tensors alone as stages of ``SCALAR_CHUNK_PARTS`` independent
    computations of one form each (the last run of a form may be shorter).

    An optimizer computes each parameter's step size and bias corrections from its own step counter
    and the shared learning rate: computations linked only through inputs. As one stage (GPT-2's
    whole step: 148 parameters, 1,334 ops) nvFuser compiled that one kernel for 4-13 s on an H200
    at the first call of each program. Runs of one length and form have one structure and share
    one compiled kernel (``FusionStage``'s structure key): a full run and the last one are compiled,
    at a launch per run. The parts are independent, so any order of them is a valid order.
    """
    by_form: dict[tuple, list[list[BoundSymbol]]] = {}
    for part in connected_parts(first, links=names_made(first)):
        by_form.setdefault(tuple(b.symbol.name for b in part), []).append(part)
    chunks: list[list[BoundSymbol]] = []
    for parts in by_form.values():
        chunks += [
            [b for part in parts[k : k + SCALAR_CHUNK_PARTS] for b in part]
            for k in range(0, len(parts), SCALAR_CHUNK_PARTS)
        ]
    groups = []
    for symbols in chunks:
        made = names_made(symbols)
        chunk_outputs = [p for p in outputs if p.name in made]
        if chunk_outputs:
            groups.append((symbols, inputs_of(symbols), chunk_outputs))
    return groups


def updates_split_off(group: Group, written: frozenset[str] | set[str]) -> list[Group]:
    """``group`` as the stages before its pointwise updates and the updates: the pointwise symbols
    that the values in ``written`` are computed by, back to the last value a reduction or a shape op
    makes (a bias's gradient, summed), and read by nothing else of the group. Only where both parts
    are left non-empty; else ``[group]``."""
    symbols, _, outputs = group
    if all(b.symbol.name in POINTWISE for b in symbols):
        return [group]
    producer = {p.name: b for b in symbols for p in b.proxy_outputs() if isinstance(p, TensorProxy)}
    tail: set[int] = set()
    pending = [name for name in written if name in producer]
    while pending:
        b = producer.get(pending.pop())
        if b is None or id(b) in tail or b.symbol.name not in POINTWISE:
            continue
        tail.add(id(b))
        pending.extend(p.name for p in b.proxy_args() if isinstance(p, TensorProxy))
    changed = True
    while changed:  # a value the rest reads is made by the rest, and so is what it is made from
        head_reads = {p.name for b in symbols if id(b) not in tail for p in b.proxy_args()}
        kept_back = {
            id(b) for b in symbols if id(b) in tail and any(p.name in head_reads for p in b.proxy_outputs())
        }
        tail -= kept_back
        changed = bool(kept_back)
    head = [b for b in symbols if id(b) not in tail]
    updates = [b for b in symbols if id(b) in tail]
    if not head or not updates:
        return [group]
    head_outputs = read_after(head, updates, outputs)
    made = names_made(updates)
    update_outputs = [p for p in outputs if p.name in made]
    return [
        *connected_groups(head, inputs_of(head), head_outputs),
        *connected_groups(updates, inputs_of(updates), update_outputs),
    ]


def with_broadcasts(group: Group, kind: str, broadcasts: list[BoundSymbol]) -> tuple[Group, str]:
    """``group`` reading the expanded 0-dim values as inputs where it is pointwise alone (a stage that
    may write in place); any other stage broadcasts them itself, as it did before the 0-dim work
    moved out (expanded inputs change how nvFuser schedules a reduction's fusion)."""
    symbols, inputs, outputs = group
    if kind != "fusion" or all(b.symbol.name in POINTWISE for b in symbols):
        return group, kind
    read = {p.name for p in inputs}
    own = [b for b in broadcasts if b.output.name in read]
    if not own:
        return group, kind
    symbols = [*own, *symbols]
    return (symbols, inputs_of(symbols), outputs), kind


def all_scalar(region: list[BoundSymbol]) -> bool:
    """Whether every tensor the region reads and makes is 0-dim (an optimizer's step sizes)."""
    return all(
        p.shape == ()
        for b in region
        for p in (*b.proxy_args(), *b.proxy_outputs())
        if isinstance(p, TensorProxy)
    )


def names_made(region: list[BoundSymbol]) -> set[str]:
    return {p.name for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)}


def widest_device(region: list[BoundSymbol]) -> Any:
    tensors = [p for b in region for p in (*b.proxy_args(), *b.proxy_outputs()) if isinstance(p, TensorProxy)]
    return max(tensors, key=lambda p: len(p.shape)).device


def expands_a_scalar(b: BoundSymbol, device: Any) -> bool:
    """A ``broadcast_in_dim`` of a 0-dim tensor on the region's device to static sizes."""
    if b.symbol.name != "broadcast_in_dim":
        return False
    source = b.args[0]
    return (
        isinstance(source, TensorProxy)
        and source.shape == ()
        and source.device == device
        and all(type(size) is int for size in b.output.shape)
    )


def writes_in_place(region: list[BoundSymbol], destination: TensorProxy) -> bool:
    """Whether one kernel may write ``destination`` while it reads it.

    Every value the region makes from it is made elementwise (each element from the same element of
    the input: no reduction or change of shape reads it), and the region holds elementwise ops
    alone, which nvFuser schedules as one pointwise kernel (a stage nvFuser segments could read the
    input in a kernel after the one that writes it). No broadcast either: nvFuser's own pre-segmenter
    pass (``SegmentInplaceUpdatePass``) then splits every aliased output downstream of a broadcast,
    even of a 0-dim tensor, into a copy kernel of its own. That is the kernel the write would save,
    at the cost of a segmented fusion's compile (an H200 at b5527d6: a whole GPT-2 step's first
    steps 43.0 -> 57.7 s, its step time unchanged; an Adam update broadcasts its learning rate and
    bias corrections).
    """
    return all(b.symbol.name in POINTWISE for b in region)


POINTWISE = frozenset({*ELEMENTWISE, "convert_element_type"})


def scalar_groups_merged(groups: list[Group]) -> list[tuple[Group, str]]:
    """Each group and the kind of stage that runs it (``"scalar"``: a ScalarStage, else ``"fusion"``);
    neighbouring scalar groups (the step counters of the parameters a region updates, each a part of
    its own) as one: a call, and a kernel per op, either way."""
    merged: list[tuple[Group, str]] = []
    for group in groups:
        scalar = is_scalar_stage(*group)
        if scalar and merged and merged[-1][1] == "scalar":
            (symbols, inputs, outputs), _ = merged[-1]
            known = {p.name for p in inputs} | {p.name for b in symbols for p in b.proxy_outputs()}
            extra_inputs = [p for p in group[1] if p.name not in known]
            merged[-1] = ((symbols + group[0], inputs + extra_inputs, outputs + group[2]), "scalar")
        else:
            merged.append((group, "scalar" if scalar else "fusion"))
    return merged


Group = tuple[list[BoundSymbol], list[TensorProxy], list[TensorProxy]]  # a stage's symbols, inputs, outputs


def stage_groups(
    region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]
) -> list[Group]:
    """What each stage of the region computes, from what, for whom (cheap: no stage is built)."""
    side = side_outputs(region, outputs)
    first = upstream(region, side)
    in_first = {id(b) for b in first}
    rest = [b for b in region if id(b) not in in_first]
    if not side or not rest:
        return connected_groups(region, inputs, outputs)
    first_outputs = read_after(first, rest, outputs)
    computed_first = {p.name for p in first_outputs}
    return [
        *connected_groups(first, inputs_of(first), first_outputs),
        *connected_groups(rest, inputs_of(rest), [p for p in outputs if p.name not in computed_first]),
    ]


def connected_groups(
    region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]
) -> list[Group]:
    """One stage per connected part of ``region`` (symbols linked by the tensors they share).

    A region may hold independent work (horizontal fusion). nvFuser schedules no disconnected
    fusion as one kernel: it hands it to its segmenter, which took seconds per region on Llama's
    backward ("Connected fusion graph check failed") to find the same separate kernels. Work on
    0-dim tensors alone is cut into runs of one form instead (``scalar_chunks``).
    """
    if all_scalar(region):
        return scalar_chunks(region, outputs)
    parts = [piece for part in connected_parts(region) for piece in resize_chains(part)]
    if len(parts) == 1:
        return [(region, inputs, outputs)]
    groups = []
    for part in parts:
        produced = {p.name for b in part for p in b.proxy_outputs()}
        part_outputs = [p for p in outputs if p.name in produced]
        if part_outputs:
            groups.append((part, inputs_of(part), part_outputs))
    return groups


# Shape ops that nvFuser's resize scheduler takes, one chain of them per kernel.
RESIZES = frozenset({"slice_prim", "pad", "cat"})


def resize_chains(part: list[BoundSymbol]) -> list[list[BoundSymbol]]:
    """``part`` split where its slices, pads and concatenations meet only at inputs.

    A rotary embedding of q and of k reads one cos and one sin table: connected through those
    inputs, one part. nvFuser's resize scheduler takes one of them per kernel and segments the rest,
    which cost 1.4-1.8 s per rotary fusion of the 4-layer Llama on an H200 (the segmenter's search),
    for the same two kernels. As stages of their own each compiles without segmentation, and q's and
    k's, of one structure and layout, share one definition.
    """
    if not any(b.symbol.name in RESIZES for b in part):
        return [part]
    produced = {p.name for b in part for p in b.proxy_outputs()}
    return connected_parts(part, links=produced)


def connected_parts(region: list[BoundSymbol], links: set[str] | None = None) -> list[list[BoundSymbol]]:
    """The region's symbols grouped by the tensors they share (only those named in ``links``, if
    given), each part in region order, the parts in the order of their first symbols."""
    parent = list(range(len(region)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_user: dict[str, int] = {}
    for i, b in enumerate(region):
        for p in (*b.proxy_args(), *b.proxy_outputs()):
            if isinstance(p, TensorProxy) and (links is None or p.name in links):
                j = first_user.setdefault(p.name, i)
                parent[root(i)] = root(j)
    parts: dict[int, list[BoundSymbol]] = {}
    for i, b in enumerate(region):
        parts.setdefault(root(i), []).append(b)
    return list(parts.values())


def upstream(region: list[BoundSymbol], names: set[str]) -> list[BoundSymbol]:
    """The symbols of ``region`` that ``names`` are computed from, in region order."""
    wanted, chosen = set(names), []
    for b in reversed(region):
        if any(p.name in wanted for p in b.proxy_outputs()):
            chosen.append(b)
            wanted.update(p.name for p in b.proxy_args())
    return chosen[::-1]


def inputs_of(region: list[BoundSymbol]) -> list[TensorProxy]:
    produced = {p.name for b in region for p in b.proxy_outputs()}
    inputs: dict[str, TensorProxy] = {}
    for b in region:
        for p in b.proxy_args():
            if isinstance(p, TensorProxy) and p.name not in produced:
                inputs.setdefault(p.name, p)
    return list(inputs.values())


def read_after(
    first: list[BoundSymbol], rest: list[BoundSymbol], outputs: list[TensorProxy]
) -> list[TensorProxy]:
    """Values of ``first`` that ``rest`` reads or the region returns."""
    read = {p.name for b in rest for p in b.proxy_args()} | {p.name for p in outputs}
    return [p for b in first for p in b.proxy_outputs() if isinstance(p, TensorProxy) and p.name in read]
