"""Group the one-row linears that read the same input into ``ltorch.linears`` bound symbols.

A decode step multiplies one activation row by each weight; the query, key and value projections
read one row, the gate and up projections another. As one ``linears`` symbol they can run as one
kernel that reads all the weights (``thunder/torch/grouped_linear.py``). The transform runs only
when an executor of the compile claims ``ltorch.linears`` before any other claims ``ltorch.linear``
(the user's executor order wins); otherwise grouping would change nothing but the printed trace.

A group takes linears of one input proxy with one row (static sizes: a decode step with a
growing cache has symbolic sizes in its attention, not in its linears), 2-D weights of the input's
dtype, and all or none with a bias; at most ``MAX_GROUP`` weights (what one kernel takes), in
program order. The grouped symbol sits where the group's first linear was, so each weight and
bias must exist by then: a weight computed between two of the linears (dequantized, transposed)
starts a group of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.executor import Executor
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import rename_outputs

__all__ = ["group_linears", "MAX_GROUP"]

MAX_GROUP = 3
_LINEAR = "ltorch.linear"
_LINEARS = "ltorch.linears"


def group_linears(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """``trace`` with one-row linears of a shared input grouped, or ``trace`` itself."""
    if not _claimed_first(executors):
        return trace
    made_at = {p.name: i for i, b in enumerate(trace.bound_symbols) for p in b.proxy_outputs()}
    groups: dict[int, list[BoundSymbol]] = {}  # position of a group's first linear -> its linears
    open_group: dict[tuple, int] = {}  # (input, bias or not, grad mode) -> the open group's position
    for position, bound_symbol in enumerate(trace.bound_symbols):
        parts = _one_row_linear(bound_symbol)
        if parts is None:
            continue
        x, weight, bias = parts
        key = (x.name, bias is None, bound_symbol.grad_enabled)
        first = open_group.get(key)
        operands = [weight] if bias is None else [weight, bias]
        if (
            first is None
            or len(groups[first]) == MAX_GROUP
            or any(made_at.get(p.name, -1) > first for p in operands)
        ):
            first = open_group[key] = position
            groups[first] = []
        groups[first].append(bound_symbol)
    grouped = {id(b) for members in groups.values() if len(members) > 1 for b in members}
    if not grouped:
        return trace
    new = from_trace(trace, "Grouped one-row linears (transforms/group_linears.py)")
    new.mutations = trace.mutations
    for position, bound_symbol in enumerate(trace.bound_symbols):
        members = groups.get(position, [])
        if len(members) > 1:
            new.bound_symbols.extend(_grouped(new, members))
        elif id(bound_symbol) not in grouped:
            new.bound_symbols.append(bound_symbol)
    return new


def _claimed_first(executors: Sequence[Executor]) -> bool:
    """Whether an executor claims ``linears`` before any other claims ``linear``: with
    ``executors=["torch", ...]`` the user's torch runs every linear, ungrouped."""
    for executor in executors:
        implementations = getattr(executor, "implementations", {})
        if _LINEARS in implementations:
            return True
        if _LINEAR in implementations:
            return False
    return False


def _one_row_linear(bound_symbol: BoundSymbol) -> tuple[TensorProxy, TensorProxy, TensorProxy | None] | None:
    if bound_symbol.symbol.id != _LINEAR:
        return None
    x, weight, bias = (tuple(bound_symbol.args) + (None,) * 3)[:3]
    bias = bound_symbol.kwargs.get("bias", bias)
    if not (isinstance(x, TensorProxy) and isinstance(weight, TensorProxy) and weight.ndim == 2):
        return None
    if bias is not None and not (isinstance(bias, TensorProxy) and bias.dtype == x.dtype):
        return None
    tensors = (x, weight) if bias is None else (x, weight, bias)
    if any(type(size) is not int for t in tensors for size in t.shape):
        return None  # a symbolic size (a decode step with a growing cache has them elsewhere, not here)
    if x.ndim == 0 or x.numel() != x.shape[-1] or weight.dtype != x.dtype:
        return None
    return x, weight, bias


def _grouped(new: Trace, members: list[BoundSymbol]) -> list[BoundSymbol]:
    """The ``linears`` bound symbol for ``members``, recorded in ``new``, binding their outputs."""
    from thunder.torch.grouped_linear import linears

    parts = [_one_row_linear(b) for b in members]
    x = parts[0][0]  # type: ignore[index]
    weights = tuple(p[1] for p in parts)  # type: ignore[index]
    biases = tuple(p[2] for p in parts)  # type: ignore[index]
    with tracectx(new), new.subscope() as scope:
        outputs = linears(x, weights, biases)
    made = [b.replace(grad_enabled=members[0].grad_enabled) for b in scope]
    return rename_outputs(made, outputs, tuple(b.output for b in members))
