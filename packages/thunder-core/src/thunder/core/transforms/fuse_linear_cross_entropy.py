"""Fuse a language model's output head and its cross entropy, so the logits never exist whole.

Finds, in a computation trace before autograd splits it::

    logits = ltorch.linear(x, weight, bias)        # [..., V]
    flat = ltorch.flatten(logits, 0, 1)            # any reshapes keeping the last dim (optional)
    up = ltorch.float(flat)                        # an upcast to float32 (optional)
    loss = ltorch.cross_entropy(up, target)        # class indices, "mean" or "sum"

where each intermediate is read only by the next step and is not returned, and replaces it by one
symbol of ``thunder/torch/fused_losses.py``: ``linear_cross_entropy_with_grads`` when the input,
weight or bias needs a gradient (the gradients are computed with the loss, block of rows by block of
rows), else ``linear_cross_entropy_loss``. Anything else leaves the trace as it was.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import producers, rename_outputs

__all__ = ["fuse_linear_cross_entropy"]

# Steps allowed between the linear and the cross entropy: reshapes that keep the class dim, and
# dtype conversions (an upcast to float32, or a conversion to the dtype the value already has).
_RESHAPES = frozenset(
    {"ltorch.reshape", "ltorch.flatten", "ltorch.view", "ltorch.contiguous", "prims.reshape"}
)
_CONVERSIONS = frozenset({"ltorch.float", "ltorch.to", "ltorch.type", "prims.convert_element_type"})
_LINEAR = "ltorch.linear"
_CROSS_ENTROPY = "ltorch.cross_entropy"


@dataclass(frozen=True)
class _Match:
    chain: tuple[BoundSymbol, ...]  # linear, the steps, cross_entropy
    x: TensorProxy
    weight: TensorProxy
    bias: TensorProxy | None
    target: TensorProxy
    ignore_index: int
    reduction: str


def fuse_linear_cross_entropy(trace: Trace, *, keep_logits: bool = False) -> Trace:
    """``trace`` with each linear + cross entropy chain replaced by one fused loss symbol.

    Args:
        trace: a computation trace, before autograd (which values need gradients is read from the
            ``requires_grad`` of its inputs and from torch's grad mode now, as autograd does).
        keep_logits: keep the ops making the logits (only the cross entropy is replaced), for a
            program still being traced, whose later code may read them (``loss.backward()`` inside
            the program, then an accuracy of the logits); dead-code elimination drops them otherwise.

    Returns:
        ``trace`` itself when nothing matched, else a new trace.

    Example::

        fused = fuse_linear_cross_entropy(thunder.last_traces(jitted)[0])
        print(fused)  # t241 = ltorch.linear_cross_entropy_with_grads(t214, wte_weight, None, t217, ...)[0]
    """
    readers = _readers(trace)
    matches = {}
    for position, bound_symbol in enumerate(trace.bound_symbols):
        if bound_symbol.symbol.id == _CROSS_ENTROPY:
            match = _match(trace.bound_symbols, position, readers)
            if match is not None:
                matches[id(bound_symbol)] = match
    if not matches:
        return trace
    requiring_grad = _requiring_grad(trace)
    removed = {id(b) for match in matches.values() for b in (match.chain[:1] if keep_logits else match.chain)}
    new = from_trace(trace, "Fused linear + cross entropy (transforms/fuse_linear_cross_entropy.py)")
    new.mutations = trace.mutations
    for bound_symbol in trace.bound_symbols:
        if id(bound_symbol) in matches:
            new.bound_symbols.extend(_fused(new, matches[id(bound_symbol)], requiring_grad))
        elif id(bound_symbol) not in removed:
            new.bound_symbols.append(bound_symbol)
    return new


def _readers(trace: Trace) -> dict[str, int]:
    """How many top-level bound symbols (the return included) read each proxy."""
    counts: dict[str, int] = {}
    for bound_symbol in trace.bound_symbols:
        for proxy in bound_symbol.proxy_args():
            counts[proxy.name] = counts.get(proxy.name, 0) + 1
    return counts


def _requiring_grad(trace: Trace) -> set[str]:
    """The proxies that autograd will differentiate: computed from inputs that require grad, under
    grad mode (a conservative copy of ``autograd._differentiable``'s propagation)."""
    if not torch.is_grad_enabled():
        return set()
    names = {p.name for p in trace.args if isinstance(p, TensorProxy) and p.requires_grad}
    for bound_symbol in trace.bound_symbols:
        if "stop_gradient" in bound_symbol.symbol.tags or not bound_symbol.grad_enabled:
            continue
        if any(p.name in names for p in bound_symbol.proxy_args()):
            names.update(
                p.name
                for p in bound_symbol.proxy_outputs()
                if isinstance(p, TensorProxy) and p.dtype.is_floating_point
            )
    return names


def _only_tensor(bound_symbol: BoundSymbol) -> TensorProxy | None:
    tensors = [p for p in bound_symbol.proxy_args() if isinstance(p, TensorProxy)]
    return tensors[0] if len(tensors) == 1 else None


def _step_fits(bound_symbol: BoundSymbol, value: TensorProxy) -> bool:
    """A reshape keeping the last (class) dim, or a conversion to float32 / to the same dtype."""
    output = bound_symbol.output
    if not isinstance(output, TensorProxy) or output.device != value.device:
        return False
    if bound_symbol.symbol.id in _RESHAPES:
        return (
            output.dtype == value.dtype
            and output.shape[-1:] == value.shape[-1:]
            and output.numel() == value.numel()
        )
    if bound_symbol.symbol.id in _CONVERSIONS:
        widening = value.dtype in (dtypes.bfloat16, dtypes.float16) and output.dtype == dtypes.float32
        return output.shape == value.shape and (widening or output.dtype == value.dtype)
    return False


def _identities(bound_symbols: Sequence[BoundSymbol], value: TensorProxy) -> list[BoundSymbol]:
    """Conversions of ``value`` to its own dtype: they return ``value`` itself."""
    return [
        b for b in bound_symbols
        if b.symbol.id in _CONVERSIONS and [p.name for p in b.proxy_outputs()] == [value.name]
        and [p.name for p in b.proxy_args() if isinstance(p, TensorProxy)] == [value.name]
    ]  # fmt: skip


def _match(bound_symbols: Sequence[BoundSymbol], position: int, readers: dict[str, int]) -> _Match | None:
    """The chain ending in the cross entropy at ``position``, walked back to its linear."""
    cross_entropy = bound_symbols[position]
    arguments = _bind(cross_entropy)
    if arguments is None or not _supported(arguments):
        return None
    before = bound_symbols[:position]
    produced = producers(before)
    chain = [cross_entropy]
    value = arguments["input"]
    while True:
        identities = _identities(before, value)
        if readers.get(value.name, 0) != 1 + len(identities) or value.name not in produced:
            return None  # read elsewhere (or returned): the logits must exist
        chain.extend(identities)
        producer = produced[value.name]
        if producer.symbol.id == _LINEAR:
            break
        source = _only_tensor(producer)
        if source is None or not _step_fits(producer, source):
            return None
        chain.append(producer)
        value = source
    chain.append(producer)
    return _linear_match(tuple(chain), arguments)


def _linear_match(chain: tuple[BoundSymbol, ...], arguments: dict) -> _Match | None:
    linear, cross_entropy = chain[-1], chain[0]
    x, weight, bias = (tuple(linear.args) + (None,) * 3)[:3]
    bias = linear.kwargs.get("bias", bias)
    logits = arguments["input"]
    if not (
        isinstance(x, TensorProxy) and isinstance(weight, TensorProxy) and x.ndim >= 2 and weight.ndim == 2
    ):
        return None
    if x.numel() // x.shape[-1] != logits.shape[0] or not all(
        b.grad_enabled == cross_entropy.grad_enabled for b in chain
    ):
        return None
    return _Match(
        chain, x, weight, bias, arguments["target"], arguments["ignore_index"], arguments["reduction"]
    )


def _bind(bound_symbol: BoundSymbol) -> dict | None:
    from thunder.torch.nn import legacy_reduction

    decomposition = bound_symbol.symbol.decomposition
    assert decomposition is not None
    try:
        bound = inspect.signature(decomposition).bind(*bound_symbol.args, **bound_symbol.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments["reduction"] = legacy_reduction(
        arguments["size_average"], arguments["reduce"], arguments["reduction"]
    )
    return arguments


def _supported(arguments: dict) -> bool:
    from thunder.torch.fused_losses import FUSED_REDUCTIONS

    logits, target = arguments["input"], arguments["target"]
    return (
        isinstance(logits, TensorProxy)
        and isinstance(target, TensorProxy)
        and logits.ndim == 2
        and logits.numel() > 0
        and logits.dtype.is_floating_point
        and target.ndim == 1
        and not target.dtype.is_floating_point
        and arguments["weight"] is None
        and arguments["label_smoothing"] == 0.0
        and arguments["reduction"] in FUSED_REDUCTIONS
        and isinstance(arguments["ignore_index"], int)
    )


def _fused(new: Trace, match: _Match, requiring_grad: set[str]) -> list[BoundSymbol]:
    """The fused symbol's bound symbol, recorded in ``new`` and binding the cross entropy's output."""
    from thunder.torch.fused_losses import linear_cross_entropy_loss, linear_cross_entropy_with_grads

    cross_entropy = match.chain[0]
    upcast = cross_entropy.args[0].dtype != match.x.dtype
    common = (match.x, match.weight, match.bias, match.target, match.ignore_index, match.reduction, upcast)
    wanted = tuple(
        isinstance(p, TensorProxy) and p.name in requiring_grad for p in (match.x, match.weight, match.bias)
    )
    with tracectx(new), new.subscope() as scope:
        if any(wanted):
            loss = linear_cross_entropy_with_grads(*common, wanted)[0]
        else:
            loss = linear_cross_entropy_loss(*common)
    fused = [b.replace(grad_enabled=cross_entropy.grad_enabled) for b in scope]
    return rename_outputs(fused, loss, cross_entropy.output)
