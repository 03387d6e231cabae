"""Fold an RMS norm into the one-row linears that read it: ``ltorch.rms_norm_linears`` bound symbols.

In a decode step each Llama layer normalizes one row twice, and only linears read the result: the
input norm feeds the query, key and value projections (``ltorch.linears`` after
``group_linears``), the post-attention norm the gate and up projections, the final norm the head.
An executor with a matrix-vector kernel can compute the row's RMS in that kernel
(``thunder/executors/triton/gemv.py``): the norm's own kernel and the normalized row's write and
read disappear. ``rms_norm_linears`` (``thunder/torch/norm_linears.py``) means exactly the ops
found, so an executor without the kernel runs eager's ops.

The pattern is the norm as Hugging Face writes it, op for op (``RMS_NORM_STYLES``; the matcher is
``rms_norm_pattern.py``). It is folded only when every value
it makes, the normalized row included, is read by nothing but the pattern and one-row linears of
it (the residual in Llama reads the norm's input, not its output), and nothing between the norm
and its linears writes memory (the folded norm runs where the linears were); a row read elsewhere
stays computed as it was. Each group of linears of one row then reads ``x`` and recomputes the norm.

When the norm's input is a residual connection's sum ``x = a + b`` (same shapes and dtype), one
group of linears reads the norm, and every other reader of ``x`` comes after that group (the next
residual connection), the add is folded too: ``rms_norm_linears(a, ..., addend=b)`` also returns
``x``. In a Llama decode step no norm and no residual add is left with a kernel of its own.

Like ``group_linears``, the transform runs only when an executor claims ``rms_norm_linears``
before any other claims ``linear`` or ``linears`` (the user's executor order wins), and it keeps
a norm whose folded symbol that executor refuses (say, a weight of another dtype).
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.executor import Executor
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import producers, readers, rename_outputs, with_replacements
from thunder.core.transforms.rms_norm_pattern import (
    RmsNorm,
    call_arguments,
    is_identity_conversion,
    match_rms_norm,
    producer_call,
    removable_ops,
)

__all__ = ["fold_rms_norms"]

_LINEAR = "ltorch.linear"
_LINEARS = "ltorch.linears"
_FOLDED = "ltorch.rms_norm_linears"
_WRITES = frozenset({"side_effect", "writes_input"})  # tags of in-place ops and copy-backs


def fold_rms_norms(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """``trace`` with each RMS norm read only by one-row linears folded into them, or ``trace`` itself."""
    claimer = _claimer(executors)
    if claimer is None:
        return trace
    made = producers(trace.bound_symbols)
    read_by = readers(trace.bound_symbols)
    norms: dict[str, RmsNorm] = {}  # normalized row -> its norm
    linears_of: dict[str, list[BoundSymbol]] = {}
    for bound_symbol in trace.bound_symbols:
        row = _one_row_input(bound_symbol)
        if row is None:
            continue
        if row.name not in norms:
            norm = match_rms_norm(row, made)
            if norm is None:
                continue
            norms[row.name] = norm
        linears_of.setdefault(row.name, []).append(bound_symbol)
    replaced: dict[int, list[BoundSymbol]] = {}  # id of a linear -> what it becomes
    dropped: set[int] = set()
    position = {id(b): i for i, b in enumerate(trace.bound_symbols)}
    new = from_trace(trace, "RMS norms folded into one-row linears (transforms/fold_rms_norms.py)")
    new.mutations = trace.mutations
    for row_name, norm in norms.items():
        removable = removable_ops(norm, row_name, read_by, {id(b) for b in linears_of[row_name]})
        last = max(position[id(b)] for b in linears_of[row_name])
        if removable is None or _writes_between(trace, min(position[id(b)] for b in norm.ops), last):
            continue
        addition = _residual_add(norm, linears_of[row_name], made, read_by, removable, position)
        if addition is not None and not _writes_between(trace, position[id(addition[0])], last):
            add, identities = addition
            folded = _folded(new, norm, linears_of[row_name][0], add)
            if claimer.can_execute(folded[0]):
                replaced[id(linears_of[row_name][0])] = folded
                dropped |= removable | identities | {id(add)}
                continue
        folded_each = {id(b): _folded(new, norm, b) for b in linears_of[row_name]}
        if all(claimer.can_execute(made_[0]) for made_ in folded_each.values()):
            replaced.update(folded_each)
            dropped |= removable
    if not replaced:
        return trace
    return with_replacements(trace, new, replaced, dropped)


def _residual_add(
    norm: RmsNorm,
    linears: list[BoundSymbol],
    made: dict[str, BoundSymbol],
    readers: dict[str, list[BoundSymbol]],
    removable: set[int],
    position: dict[int, int],
) -> tuple[BoundSymbol, set[int]] | None:
    """``x = a + b`` (a residual connection) making the norm's input, when the folded symbol can
    compute it too: one group of linears reads the norm, and every other reader of ``x`` comes after
    it (the next residual connection) or is an identity conversion (dropped). Returns the add and
    those identities."""
    add = producer_call(made, norm.x, "ltorch.add")
    if add is None or len(linears) != 1 or call_arguments(add).get("alpha") is not None:
        return None
    operands = [a for a in add.args if isinstance(a, TensorProxy)]
    if (
        len(operands) != 2
        or len(add.args) != 2
        or any((a.shape, a.dtype, a.device) != (norm.x.shape, norm.x.dtype, norm.x.device) for a in operands)
    ):
        return None
    at = position[id(linears[0])]
    identities = set()
    for reader in readers.get(norm.x.name, []):
        if id(reader) in removable or position[id(reader)] > at:
            continue
        if not is_identity_conversion(reader):
            return None
        identities.add(id(reader))
    return add, identities


def _writes_between(trace: Trace, first: int, last: int) -> bool:
    """Whether a bound symbol between positions ``first`` and ``last`` writes memory (an in-place op, a
    copy-back): the norm (or the add) moved to ``last`` could read what it wrote."""
    return any(b.symbol.tags & _WRITES for b in trace.bound_symbols[first + 1 : last])


def _claimer(executors: Sequence[Executor]) -> Executor | None:
    """The executor that claims ``rms_norm_linears``, if it comes before any other that claims a
    linear: with ``executors=["torch", ...]`` the user's torch runs the norms and linears as written."""
    for executor in executors:
        implementations = getattr(executor, "implementations", {})
        if _FOLDED in implementations:
            return executor
        if _LINEAR in implementations or _LINEARS in implementations:
            return None
    return None


