"""Autograd: split a computation into a forward trace and a backward trace.

The computation is first made *differentiable*: every bound symbol on a gradient path (one that
reads a value that needs a gradient) either has a gradient rule (``thunder.core.gradients``) or is
replaced by its decomposition, recursively; a leaf without a rule there is an error naming it.
Walking that program backwards, each rule records the gradient computation into the backward
trace. The proxies of the forward program that the backward reads are what the forward saves; the
forward trace returns ``(output, saved)`` and the backward trace takes ``(*saved, *cotangents)`` and
returns one gradient per computation input (``None`` where there is none).

Bound symbols recorded under ``torch.no_grad()`` in the user's code produce constants: gradients
do not flow through them, as in eager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.core import prims
from thunder.core.gradients import vjp_rule_for
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_flatten, tree_leaves, tree_map
from thunder.core.symbol import DEL, RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import substitute
from thunder.core.transforms.dce import dce

__all__ = [
    "ForwardBackward", "NoGradientRuleError", "split_forward_backward", "saved_bytes", "check_grad_mode_regions",
]  # fmt: skip


class NoGradientRuleError(NotImplementedError):
    """A symbol on a gradient path has neither a gradient rule nor a decomposition."""


@dataclass
class ForwardBackward:
    forward: Trace  # returns (output, saved)
    backward: Trace  # takes (*saved, *cotangents), returns one gradient per forward input
    saved: list[TensorProxy]
    cotangent_outputs: list[int]  # positions in the flat output whose cotangents the backward takes
    # positions of float outputs that do not require grad in eager mode (see ``detached_outputs``)
    detached_outputs: list[int] = field(default_factory=list)


def split_forward_backward(computation: Trace) -> ForwardBackward:
    needs_grad = {p.name for p in computation.args if isinstance(p, TensorProxy) and p.requires_grad}
    program = _differentiable(computation.bound_symbols, needs_grad)
    output = computation.output
    flat_output, _ = tree_flatten(output)
    backward = from_trace(computation, "Backward: the gradients of the forward's inputs")
    backward.name = "backward"
    with tracectx(backward):
        cotangents: dict[str, Any] = {}
        cotangent_args: list[TensorProxy] = []
        cotangent_outputs: list[int] = []
        for position, value in enumerate(flat_output):
            if isinstance(value, TensorProxy) and value.name in needs_grad:
                cotangent = TensorProxy(
                    f"g{value.name}", shape=value.shape, dtype=value.dtype, device=value.device
                )
                cotangent_args.append(cotangent)
                cotangent_outputs.append(position)
                _accumulate(cotangents, value, cotangent)
        for bound_symbol in reversed(program):
            _backward_step(bound_symbol, cotangents, needs_grad)
        grads = tuple(
            cotangents.get(p.name) if isinstance(p, TensorProxy) and p.requires_grad else None
            for p in computation.args
        )
        backward.record(BoundSymbol(RETURN, (grads,)))
    backward = dce(_simplify(backward))
    produced = {p.name for p in cotangent_args} | {
        p.name for b in backward.bound_symbols for p in b.proxy_outputs()
    }
    # everything the backward reads that it does not make (its return is among its bound symbols)
    read = [p for b in backward.bound_symbols for p in b.proxy_args()]
    saved = _unique([p for p in read if p.name not in produced])
    _raise_where_overwritten(computation, backward, saved)
    backward.args = [*saved, *cotangent_args]
    backward.header = f"Backward: takes {len(saved)} saved tensors and {len(cotangent_args)} output gradients"

    forward = from_trace(computation, "Forward: the computation, returning what the backward needs")
    forward.name = "forward"
    forward.decorators = []
    forward.bound_symbols.extend(b for b in program if b.symbol is not RETURN)
    forward.bound_symbols.append(BoundSymbol(RETURN, ((output, tuple(saved)),)))
    forward = dce(forward)
    forward.header = f"Forward: saves {len(saved)} tensors ({saved_bytes(saved)} bytes) for the backward"
    return ForwardBackward(forward, backward, saved, cotangent_outputs, detached_outputs(computation))


def _raise_where_overwritten(computation: Trace, backward: Trace, saved: list) -> None:
    """A backward that reads a value that a write autograd does not see overwrote (under no_grad,
    through detach) raises when it runs, as eager's does: its saved tensor's version changed."""
    overwritten = sorted(
        {computation.overwritten[p.name] for p in saved if p.name in computation.overwritten}
    )
    if overwritten:
        from thunder.core.inplace import overwritten_error_symbol

        error = BoundSymbol(
            overwritten_error_symbol(), (tuple(overwritten),), {}, None, (), grad_enabled=False
        )
        backward.bound_symbols.insert(0, error)


def _simplify(backward: Trace) -> Trace:
    """The backward with views that change nothing dropped, views of views folded into one, and each
    repeated computation done once.

    Gradient rules are written one op at a time, so the backward reshapes a gradient to the shape it
    has (a linear's weight gradient of a 2-D input), reshapes a reshape (an attention projection's
    gradient split into heads), and recomputes what a sibling rule computed already (the reshaped
    input of the q, k and v projections). Each such call is a Python-level op on every backward.
    """
    renames: dict[str, Proxy] = {}
    seen: dict[tuple, Any] = {}
    producers: dict[str, BoundSymbol] = {}
    simplified = from_trace(backward, backward.header)
    for bound_symbol in backward.bound_symbols:
        bound_symbol = _fold_view_of_view(substitute(bound_symbol, renames), producers)
        if _is_identity_view(bound_symbol):
            renames[bound_symbol.output.name] = bound_symbol.args[0]
            continue
        key = _computation_key(bound_symbol)
        if key is not None:
            earlier = seen.setdefault(key, bound_symbol.output)
            if earlier is not bound_symbol.output:
                for new, old in zip(tree_leaves(bound_symbol.output), tree_leaves(earlier)):
                    if isinstance(new, Proxy):
                        renames[new.name] = old
                continue
        simplified.bound_symbols.append(bound_symbol)
        for output in bound_symbol.proxy_outputs():
            producers[output.name] = bound_symbol
    return simplified


def _fold_view_of_view(bound_symbol: BoundSymbol, producers: dict[str, BoundSymbol]) -> BoundSymbol:
    """A reshape of a reshape reshapes the first one's input; a transpose of a transpose transposes it
    by the composed permutation. The inner view, if nothing else reads it, is then dead code."""
    symbol, args = bound_symbol.symbol, bound_symbol.args
    if symbol not in (prims.reshape, prims.transpose) or not args or not isinstance(args[0], TensorProxy):
        return bound_symbol
    producer = producers.get(args[0].name)
    if producer is None or producer.symbol is not symbol or not isinstance(producer.args[0], TensorProxy):
        return bound_symbol
    if symbol is prims.reshape:
        return bound_symbol.replace(args=(producer.args[0], *args[1:]))
    inner, outer = producer.args[1], args[1]
    return bound_symbol.replace(args=(producer.args[0], tuple(inner[d] for d in outer), *args[2:]))


def _is_identity_view(bound_symbol: BoundSymbol) -> bool:
    """A reshape to the shape it has, a transpose by the identity, a broadcast or slice of everything."""
    symbol, args = bound_symbol.symbol, bound_symbol.args
    if not args or not isinstance(args[0], TensorProxy) or not isinstance(bound_symbol.output, TensorProxy):
        return False
    a = args[0]
    if symbol is prims.reshape:
        return tuple(args[1]) == tuple(a.shape)
    if symbol is prims.transpose:
        return tuple(args[1]) == tuple(range(a.ndim))
    if symbol is prims.broadcast_in_dim:
        return tuple(args[1]) == tuple(a.shape) and tuple(args[2]) == tuple(range(a.ndim))
    if symbol is prims.slice_prim:
        start, end, strides = args[1:4]
        return all(s == 0 for s in start) and tuple(end) == tuple(a.shape) and all(st == 1 for st in strides)
    return False


def _computation_key(bound_symbol: BoundSymbol) -> tuple | None:
    """What a call computes (its symbol and arguments), for calls that compute a value and nothing
    else; None for random, side-effecting or bookkeeping calls, which are never merged."""
    symbol = bound_symbol.symbol
    if symbol in (RETURN, DEL) or not symbol.tags.isdisjoint(("random", "side_effect")):
        return None
    if not bound_symbol.proxy_outputs():
        return None
    try:
        arguments = (_hashable(bound_symbol.args), _hashable(bound_symbol.kwargs))
        key = (symbol.id, *arguments, bound_symbol.grad_enabled)
        hash(key)
    except TypeError:  # an argument that cannot be compared: keep the call
        return None
    return key


def _hashable(value: Any) -> Any:
    """``value`` as a hashable key: proxies by name, containers element-wise, and other values with
    their type and repr, so that 1, 1.0, True, 0.0 and -0.0 (equal in Python) stay apart."""
    if isinstance(value, Proxy):
        return ("proxy", value.name)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *[_hashable(item) for item in value])
    if isinstance(value, dict):
        return ("dict", *[(key, _hashable(item)) for key, item in value.items()])
    return (type(value), repr(value))


def check_grad_mode_regions(computation: Trace) -> None:
    """Raise if the program, called under no_grad, records gradients inside (``with torch.enable_grad():``
    on a tensor that requires grad): eager's result then requires grad, and a computation called under
    no_grad is not differentiated. Call it after tracing, in the caller's grad mode."""
    if torch.is_grad_enabled():
        return
    for bound_symbol in computation.bound_symbols:
        if bound_symbol.symbol in (RETURN, DEL):
            continue
        if bound_symbol.grad_enabled and any(
            isinstance(p, TensorProxy) and p.requires_grad for p in bound_symbol.proxy_args()
        ):
            raise NotImplementedError(
                f"the compiled function, called under torch.no_grad(), computes {bound_symbol.symbol.name} "
                "under torch.enable_grad() on a tensor that requires grad: thunder differentiates a program "
                "only when it is called with gradients enabled. Call it outside torch.no_grad()"
            )


