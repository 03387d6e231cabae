"""A residual connection's gradient sum folds into the norm backward before it: ``addend``.

A pre-norm transformer layer computes ``h = x + f(norm(x))``; in the backward, ``x``'s gradient is
the sum of the residual path's and the norm's: ``add(residual, layer_norm_backward(...)[0])``. A
fusion executor fuses that add into its norm-backward region; a library kernel that runs the
backward as one call (``thunder-executors``' ``triton_norms``) would leave it a kernel of its own
that reads and writes whole activations (22 us at 4096 x 4096 bf16 on an H200). So where the
executor that claims the norm backward takes an ``addend`` (its checker accepts the folded call:
``claim_executors.claiming_operator``), ``add(residual, grad)`` becomes the norm backward with
``addend=residual``, whose decomposition is the same add.

Only when the norm's input gradient is read by nothing but that add, the other operand has its
shape and dtype and exists before the norm backward runs (the folded symbol takes its place), and
the add is a plain one (``prims.add``, or ``ltorch.add`` without ``alpha``). Runs on backward traces
and on programs that ran ``loss.backward()`` themselves, before the executors claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.executor import Executor
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.claim_executors import claiming_operator
from thunder.core.transforms.common import producers, readers, rename_outputs, with_replacements

__all__ = ["fold_norm_backward_adds"]

_NORM_BACKWARDS = frozenset({"ltorch.layer_norm_backward", "ltorch.rms_norm_backward"})
_ADDS = frozenset({"prims.add", "ltorch.add"})


def fold_norm_backward_adds(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """``trace`` with each foldable residual add inside its norm backward, or ``trace`` itself."""
    if not any(b.symbol.id in _NORM_BACKWARDS for b in trace.bound_symbols):
        return trace
    made = producers(trace.bound_symbols)
    position = {id(b): i for i, b in enumerate(trace.bound_symbols)}
    read_by = readers(trace.bound_symbols)
    new = from_trace(trace, "Residual adds folded into norm backwards (transforms/norm_backward_adds.py)")
    new.mutations = trace.mutations
    replaced: dict[int, list[BoundSymbol]] = {}  # id of a norm backward -> its folded version
    dropped: set[int] = set()  # the adds folded
    for add in trace.bound_symbols:
        found = _foldable(add, made, position, read_by) if add.symbol.id in _ADDS else None
        if found is None:
            continue
        norm, residual = found
        if id(norm) in replaced:
            continue
        folded = _folded(new, norm, residual, add)
        if claiming_operator(folded[0], executors) is None:
            continue
        replaced[id(norm)] = folded
        dropped.add(id(add))
    if not replaced:
        return trace
    return with_replacements(trace, new, replaced, dropped)


def _foldable(
    add: BoundSymbol,
    made: dict[str, BoundSymbol],
    position: dict[int, int],
    read_by: dict[str, list[BoundSymbol]],
) -> tuple[BoundSymbol, TensorProxy] | None:
    """The norm backward whose input gradient ``add`` sums with a residual gradient, and that residual."""
    if len(add.args) != 2 or add.kwargs or not all(isinstance(a, TensorProxy) for a in add.args):
        return None
    for grad, residual in (add.args, add.args[::-1]):
        norm = made.get(grad.name)
        if norm is None or norm.symbol.id not in _NORM_BACKWARDS or norm.kwargs.get("addend") is not None:
            continue
        outputs = norm.output if isinstance(norm.output, (tuple, list)) else (norm.output,)
        if not outputs or outputs[0] is not grad or len(read_by.get(grad.name, [])) != 1 or grad is residual:
            continue
        if (residual.shape, residual.dtype, residual.device) != (grad.shape, grad.dtype, grad.device):
            continue
        source = made.get(residual.name)
        if source is not None and position[id(source)] > position[id(norm)]:
            continue  # made after the norm backward: the folded symbol could not read it there
        return norm, residual
    return None


def _folded(new: Trace, norm: BoundSymbol, residual: TensorProxy, add: BoundSymbol) -> list[BoundSymbol]:
    """``norm`` with ``addend=residual``, recorded in ``new``, its input gradient named as ``add``'s output."""
    with tracectx(new), new.subscope() as scope:
        outputs = norm.symbol(*norm.args, **norm.kwargs, addend=residual)
    made = [b.replace(grad_enabled=norm.grad_enabled) for b in scope]
    return rename_outputs(made, outputs, (add.output, *tuple(norm.output)[1:]))
