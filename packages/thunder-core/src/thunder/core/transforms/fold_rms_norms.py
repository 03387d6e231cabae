"""Fold an RMS norm into the one-row linears that read it: ``ltorch.rms_norm_linears`` bound symbols.

In a decode step each Llama layer normalizes one row twice, and only linears read the result: the
input norm feeds the query, key and value projections (``ltorch.linears`` after
``group_linears``), the post-attention norm the gate and up projections, the final norm the head.
An executor with a matrix-vector kernel can compute the row's RMS in that kernel
(``thunder/executors/triton/gemv.py``): the norm's own kernel and the normalized row's write and
read disappear. ``rms_norm_linears`` (``thunder/torch/norm_linears.py``) means exactly the ops
found, so an executor without the kernel runs eager's ops.

The pattern is the norm as Hugging Face writes it, op for op (``RMS_NORM_STYLES``): ``x.float()``
(absent in float32), ``pow(2)`` (or ``h * h``), ``mean(-1, keepdim=True)``, ``+ eps`` (a Python
number), ``rsqrt``, ``h * r``, then Llama's ``weight * r.to(x.dtype)`` or Gemma's
``(r * (1.0 + weight.float())).to(x.dtype)``, with a 1-D weight. It is folded only when every value
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

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from thunder.core import dtypes
from thunder.core.executor import Executor
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import producers, rename_outputs

__all__ = ["fold_rms_norms"]

_LINEAR = "ltorch.linear"
_LINEARS = "ltorch.linears"
_FOLDED = "ltorch.rms_norm_linears"
# dtype conversions: one tensor in, the same tensor in another dtype out
_CONVERSIONS = frozenset({"ltorch.to", "ltorch.float", "ltorch.type_as", "ltorch.half", "ltorch.bfloat16"})
_RESHAPES = frozenset({"prims.reshape", "ltorch.reshape", "ltorch.view"})
_WRITES = frozenset({"side_effect", "writes_input"})  # tags of in-place ops and copy-backs


@dataclass(frozen=True)
class _Norm:
    """An RMS norm found in a trace: ``style``'s norm of ``x`` with ``weight`` and ``eps``."""

    x: TensorProxy
    weight: TensorProxy
    eps: float
    style: str
    ops: tuple[BoundSymbol, ...]  # the bound symbols from ``x`` to the normalized row