def _one_row_input(bound_symbol: BoundSymbol) -> TensorProxy | None:
    """The input row of a linear or ``linears`` of one row and static sizes."""
    if bound_symbol.symbol.id not in (_LINEAR, _LINEARS) or not bound_symbol.args:
        return None
    x = bound_symbol.args[0]
    if not isinstance(x, TensorProxy) or x.ndim == 0 or any(type(s) is not int for s in x.shape):
        return None
    return x if x.numel() == x.shape[-1] else None


def _folded(
    new: Trace, norm: RmsNorm, linear: BoundSymbol, add: BoundSymbol | None = None
) -> list[BoundSymbol]:
    """The ``rms_norm_linears`` bound symbol computing ``linear``'s outputs (and, with the residual
    connection ``add`` making the norm's input, that input), recorded in ``new``."""
    from thunder.torch.norm_linears import rms_norm_linears

    if linear.symbol.id == _LINEARS:
        _, weights, biases = call_arguments(linear).values()
        wanted = tuple(linear.output)
    else:
        arguments = call_arguments(linear)
        weights, biases = (arguments["weight"],), (arguments.get("bias"),)
        wanted = (linear.output,)
    x, addend = (norm.x, None) if add is None else add.args
    with tracectx(new), new.subscope() as scope:
        outputs = rms_norm_linears(
            x, norm.weight, norm.eps, tuple(weights), tuple(biases), norm.style, addend
        )
    made = [b.replace(grad_enabled=linear.grad_enabled) for b in scope]
    return rename_outputs(made, outputs, wanted if add is None else (*wanted, norm.x))