def detached_outputs(computation: Trace) -> list[int]:
    """Positions of the flat output that eager mode returns with ``requires_grad=False``.

    Eager's rule, not the gradient's: an output requires grad when any op on its way reads a tensor
    that does, even where the gradient is zero (``fill``, an empty ``gather``), unless a ``detach``
    made it (``native_layer_norm``'s mean and rstd are detached inside its decomposition) or a
    factory that reads only metadata did (``zeros_like(x)``, ``x.new_ones(...)``, ``rand_like(x)``).
    """
    requiring = {p.name for p in computation.args if isinstance(p, TensorProxy) and p.requires_grad}
    for bound_symbol in computation.bound_symbols:
        tags = bound_symbol.symbol.tags
        if bound_symbol.symbol in (RETURN, DEL) or "stop_gradient" in tags or "reads_metadata" in tags:
            continue
        if not bound_symbol.grad_enabled:  # recorded under torch.no_grad() in the program
            continue
        if any(p.name in requiring for p in _differentiable_operands(bound_symbol)):
            stopped = _stopped_names(bound_symbol.subsymbols)
            requiring.update(  # an integer or bool result never requires grad (``(x > 0) + 0.5``)
                p.name
                for p in bound_symbol.proxy_outputs()
                if isinstance(p, TensorProxy) and p.name not in stopped and _differentiable_dtype(p)
            )
    flat_output, _ = tree_flatten(computation.output)
    return [
        position
        for position, value in enumerate(flat_output)
        if isinstance(value, TensorProxy) and _differentiable_dtype(value) and value.name not in requiring
    ]


