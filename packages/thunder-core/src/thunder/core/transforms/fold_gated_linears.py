"""Fold a gated MLP's ``silu(gate) * up`` into the one-row linears that make them: ``ltorch.gated_linears``.

After ``group_linears`` a decode step's Llama MLP reads ``(g, u) = linears(x, (w_gate, w_up), ...)``,
then ``a = silu(g)`` and ``h = a * u`` (or ``u * a``), and only the down projection reads ``h``. When
``g``, ``a`` and ``u`` are read by nothing else, the three become one ``gated_linears(x, w_gate, w_up,
b_gate, b_up)`` making ``h`` (``thunder/torch/gated_linears.py``: eager's ops, one for one), at the
place of the linears. An executor with a matrix-vector kernel for it computes each gate row with its
up row and writes only their product (``thunder/executors/triton/gemv.py``'s ``gated_gemv``).

Like ``group_linears`` the transform runs only when an executor claims ``gated_linears`` before any
other claims ``linears`` (the user's executor order wins), and keeps a group that executor refuses.
Nothing written between the linears and the product can be read by the silu or the product (they
read only ``g`` and ``u``, which nothing writes), so moving them to the linears changes no value.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.executor import Executor
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import rename_outputs, with_replacements

__all__ = ["fold_gated_linears"]

_LINEARS = "ltorch.linears"
_FOLDED = "ltorch.gated_linears"


def fold_gated_linears(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """``trace`` with each ``silu(gate) * up`` of a two-weight one-row ``linears`` folded, or ``trace``."""
    claimer = _claimer(executors)
    if claimer is None:
        return trace
    readers: dict[str, list[BoundSymbol]] = {}
    for bound_symbol in trace.bound_symbols:
        for proxy in bound_symbol.proxy_args():
            readers.setdefault(proxy.name, []).append(bound_symbol)
    new = from_trace(trace, "Gated MLPs folded into one-row linears (transforms/fold_gated_linears.py)")
    new.mutations = trace.mutations
    replaced: dict[int, list[BoundSymbol]] = {}
    dropped: set[int] = set()
    for bound_symbol in trace.bound_symbols:
        found = _match(bound_symbol, readers)
        if found is None:
            continue
        activation, product = found
        folded = _folded(new, bound_symbol, product)
        if claimer.can_execute(folded[0]):
            replaced[id(bound_symbol)] = folded
            dropped |= {id(activation), id(product)}
    if not replaced:
        return trace
    return with_replacements(trace, new, replaced, dropped)


def _claimer(executors: Sequence[Executor]) -> Executor | None:
    for executor in executors:
        implementations = getattr(executor, "implementations", {})
        if _FOLDED in implementations:
            return executor
        if _LINEARS in implementations or "ltorch.linear" in implementations:
            return None
    return None


def _only_reader(proxy: TensorProxy, readers: dict[str, list[BoundSymbol]]) -> BoundSymbol | None:
    found = readers.get(proxy.name, [])
    return found[0] if len(found) == 1 else None


def _match(
    linears: BoundSymbol, readers: dict[str, list[BoundSymbol]]
) -> tuple[BoundSymbol, BoundSymbol] | None:
    """(the silu, the product) of ``linears`` when it is ``silu(g) * u`` read by nothing else."""
    if linears.symbol.id != _LINEARS or len(linears.args) < 3 or len(linears.args[1]) != 2:
        return None
    outputs = linears.output
    if not isinstance(outputs, (tuple, list)) or len(outputs) != 2:
        return None
    gate, up = outputs
    x = linears.args[0]
    if not isinstance(x, TensorProxy) or x.ndim == 0 or x.numel() != x.shape[-1]:
        return None
    activation = _only_reader(gate, readers)
    if activation is None or activation.symbol.id != "ltorch.silu" or tuple(activation.args) != (gate,):
        return None
    if activation.kwargs.get("inplace", False) is not False:
        return None
    activated = activation.output
    product = _only_reader(activated, readers)
    if (
        product is None
        or product.symbol.id != "ltorch.mul"
        or product.kwargs
        or _only_reader(up, readers) is not product
    ):
        return None
    if {a.name for a in product.args if isinstance(a, TensorProxy)} != {activated.name, up.name}:
        return None
    if len(product.args) != 2 or product.output.shape != up.shape or product.output.dtype != up.dtype:
        return None
    if activation.grad_enabled != linears.grad_enabled or product.grad_enabled != linears.grad_enabled:
        return None
    return activation, product


def _folded(new: Trace, linears: BoundSymbol, product: BoundSymbol) -> list[BoundSymbol]:
    """The ``gated_linears`` bound symbol replacing ``linears``, its silu and ``product``, in ``new``."""
    from thunder.torch.gated_linears import gated_linears

    x, (gate_weight, up_weight), (gate_bias, up_bias) = linears.args[:3]
    with tracectx(new), new.subscope() as scope:
        output = gated_linears(x, gate_weight, up_weight, gate_bias, up_bias)
    made = [b.replace(grad_enabled=linears.grad_enabled) for b in scope]
    return rename_outputs(made, output, product.output)