def fold_rms_norms(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """``trace`` with each RMS norm read only by one-row linears folded into them, or ``trace`` itself."""
    claimer = _claimer(executors)
    if claimer is None:
        return trace
    made = producers(trace.bound_symbols)
    readers = _readers(trace.bound_symbols)
    norms: dict[str, _Norm] = {}  # normalized row -> its norm
    linears_of: dict[str, list[BoundSymbol]] = {}
    for bound_symbol in trace.bound_symbols:
        row = _one_row_input(bound_symbol)
        if row is None:
            continue
        if row.name not in norms:
            norm = _match(row, made)
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
        removable = _removable(norm, row_name, linears_of[row_name], readers)
        last = max(position[id(b)] for b in linears_of[row_name])
        if removable is None or _writes_between(trace, min(position[id(b)] for b in norm.ops), last):
            continue
        addition = _residual_add(norm, linears_of[row_name], made, readers, removable, position)
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
    for bound_symbol in trace.bound_symbols:
        if id(bound_symbol) in replaced:
            new.bound_symbols.extend(replaced[id(bound_symbol)])
        elif id(bound_symbol) not in dropped:
            new.bound_symbols.append(bound_symbol)
    return new


def _residual_add(
    norm: _Norm,
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
    add = _op(made, norm.x, "ltorch.add")
    if add is None or len(linears) != 1 or _arguments(add).get("alpha") is not None:
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
        if not _is_identity(reader):
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


def _readers(bound_symbols: Sequence[BoundSymbol]) -> dict[str, list[BoundSymbol]]:
    readers: dict[str, list[BoundSymbol]] = {}
    for bound_symbol in bound_symbols:
        for proxy in bound_symbol.proxy_args():
            readers.setdefault(proxy.name, []).append(bound_symbol)
    return readers


def _one_row_input(bound_symbol: BoundSymbol) -> TensorProxy | None:
    """The input row of a linear or ``linears`` of one row and static sizes."""
    if bound_symbol.symbol.id not in (_LINEAR, _LINEARS) or not bound_symbol.args:
        return None
    x = bound_symbol.args[0]
    if not isinstance(x, TensorProxy) or x.ndim == 0 or any(type(s) is not int for s in x.shape):
        return None
    return x if x.numel() == x.shape[-1] else None


def _removable(
    norm: _Norm, row: str, linears: list[BoundSymbol], readers: dict[str, list[BoundSymbol]]
) -> set[int] | None:
    """The ids of the bound symbols that folding ``norm`` into ``linears`` leaves unread (the norm's
    ops and identity conversions of their values), or None when something else reads a value of it."""
    removable = {id(b) for b in norm.ops}
    folded = {id(b) for b in linears}
    values = {p.name for b in norm.ops for p in b.proxy_outputs()} - {norm.x.name, norm.weight.name}
    for value in values:
        for reader in readers.get(value, []):
            if id(reader) in removable or (value == row and id(reader) in folded):
                continue
            if _is_identity(reader):  # ``h.float()`` of a float32 ``h`` returns ``h``: it runs nothing
                removable.add(id(reader))
                continue
            return None
    return removable


def _is_identity(bound_symbol: BoundSymbol) -> bool:
    inputs = {p.name for p in bound_symbol.proxy_args()}
    outputs = bound_symbol.proxy_outputs()
    return bound_symbol.symbol.id in _CONVERSIONS and len(outputs) == 1 and outputs[0].name in inputs


def _folded(
    new: Trace, norm: _Norm, linear: BoundSymbol, add: BoundSymbol | None = None
) -> list[BoundSymbol]:
    """The ``rms_norm_linears`` bound symbol computing ``linear``'s outputs (and, with the residual
    connection ``add`` making the norm's input, that input), recorded in ``new``."""
    from thunder.torch.norm_linears import rms_norm_linears

    if linear.symbol.id == _LINEARS:
        _, weights, biases = _arguments(linear).values()
        wanted = tuple(linear.output)
    else:
        arguments = _arguments(linear)
        weights, biases = (arguments["weight"],), (arguments.get("bias"),)
        wanted = (linear.output,)
    x, addend = (norm.x, None) if add is None else add.args
    with tracectx(new), new.subscope() as scope:
        outputs = rms_norm_linears(
            x, norm.weight, norm.eps, tuple(weights), tuple(biases), norm.style, addend
        )
    made = [b.replace(grad_enabled=linear.grad_enabled) for b in scope]
    return rename_outputs(made, outputs, wanted if add is None else (*wanted, norm.x))


# --- the pattern --------------------------------------------------------------------------------


def _match(row: TensorProxy, made: dict[str, BoundSymbol]) -> _Norm | None:
    """The RMS norm that computes ``row``, if ``row`` is one (the first style that matches)."""
    reshape = made.get(row.name)
    if (
        reshape is not None
        and reshape.symbol.id in _RESHAPES
        and reshape.args
        and isinstance(reshape.args[0], TensorProxy)
        and reshape.args[0].shape == row.shape
    ):
        norm = _match(reshape.args[0], made)  # a reshape to the same shape (Gemma's head slices all rows)
        return norm and dataclasses.replace(norm, ops=(*norm.ops, reshape))
    for match in _STYLES.values():
        norm = match(row, made)
        if norm is not None:
            return norm if norm.x.dtype == row.dtype and norm.x.shape == row.shape else None
    return None


def _llama(row: TensorProxy, made: dict[str, BoundSymbol]) -> _Norm | None:
    """``weight * r.to(x.dtype)``: rounded to x's dtype, then multiplied in it."""
    scale = _op(made, row, "ltorch.mul")
    if scale is None:
        return None
    for weight, rounded in _both_orders(scale):
        if not (_is_norm_weight(weight, row) and weight.dtype == row.dtype == rounded.dtype):
            continue
        if rounded.shape != row.shape:
            continue
        scaled, conversion = _unconverted(rounded, made)
        found = _normalized(scaled, made)
        if found is None:
            continue
        x, eps, ops = found
        ops += [scale] if conversion is None else [conversion, scale]
        return _Norm(x, weight, eps, "llama", tuple(ops))
    return None


def _gemma(row: TensorProxy, made: dict[str, BoundSymbol]) -> _Norm | None:
    """``(r * (1.0 + weight.float())).to(x.dtype)``: multiplied in float32, rounded once."""
    product, conversion = _unconverted(row, made)
    scale = _op(made, product, "ltorch.mul")
    if scale is None or product.dtype != dtypes.float32:
        return None
    for scaled, offset_weight in _both_orders(scale):
        shifted = _op(made, offset_weight, "ltorch.add")
        if scaled.shape != row.shape or shifted is None or offset_weight.dtype != dtypes.float32:
            continue
        terms = [a for a in shifted.args if not isinstance(a, Proxy)]
        upcast = [a for a in shifted.args if isinstance(a, TensorProxy)]
        if terms != [1.0] or len(upcast) != 1 or _arguments(shifted).get("alpha") is not None:
            continue
        weight, weight_conversion = _unconverted(upcast[0], made)
        found = _normalized(scaled, made)
        if found is None or not _is_norm_weight(weight, row):
            continue
        x, eps, ops = found
        ops += [op for op in (weight_conversion, shifted, scale, conversion) if op is not None]
        return _Norm(x, weight, eps, "gemma", tuple(ops))
    return None


# Gemma's first: in float32 its ``r * (1.0 + weight)`` also reads as Llama's product with a computed weight
_STYLES: dict[str, Callable[[TensorProxy, dict[str, BoundSymbol]], _Norm | None]] = {
    "gemma": _gemma,
    "llama": _llama,
}


def _normalized(value: TensorProxy, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, float, list] | None:
    """``(x, eps, ops)`` when ``value`` is ``h * rsqrt(mean(h**2, -1, keepdim=True) + eps)`` with
    ``h = x.float()`` (or ``x`` itself in float32), computed in float32."""
    scale = _op(made, value, "ltorch.mul")
    if scale is None or value.dtype != dtypes.float32:
        return None
    for h, reciprocal in _both_orders(scale):
        if h.shape != value.shape or reciprocal.shape != (*h.shape[:-1], 1):
            continue
        rsqrt = _op(made, reciprocal, "ltorch.rsqrt")
        shifted = rsqrt and _op(made, rsqrt.args[0], "ltorch.add")
        if shifted is None or _arguments(shifted).get("alpha") is not None:
            continue
        numbers = [a for a in shifted.args if not isinstance(a, Proxy)]
        variances = [a for a in shifted.args if isinstance(a, TensorProxy)]
        if len(numbers) != 1 or type(numbers[0]) not in (int, float) or len(variances) != 1:
            continue
        mean = _op(made, variances[0], "ltorch.mean")
        square = None if mean is None else _square_of(_arguments(mean)["input"], made)
        if mean is None or square is None or square[0] is not h or not _is_last_dim_mean(mean, h.ndim):
            continue
        x, conversion = _unconverted(h, made)
        ops = [square[1], mean, shifted, rsqrt, scale]
        return x, float(numbers[0]), ops if conversion is None else [conversion, *ops]
    return None


def _square_of(value: Any, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, BoundSymbol] | None:
    """``(h, op)`` when ``value`` is ``h ** 2``, ``h * h`` or ``square(h)``."""
    op = made.get(value.name) if isinstance(value, TensorProxy) else None
    if op is None:
        return None
    args = op.args
    if op.symbol.id == "ltorch.pow" and len(args) == 2 and type(args[1]) in (int, float) and args[1] == 2:
        base = args[0]
    elif op.symbol.id == "ltorch.mul" and len(args) == 2 and args[0] is args[1]:
        base = args[0]
    elif op.symbol.id == "ltorch.square" and len(args) == 1:
        base = args[0]
    else:
        return None
    return (base, op) if isinstance(base, TensorProxy) else None


def _is_last_dim_mean(mean: BoundSymbol, ndim: int) -> bool:
    arguments = _arguments(mean)
    dim = arguments.get("dim")
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    return (
        len(dims) == 1
        and dims[0] in (-1, ndim - 1)
        and arguments.get("keepdim") is True
        and arguments.get("dtype") is None
    )


def _is_norm_weight(weight: Any, row: TensorProxy) -> bool:
    return (
        isinstance(weight, TensorProxy)
        and weight.shape == (row.shape[-1],)
        and weight.device == row.device
        and dtypes.is_float(weight.dtype)
    )


def _op(made: dict[str, BoundSymbol], value: Any, symbol_id: str) -> BoundSymbol | None:
    """The bound symbol making ``value`` if it is a call of ``symbol_id``."""
    op = made.get(value.name) if isinstance(value, TensorProxy) else None
    return op if op is not None and op.symbol.id == symbol_id else None


def _both_orders(op: BoundSymbol) -> list[tuple[TensorProxy, TensorProxy]]:
    """A binary op's two tensor operands, in both orders (multiplication commutes exactly)."""
    a, b = (tuple(op.args) + (None, None))[:2]
    if not (isinstance(a, TensorProxy) and isinstance(b, TensorProxy)) or op.kwargs:
        return []
    return [(a, b), (b, a)]


def _unconverted(value: TensorProxy, made: dict[str, BoundSymbol]) -> tuple[TensorProxy, BoundSymbol | None]:
    """``value``'s source and the conversion making it, when a dtype conversion makes it."""
    op = made.get(value.name)
    if op is None or op.symbol.id not in _CONVERSIONS or not op.args:
        return value, None
    source = op.args[0]
    if not (
        isinstance(source, TensorProxy) and source.shape == value.shape and source.device == value.device
    ):
        return value, None
    return source, op


def _arguments(bound_symbol: BoundSymbol) -> dict[str, Any]:
    """A bound symbol's arguments by parameter name, defaults filled in."""
    bound = _signature(bound_symbol.symbol).bind(*bound_symbol.args, **bound_symbol.kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


@functools.cache
def _signature(symbol: Symbol) -> inspect.Signature:
    function = symbol.decomposition or symbol.meta
    assert function is not None, f"{symbol.id} has neither a meta nor a decomposition"  # as Symbol.__call__
    return inspect.signature(function)