def _differentiable_operands(bound_symbol: BoundSymbol) -> list[Any]:
    """The proxies whose requires_grad the outputs inherit: not the tensors of which a symbol tagged
    ``reads_metadata_of_others`` (``x.type_as(y)``, ``x.expand_as(y)``) reads only the dtype or shape."""
    if "reads_metadata_of_others" in bound_symbol.symbol.tags:
        first = bound_symbol.args[0] if bound_symbol.args else None
        return [first] if isinstance(first, TensorProxy) else []
    return bound_symbol.proxy_args()


def _stopped_names(bound_symbols: Sequence[BoundSymbol]) -> set[str]:
    """Names a ``detach`` (anywhere in a decomposition) produced."""
    names: set[str] = set()
    for bound_symbol in bound_symbols:
        if "stop_gradient" in bound_symbol.symbol.tags:
            names.update(p.name for p in bound_symbol.proxy_outputs())
        names |= _stopped_names(bound_symbol.subsymbols)
    return names


def saved_bytes(saved: Sequence[Any]) -> int:
    return sum(p.numel() * p.dtype.itemsize for p in saved if isinstance(p, TensorProxy))


def _unique(proxies: list[Any]) -> list[Any]:
    # numbers too: a symbolic ``scale`` the backward multiplies by is passed on like a saved tensor
    return list({p.name: p for p in proxies if isinstance(p, (TensorProxy, NumberProxy))}.values())


def _differentiable(bound_symbols: Sequence[BoundSymbol], needs_grad: set[str]) -> list[BoundSymbol]:
    """The program with every symbol on a gradient path replaced by ones that have gradient rules."""
    program: list[BoundSymbol] = []
    for bound_symbol in bound_symbols:
        if (
            bound_symbol.symbol in (RETURN, DEL)
            or "stop_gradient" in bound_symbol.symbol.tags
            or not _on_gradient_path(bound_symbol, needs_grad)
        ):
            program.append(bound_symbol)
        elif vjp_rule_for(bound_symbol) is not None:
            program.append(bound_symbol)
            needs_grad.update(
                p.name
                for p in bound_symbol.proxy_outputs()
                if isinstance(p, TensorProxy) and _differentiable_dtype(p)
            )
        elif bound_symbol.subsymbols or not bound_symbol.symbol.is_leaf:
            program.extend(_differentiable(bound_symbol.subsymbols, needs_grad))
        else:
            raise NoGradientRuleError(
                f"thunder cannot differentiate {bound_symbol.symbol.id}: it has no gradient rule and no "
                "decomposition (call it under torch.no_grad(), or on tensors that do not require grad)"
            )
    return program


def _on_gradient_path(bound_symbol: BoundSymbol, needs_grad: set[str]) -> bool:
    return bound_symbol.grad_enabled and any(p.name in needs_grad for p in bound_symbol.proxy_args())


def _differentiable_dtype(proxy: TensorProxy) -> bool:
    return proxy.dtype.is_floating_point or proxy.dtype.is_complex


def _accumulate(cotangents: dict[str, Any], value: TensorProxy, grad: Any) -> None:
    if grad is None:
        return
    if not isinstance(grad, TensorProxy):
        raise TypeError(f"a gradient rule returned {grad!r} for {value.name}, not a tensor or None")
    if grad.shape != value.shape or grad.dtype != value.dtype:
        raise AssertionError(
            f"a gradient rule returned a {grad.dtype} {grad.shape} gradient for {value.name}, "
            f"which is a {value.dtype} {value.shape} tensor"
        )
    previous = cotangents.get(value.name)
    cotangents[value.name] = grad if previous is None else prims.add(previous, grad)


def _backward_step(bound_symbol: BoundSymbol, cotangents: dict[str, Any], needs_grad: set[str]) -> None:
    if bound_symbol.symbol in (RETURN, DEL) or "stop_gradient" in bound_symbol.symbol.tags:
        return
    if not _on_gradient_path(bound_symbol, needs_grad) or _returns_its_input(bound_symbol):
        return
    output_cotangents = tree_map(
        lambda x: cotangents.get(x.name) if isinstance(x, TensorProxy) else None, bound_symbol.output
    )
    if all(g is None for g in tree_leaves(output_cotangents)):
        return
    rule = vjp_rule_for(bound_symbol)
    assert rule is not None, f"{bound_symbol.symbol.id} reached the backward without a gradient rule"
    positional, keyword = _bind(bound_symbol)
    grads = rule(output_cotangents, *positional, out=bound_symbol.output, **keyword)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != len(positional):
        raise AssertionError(
            f"the gradient rule of {bound_symbol.symbol.id} returned {len(grads)} gradients "
            f"for {len(positional)} positional arguments"
        )
    for argument, grad in zip(positional, grads):
        _accumulate_argument(cotangents, argument, grad, needs_grad)


def _returns_its_input(bound_symbol: BoundSymbol) -> bool:
    """An identity call (``split`` into one piece): its output's cotangent already is its input's."""
    inputs = {p.name for p in bound_symbol.proxy_args()}
    outputs = [p.name for p in bound_symbol.proxy_outputs()]
    return bool(outputs) and all(name in inputs for name in outputs)


def _accumulate_argument(cotangents: dict[str, Any], argument: Any, grad: Any, needs_grad: set[str]) -> None:
    if grad is None:
        return
    if isinstance(argument, TensorProxy):
        if argument.name in needs_grad:
            _accumulate(cotangents, argument, grad)
    elif isinstance(argument, (list, tuple)):
        for item, item_grad in zip(argument, grad):
            _accumulate_argument(cotangents, item, item_grad, needs_grad)


def _bind(bound_symbol: BoundSymbol) -> tuple[tuple, dict]:
    """The call's arguments as positional ones plus keyword-only ones, defaults filled in."""
    signature = _signature(bound_symbol.symbol)
    if signature is None:
        return tuple(bound_symbol.args), dict(bound_symbol.kwargs)
    bound = signature.bind(*bound_symbol.args, **bound_symbol.kwargs)
    bound.apply_defaults()
    return tuple(bound.args), dict(bound.kwargs)


_signatures: dict[str, inspect.Signature | None] = {}


def _signature(symbol: Symbol) -> inspect.Signature | None:
    if symbol.id not in _signatures:
        fn: Callable | None = symbol.decomposition or symbol.meta
        try:
            _signatures[symbol.id] = inspect.signature(fn) if fn is not None else None
        except (TypeError, ValueError):
            _signatures[symbol.id] = None
    return _signatures[symbol.id]
