"""Functionalization of in-place operations, done while the program is traced.

Traces are functional (SSA): ``x.add_(y)`` records ``t1 = ltorch.add(x, y)``, never a mutation. The
user's code still holds the proxy ``x``, so each trace that sees a mutation keeps a ``Mutations``
table (``trace.mutations``, made on the first in-place op) saying which proxy holds the *current*
value of each tensor the program mutated. ``Symbol.__call__`` consults it: every argument is replaced
by its current value before a symbol is recorded, so later uses of ``x`` read ``t1``.

Views share memory with their base in eager PyTorch. A view is remembered as its root tensor plus
the chain of view prims (``reshape``, ``transpose``, ``slice_prim``, ``broadcast_in_dim``) that
leads from the root to it; a chain is read off the leaf prims of the view symbol's decomposition.
Mutating a view writes the new value back through the chain (each prim has a write-back rule) into
a new value of the root; reading a view after its root changed replays the chain on the root's
current value. Every alias of a root therefore sees every mutation, as in eager.

Mutated computation inputs (arguments, parameters, buffers) are written back to the real tensors
at the end of the computation: ``finish`` (``inplace_finish.py``) appends one ``inplace.copy_(x, t5)``
per mutated input (recorded under no_grad, run by PyTorch) before the return. That is the epilogue; it is part of the
computation trace, so it prints, and DCE keeps it (it is tagged ``side_effect``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from thunder.core import dtypes, prims
from thunder.core.epilogue_symbols import (  # what a printed trace calls as ``inplace.*``, and their symbols
    check_true_count,
    copy_,
    copy_symbol,
    overwritten_error,
    overwritten_error_symbol,
    replay_views,
    returned_view,
    snapshot,
    true_count,
    unseen_write,
    unseen_write_symbol,
)
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace, get_tracectx

__all__ = [
    "Mutations",
    "note_aliasing",
    "mutate",
    "resize",
    "current",
    "copy_",
    "copy_symbol",
    "snapshot",
    "unseen_write",
    "overwritten_error",
    "overwritten_error_symbol",
    "true_count",
    "check_true_count",
    "returned_view",
    "replay_views",
    "torch_step",
    "ALIAS_SYMBOL_IDS",
    "EAGER_VIEWS",
]

# Symbols that return their input itself when they have nothing to do, like eager (``x.to(x.dtype)``,
# ``x.float()`` on a float tensor): such an output is the same tensor. Any other symbol that returns
# one of its inputs (an optimization in a decomposition) returns a copy in eager, and is treated so.
# So do the dropouts that drop nothing (``training=False`` or ``p=0``), ``positive``, ``conj`` of a
# real tensor, ``resolve_conj``/``resolve_neg`` and ``sum_to_size`` to the same size: a write through
# ``F.dropout(x, training=False)`` reaches ``x`` in eager. So does ``torch.as_tensor(x)`` of a tensor
# with its own dtype and device (eager returns ``x`` itself; a write through it was lost until 2026-11-28).
ALIAS_SYMBOL_IDS = frozenset(
    {"ltorch.to", "ltorch.type_as", "ltorch.float", "ltorch.double", "ltorch.half", "ltorch.bfloat16",
     "ltorch.long", "ltorch.int", "ltorch.bool", "ltorch.contiguous", "ltorch.detach", "ltorch.type",
     "ltorch.short", "ltorch.char", "ltorch.byte", "ltorch.cfloat", "ltorch.cdouble", "ltorch.positive",
     "ltorch.conj", "ltorch.resolve_conj", "ltorch.resolve_neg", "ltorch.sum_to_size", "ltorch.dropout",
     "ltorch.alpha_dropout", "ltorch.feature_alpha_dropout", "ltorch.dropout1d", "ltorch.dropout2d",
     "ltorch.dropout3d", "ltorch.as_tensor"}
)  # fmt: skip

# ---------------------------------------------------------------------------------------------
# View steps: one view prim, replayable on a new base and invertible for write-back


def _inverse_permutation(permutation: Any) -> tuple[int, ...]:
    inverse = [0] * len(permutation)
    for position, d in enumerate(permutation):
        inverse[d] = position
    return tuple(inverse)


def _write_reshape(base: TensorProxy, value: TensorProxy, shape: Any) -> TensorProxy:
    return prims.reshape(value, base.shape)


def _write_transpose(base: TensorProxy, value: TensorProxy, permutation: Any) -> TensorProxy:
    return prims.transpose(value, _inverse_permutation(permutation))


def _write_broadcast(
    base: TensorProxy, value: TensorProxy, shape: Any, broadcast_dimensions: Any
) -> TensorProxy:
    if base.numel() != value.numel():
        raise RuntimeError(_OVERLAP_ERROR)
    return prims.reshape(value, base.shape)


_OVERLAP_ERROR = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location "
    "(an in-place operation on an expanded tensor). Please clone() the tensor before performing the operation."
)


def _zero_of(dtype: dtypes.dtype) -> Any:
    return False if dtype is dtypes.bool8 else 0


def _write_slice(base: TensorProxy, value: TensorProxy, start: Any, end: Any, strides: Any) -> TensorProxy:
    if value.numel() == 0:
        return base
    return write_slice(base, value, start, end, strides)


def _write_slice_decomposition(
    base: TensorProxy, value: TensorProxy, start: Any, end: Any, strides: Any
) -> TensorProxy:
    config = []
    for size, low, stride, out_size in zip(base.shape, start, strides, value.shape):
        high = size - low - (out_size - 1) * stride - 1
        config.append((low, high, stride - 1))
    padded = prims.pad(value, _zero_of(value.dtype), config)
    inside = prims.full(value.shape, True, device=value.device, dtype=dtypes.bool8)
    mask = prims.pad(inside, False, config)
    return prims.where(mask, padded, base)


# ``base`` with ``base[start:end:strides] = value`` (one slice per dim), out of place: one symbol, so that
# reinplacing (transforms/reinplace.py) can write it in place as ``write_slice_``; executors run its
# decomposition (a pad and a select).
write_slice = Symbol(
    name="write_slice", id="inplace.write_slice", decomposition=_write_slice_decomposition, module="inplace"
)


def write_slice_(base: torch.Tensor, value: torch.Tensor, start: Any, end: Any, strides: Any) -> torch.Tensor:
    """``write_slice`` in place: ``base[start:end:strides] = value``, returning ``base``."""
    base[tuple(slice(low, high, step) for low, high, step in zip(start, end, strides))].copy_(value)
    return base


def index_put_(
    base: torch.Tensor, indices: Any, values: torch.Tensor, accumulate: bool = False
) -> torch.Tensor:
    """``prims.index_put`` in place (transforms/reinplace.py): ``aten.index_put_``, which takes None
    for a dim taken whole (``keys[:, :, pos] = k``), where ``Tensor.index_put_`` takes tensors only."""
    return torch.ops.aten.index_put_(base, list(indices), values, accumulate)


def _write_opaque(base: TensorProxy, value: TensorProxy, *args: Any, **kwargs: Any) -> TensorProxy:
    raise NotImplementedError(
        "writing in place into a view that thunder computes as a copy (a fallback, or a view op such as "
        "unfold that thunder gathers) is not supported: the write would not reach the base; clone() the "
        "view first if the base need not change"
    )


def _write_detached(base: TensorProxy, value: TensorProxy) -> TensorProxy:
    return value


# Opaque views whose values are their base's: a write through one is the base's new value (eager's
# ``x.detach()`` shares ``x``'s memory). Autograd does not see such a write (``Mutations.mutate``).
DETACHED_VIEWS = frozenset({"ltorch.detach"})

# prim id -> write-back rule (base, new value of the view, the prim's other arguments) -> new base
WRITE_BACK: dict[str, Callable[..., TensorProxy]] = {
    prims.reshape.id: _write_reshape,
    prims.transpose.id: _write_transpose,
    prims.broadcast_in_dim.id: _write_broadcast,
    prims.slice_prim.id: _write_slice,
}


@dataclass(frozen=True)
class ViewStep:
    """``symbol(base, *args, **kwargs)`` is the view; ``write_back`` inverts it."""

    symbol: Symbol
    args: tuple
    kwargs: dict
    opaque: bool = False  # a whole symbol known to return a view, not a view prim

    def apply(self, base: TensorProxy) -> TensorProxy:
        return self.symbol(base, *self.args, **self.kwargs)

    @property
    def detached(self) -> bool:
        return self.opaque and self.symbol.id in DETACHED_VIEWS

    def write_back(self, base: TensorProxy, value: TensorProxy) -> TensorProxy:
        if self.detached:
            return _write_detached(base, value)
        rule = _write_opaque if self.opaque else WRITE_BACK.get(self.symbol.id, _write_opaque)
        return rule(base, value, *self.args, **self.kwargs)


def _leaves(bound_symbol: BoundSymbol) -> list[BoundSymbol]:
    if not bound_symbol.subsymbols:
        return [bound_symbol] if bound_symbol.symbol.is_leaf else []
    return [leaf for sub in bound_symbol.subsymbols for leaf in _leaves(sub)]


def is_view_symbol(symbol: Symbol) -> bool:
    """Whether the symbol's result shares memory with its input in eager (shape ops like repeat copy)."""
    return "view" in symbol.tags or (symbol.module == "ltorch" and symbol.name in EAGER_VIEWS)


# torch operators that return views in eager; when thunder's decomposition of one is not a chain of
# view prims (``unfold`` gathers), its result is an opaque view: recomputed when its base changes, and
# writing into it is an error rather than a silently lost update.
EAGER_VIEWS = frozenset({
    "adjoint", "as_strided", "diagonal", "expand", "expand_as", "movedim", "moveaxis", "narrow", "permute",
    "select", "squeeze", "transpose", "t", "T", "H", "mT", "mH", "real", "imag", "view_as_real",
    "view_as_complex", "unflatten", "unfold", "unsqueeze", "view", "view_as", "unbind", "split",
    "split_with_sizes", "swapaxes", "swapdims", "chunk", "tensor_split", "hsplit", "vsplit", "dsplit",
    "getitem", "alias", "detach", "reshape", "flatten", "ravel", "broadcast_to", "reshape_as",
    "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "meshgrid",
})  # fmt: skip

# Views of several tensors at once, each output a view of the operand at its position (eager's
# ``broadcast_tensors(a, b)``, ``meshgrid(a, b)``, ``atleast_1d(a, b)``).
VIEWS_OF_EACH = frozenset({"broadcast_tensors", "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d"})


# Views only for some arguments (advanced indexing copies; reshape copies what it cannot view): their
# results alias the input exactly when the decomposition is a chain of view prims.
SOMETIMES_VIEWS = frozenset({"getitem", "reshape", "flatten", "ravel", "reshape_as"})


def _opaque_view(bound_symbol: BoundSymbol) -> bool:
    symbol = bound_symbol.symbol
    if symbol.module == "ltorch" and symbol.name in SOMETIMES_VIEWS:
        return False
    return "view" in symbol.tags or (symbol.module == "ltorch" and symbol.name in EAGER_VIEWS)


def view_chains(bound_symbol: BoundSymbol, source: TensorProxy) -> dict[str, tuple[ViewStep, ...]]:
    """For each output of ``bound_symbol`` that is a view of ``source``: the view steps leading to it."""
    chains = _prim_chains(bound_symbol, source)
    output = bound_symbol.output
    if isinstance(output, TensorProxy) and output.name not in chains and _opaque_view(bound_symbol):
        first, *rest = bound_symbol.args  # replayed as a whole, never written through
        chains[output.name] = (
            ViewStep(bound_symbol.symbol, tuple(rest), dict(bound_symbol.kwargs), opaque=True),
        )
    return chains


def _prim_chains(bound_symbol: BoundSymbol, source: TensorProxy) -> dict[str, tuple[ViewStep, ...]]:
    chains: dict[str, tuple[ViewStep, ...]] = {source.name: ()}
    for leaf in _leaves(bound_symbol):
        if leaf.symbol.id not in WRITE_BACK or not leaf.args or not isinstance(leaf.args[0], Proxy):
            continue
        chain = chains.get(leaf.args[0].name)
        if chain is None or any(isinstance(p, Proxy) for p in tree_leaves(leaf.args[1:])):
            continue
        for out in leaf.proxy_outputs():
            chains[out.name] = (*chain, ViewStep(leaf.symbol, tuple(leaf.args[1:]), dict(leaf.kwargs)))
    return {p.name: chains[p.name] for p in bound_symbol.proxy_outputs() if p.name in chains}


# ---------------------------------------------------------------------------------------------
# The table of current values


@dataclass
class _Root:
    proxy: TensorProxy  # the tensor as the program first saw it
    value: TensorProxy  # its current value
    generation: int = 0  # bumped by every mutation of the root or one of its views
    # the value autograd still sees, while writes it does not see (under torch.no_grad(), or through
    # ``detach()``) changed the values of a tensor that requires grad (``Mutations._materialize``)
    unseen: TensorProxy | None = None


@dataclass
class _Alias:
    root: str
    chain: tuple[ViewStep, ...]
    value: TensorProxy  # the alias's value at ``generation`` of its root
    generation: int


class Mutations:
    """Which proxy holds the current value of every tensor a trace mutated (or a view of one)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.roots: dict[str, _Root] = {}
        self.aliases: dict[str, _Alias] = {}
        # for each proxy that has been an alias's value: that alias, the tensor the user's code holds
        # (whose layout the value keeps); an older value still stands for it (``layouts._held_name``)
        self.holders: dict[str, str] = {}
        # the tensors the user's code passed to the top-level symbol being recorded, by the id of the
        # current value each resolved to (``Symbol.__call__``), and each view's source as the user's
        # code held it: after ``a.copy_(b)`` one value stands for ``a`` and ``b``, and only the user's
        # argument tells which one a view or a layout question is about (``layouts._held_name``)
        self.user_call: dict[int, TensorProxy] = {}
        self.view_sources: dict[str, TensorProxy] = {}
        self._busy = 0  # >0 while this table records ops of its own (replays, write-backs)
        for bound_symbol in trace.bound_symbols:  # views taken before the first mutation
            self._note_views(bound_symbol, (bound_symbol.args, bound_symbol.kwargs))

    @classmethod
    def of(cls, trace: Trace) -> Mutations:
        if trace.mutations is None:
            trace.mutations = cls(trace)
        return trace.mutations

    # reading
    def current(self, proxy: TensorProxy) -> TensorProxy:
        alias = self.aliases.get(proxy.name)
        if alias is None:
            return proxy
        root = self.roots[alias.root]
        self._materialize(root)
        if alias.generation != root.generation:
            value = root.value
            self._busy += 1
            try:
                for step in alias.chain:
                    value = step.apply(value)
            finally:
                self._busy -= 1
            alias.value, alias.generation = value, root.generation
            self.holders[value.name] = proxy.name
        return alias.value

    def resolve(self, values: Any) -> Any:
        """``values`` with every proxy replaced by its current value (top-level calls only)."""
        if self._busy or not self.trace.at_top_level:
            return values
        return tree_map(lambda x: self.current(x) if isinstance(x, TensorProxy) else x, values)

    def root_and_chain(self, proxy: TensorProxy) -> tuple[str, tuple[ViewStep, ...]]:
        """The name of the tensor whose memory ``proxy`` views, and the steps from it."""
        alias = self.aliases.get(proxy.name)
        return (proxy.name, ()) if alias is None else (alias.root, alias.chain)

    def _alias(self, proxy: TensorProxy) -> _Alias:
        alias = self.aliases.get(proxy.name)
        if alias is None:
            self.roots[proxy.name] = _Root(proxy, proxy)
            alias = self.aliases[proxy.name] = _Alias(proxy.name, (), proxy, 0)
        return alias

    # recording
    def recorded(self, bound_symbol: BoundSymbol, user_arguments: tuple[tuple, dict]) -> Any:
        """Note the views ``bound_symbol`` made; returns the output the user's code should hold."""
        output = bound_symbol.output
        if self._busy or not self.trace.at_top_level or not isinstance(output, (TensorProxy, tuple, list)):
            return output
        resolved = [p for p in bound_symbol.proxy_args() if isinstance(p, TensorProxy)]
        user = _unique_tensor_proxies(user_arguments)
        symbol = bound_symbol.symbol
        if isinstance(output, TensorProxy) and any(output is p for p in resolved):
            position = next(i for i, p in enumerate(resolved) if p is output)
            if symbol.id in ALIAS_SYMBOL_IDS or is_view_symbol(symbol):
                held = user[position] if len(user) == len(resolved) else output
                return new_view_object(self.trace, symbol, held)
            return self._copy_of(output)
        self._note_views(bound_symbol, user_arguments)
        if isinstance(output, (tuple, list)) and is_view_symbol(symbol):
            passed = user if len(user) == len(resolved) else resolved
            return pieces_viewing_inputs(self.trace, symbol, output, resolved, passed)
        return output

    def _note_views(self, bound_symbol: BoundSymbol, user_arguments: tuple[tuple, dict]) -> None:
        resolved = [p for p in bound_symbol.proxy_args() if isinstance(p, TensorProxy)]
        user = _unique_tensor_proxies(user_arguments)
        if "reads_metadata_of_others" in bound_symbol.symbol.tags:  # x.view_as(z): a view of x only
            resolved, user = resolved[:1], user[:1]
        if bound_symbol.symbol.name in VIEWS_OF_EACH and len(resolved) == len(user) > 1:
            for one_resolved, one_user in zip(resolved, user):
                self._note_views_of(bound_symbol, one_resolved, one_user)
            return
        if len(resolved) != 1 or len(user) != 1 or not is_view_symbol(bound_symbol.symbol):
            return
        self._note_views_of(bound_symbol, resolved[0], user[0])

    def _note_views_of(self, bound_symbol: BoundSymbol, resolved: TensorProxy, user: TensorProxy) -> None:
        if _copies_in_eager(bound_symbol, user):
            return
        source = self._alias(user)
        generation = self.roots[source.root].generation
        for name, chain in view_chains(bound_symbol, resolved).items():
            view = next(p for p in bound_symbol.proxy_outputs() if p.name == name)
            if isinstance(view, TensorProxy) and view is not resolved:
                self.aliases[name] = _Alias(source.root, source.chain + chain, view, generation)
                self.view_sources[name] = user

    def _copy_of(self, value: TensorProxy) -> TensorProxy:
        """A tensor equal to ``value`` that does not alias it; it costs nothing until it is mutated."""
        copy = value.replace()
        self.roots[copy.name] = _Root(copy, value)
        self.aliases[copy.name] = _Alias(copy.name, (), value, 0)
        return copy

    def _materialize(self, root: _Root) -> None:
        """Read with gradients on after writes autograd did not see: eager's tensor has the new values,
        and gradients reach it as they would have reached the old ones (``inplace.unseen_write``)."""
        if root.unseen is None or self._busy or not torch.is_grad_enabled():
            return
        self._busy += 1
        try:
            value = unseen_write_symbol()(root.unseen, root.value)
        finally:
            self._busy -= 1
        root.value, root.unseen = value, None
        root.generation += 1

    def _note_overwritten(self, root_name: str) -> None:
        """The current values of a root and its views, which eager's autograd may have saved: its
        backward raises then (the saved tensor's version changed), and so does thunder's."""
        root = self.roots[root_name]
        # made now, while tracing: a backward loaded from the disk cache finds it by this module's
        # attribute (core/disk_cache.py), which tracing the same program sets before the lookup
        overwritten_error_symbol()
        self.trace.overwritten[root.value.name] = root.proxy.name
        for alias in self.aliases.values():
            if alias.root == root_name and alias.generation == root.generation:
                self.trace.overwritten[alias.value.name] = root.proxy.name

    def mutate(self, proxy: TensorProxy, value: TensorProxy) -> None:
        """From now on ``proxy`` (and every alias of its memory) holds ``value``."""
        alias = self._alias(proxy)
        root = self.roots[alias.root]
        # eager's autograd sees no write under no_grad or through a detached alias: the tensor keeps
        # its place in the graph (and an input that requires grad may be written so)
        unseen = not torch.is_grad_enabled() or any(step.detached for step in alias.chain)
        if unseen:
            if root.unseen is None and root.value.requires_grad:
                root.unseen = root.value
            if root.value.requires_grad:
                self._note_overwritten(alias.root)
        else:
            _check_input_mutation(self.trace, root.proxy, value)
            self._materialize(root)
        self._busy += 1
        try:
            bases = [root.value]
            for step in alias.chain[:-1]:
                bases.append(step.apply(bases[-1]))
            if _makes_copies(alias.chain, bases) and _replayable(alias.chain, root.value):
                new = _write_through_copies(root.value, alias.chain, value)
            else:
                new = value
                for step, base in reversed(list(zip(alias.chain, bases))):
                    new = step.write_back(base, new)
        finally:
            self._busy -= 1
        root.value = new
        root.generation += 1
        alias.value, alias.generation = value, root.generation
        self.holders[new.name], self.holders[value.name] = alias.root, proxy.name

    def mutated_inputs(self) -> list[tuple[TensorProxy, TensorProxy]]:
        inputs = {p.name for p in self.trace.args if isinstance(p, TensorProxy)}
        return [
            (r.proxy, r.value) for name, r in self.roots.items() if name in inputs and r.value is not r.proxy
        ]


def _makes_copies(chain: tuple[ViewStep, ...], bases: list[TensorProxy]) -> bool:
    """Whether a step of the chain broadcasts its base to more elements (``expand``)."""
    return any(
        not step.opaque
        and step.symbol.id == prims.broadcast_in_dim.id
        and math.prod(step.args[0]) != base.numel()
        for step, base in zip(chain, bases)
    )


def _replayable(chain: tuple[ViewStep, ...], root: TensorProxy) -> bool:
    steps = [torch_step(step) for step in chain]
    return all(step is not None for step in steps) and not any(type(s) is torch.SymInt for s in root.shape)


def _write_through_copies(root: TensorProxy, chain: tuple[ViewStep, ...], value: TensorProxy) -> TensorProxy:
    """The root's new value after writing ``value`` into a view of it that goes through an ``expand``
    (``x.unsqueeze(1).expand(2, 2, 3)[:, 0]``): eager writes it, unless the view holds two copies of
    one element (a dim of stride 0 and size > 1, eager's overlap check). Each element of the view is
    the root's element at the position the same chain gives an iota shaped like the root: one
    ``index_put`` of the flat root there."""
    meta = replay_views(torch.empty(tuple(root.shape), device="meta"), tuple(torch_step(s) for s in chain))
    if any(stride == 0 and size > 1 for stride, size in zip(meta.stride(), meta.shape)):
        raise RuntimeError(_OVERLAP_ERROR)
    count = root.numel()
    positions = prims.reshape(
        prims.iota(count, start=0, step=1, device=root.device, dtype=dtypes.int64), root.shape
    )
    for step in chain:
        positions = step.apply(positions)
    written = prims.index_put(
        prims.reshape(root, (count,)), [prims.reshape(positions, (positions.numel(),))],
        prims.reshape(value, (value.numel(),)), False,
    )  # fmt: skip
    return prims.reshape(written, tuple(root.shape))


def _copies_in_eager(bound_symbol: BoundSymbol, source: TensorProxy) -> bool:
    """A reshape (flatten, ravel) that eager computes as a copy for the layout of ``source`` (the tensor
    the user's code holds)
    (``x.t().reshape(-1)``): its result is a tensor of its own, not a view (core/layouts.py)."""
    symbol, output = bound_symbol.symbol, bound_symbol.output
    if symbol.module != "ltorch" or symbol.name not in ("reshape", "flatten", "ravel", "reshape_as"):
        return False
    if not isinstance(output, TensorProxy):
        return False
    from thunder.core import layouts  # layouts reads this module's view chains

    return not layouts.reshape_views(source, tuple(output.shape))


def _unique_tensor_proxies(values: Any) -> list[TensorProxy]:
    seen: dict[str, TensorProxy] = {}
    for leaf in tree_leaves(values):
        if isinstance(leaf, TensorProxy) and leaf.name not in seen:
            seen[leaf.name] = leaf
    return list(seen.values())


def _check_input_mutation(trace: Trace, root: TensorProxy, value: TensorProxy) -> None:
    if not torch.is_grad_enabled() or not any(root is p for p in trace.args):
        return
    if value.requires_grad and not root.requires_grad:
        raise NotImplementedError(
            f"the compiled function writes a value that requires grad into its input {root.name}, which "
            "does not, with gradients enabled: eager makes that input part of the autograd graph (it then "
            "requires grad), which thunder cannot do for the caller's tensor. Return the value instead, or "
            "write it under torch.no_grad()"
        )
    if root.requires_grad:
        raise RuntimeError(
            f"a leaf Variable that requires grad ({root.name}) is being used in an in-place operation. "
            "(thunder refuses an in-place update of any input that requires grad: eager allows it for a "
            "tensor that is not a leaf, which thunder cannot tell apart; clone() the input first)"
        )


def note_aliasing(trace: Trace, bound_symbol: BoundSymbol, user_arguments: tuple[tuple, dict]) -> Any:
    """Called by ``Symbol.__call__`` once a trace has mutations, or when a symbol returned an input."""
    symbol = bound_symbol.symbol
    if trace.mutations is None and (symbol.id in ALIAS_SYMBOL_IDS or is_view_symbol(symbol)):
        output = bound_symbol.output
        if isinstance(output, (tuple, list)):  # the pieces that are an input (``x.split(n)``, one piece)
            inputs = bound_symbol.proxy_args()
            return pieces_viewing_inputs(trace, symbol, output, inputs, inputs)
        return new_view_object(trace, symbol, output)
    return Mutations.of(trace).recorded(bound_symbol, user_arguments)


def pieces_viewing_inputs(
    trace: Trace, symbol: Symbol, output: tuple | list, resolved: Any, held: Any
) -> Any:
    """A view symbol's pieces that are an input itself (``x.split(n)`` or ``x.chunk(1)`` with one
    piece, ``x.tensor_split(1)``): eager's piece is a new tensor viewing the input, so a write into
    it reaches the input (and the input's later writes reach it). Each becomes a view of its own of
    the tensor the user's code held there (``held[i]`` for ``resolved[i]``), as a single output that
    is its input does (``new_view_object``)."""
    pieces = []
    for piece in output:
        position = next((i for i, p in enumerate(resolved) if piece is p), None)
        pieces.append(piece if position is None else new_view_object(trace, symbol, held[position]))
    return type(output)(pieces)


def new_view_object(trace: Trace, symbol: Symbol, output: TensorProxy) -> TensorProxy:
    """What the user's code holds for a view symbol that returned its input (``x.view_as(x)``, a
    reshape to the same shape): eager's result is a new tensor object viewing the input, not the input
    (``out is x`` is False; under autograd a non-leaf), so it is a view prim of its own; a symbol of
    ``ALIAS_SYMBOL_IDS`` (``x.float()`` of a float ``x``) returns the input itself, as eager does."""
    if symbol.id in ALIAS_SYMBOL_IDS or not trace.at_top_level:
        return output
    return prims.reshape(output, tuple(output.shape))


# ---------------------------------------------------------------------------------------------
# The API the torch language and the frontends use


def _tracing() -> Trace:
    trace = get_tracectx()
    if trace is None:
        raise RuntimeError("in-place operations are recorded only while tracing")
    return trace


def current(proxy: TensorProxy) -> TensorProxy:
    """The proxy holding ``proxy``'s current value in the trace being built."""
    mutations = _tracing().mutations
    return proxy if mutations is None else mutations.current(proxy)


def mutate(proxy: TensorProxy, value: Any) -> TensorProxy:
    """Record ``proxy[...] = value`` (an in-place op's result): casts like eager, returns ``proxy``.

    ``value`` must broadcast to ``proxy``'s shape; its dtype is cast to ``proxy``'s, which fails as in
    eager when the cast would lose the kind of number (a float result into an integer tensor).
    """
    trace = _tracing()
    if not isinstance(proxy, TensorProxy):
        raise TypeError(f"an in-place operation needs a tensor to write into, got {type(proxy).__name__}")
    mutations = Mutations.of(trace)
    if isinstance(value, TensorProxy):  # the user's code may hand in a proxy that was mutated since
        value = mutations.current(value)
    value = _as_value_of(proxy, value)
    old = mutations.current(proxy)
    if torch.is_grad_enabled() and old.requires_grad and not value.requires_grad:
        # eager: a tensor that requires grad still does after an in-place write of a constant
        # (``y.zero_()``, ``y.fill_(2)``, ``y.copy_(c)``), its gradient zero: the value reads the old one
        everywhere = prims.full(proxy.shape, True, device=proxy.device, dtype=dtypes.bool8)
        value = prims.where(everywhere, value, old)
    mutations.mutate(proxy, value)
    return proxy


def resize(proxy: TensorProxy, value: TensorProxy) -> TensorProxy:
    """Record eager's resizing ``out=``: ``proxy`` (a tensor the program made, of another shape than
    ``value``) becomes a tensor of ``value``'s shape holding ``value``, cast to its dtype.

    The user's code holds the proxy object, so that object takes the new value's name and shape; the
    trace recorded so far refers to a twin with its old name and shape, so that it stays as printed.
    """
    trace = _tracing()
    mutations = Mutations.of(trace)
    construct = f"out= of shape {list(proxy.shape)} for a result of shape {list(value.shape)}"
    if any(proxy is p for p in trace.args):
        raise NotImplementedError(
            f"{construct}: eager resizes out, here an input of the compiled function, which thunder does not "
            "do to the caller's tensor; pass an out tensor of the result's shape, or one the function makes"
        )
    alias = mutations.aliases.get(proxy.name)
    if (alias is not None and alias.chain) or any(
        other.root == proxy.name and other.chain for other in mutations.aliases.values()
    ):
        raise NotImplementedError(
            f"{construct}: eager resizes out, here a view of another tensor or a tensor with views, whose "
            "memory the resized tensor would no longer share; pass an out tensor of the result's shape"
        )
    value = _as_value_of(proxy, value, resizing=True)
    if any(value is p for p in trace.args) or value.name in mutations.aliases:
        value = prims.copy(value)  # a tensor of its own: later writes into ``proxy`` must not reach it
    twin = proxy.replace()
    twin.name = proxy.name
    trace.bound_symbols[:] = [_substitute(b, proxy, twin) for b in trace.bound_symbols]
    for entry in (*mutations.roots.values(), *mutations.aliases.values()):
        for field in ("proxy", "value"):
            if getattr(entry, field, None) is proxy:
                setattr(entry, field, twin)
    proxy.name, proxy.shape, proxy.requires_grad = value.name, value.shape, value.requires_grad
    return proxy


def _substitute(bound_symbol: BoundSymbol, old: TensorProxy, new: TensorProxy) -> BoundSymbol:
    def swap(x: Any) -> Any:
        return new if x is old else x

    if not any(p is old for p in (*bound_symbol.proxy_args(), *bound_symbol.proxy_outputs())):
        return bound_symbol
    return bound_symbol.replace(
        args=tree_map(swap, bound_symbol.args),
        kwargs=tree_map(swap, bound_symbol.kwargs),
        output=tree_map(swap, bound_symbol.output),
        subsymbols=tuple(_substitute(sub, old, new) for sub in bound_symbol.subsymbols),
    )


def _as_value_of(proxy: TensorProxy, value: Any, resizing: bool = False) -> TensorProxy:
    if not isinstance(value, TensorProxy):
        return prims.full(proxy.shape, value, device=proxy.device, dtype=proxy.dtype)
    if value.dtype != proxy.dtype:
        if not torch.can_cast(value.dtype.torch_dtype, proxy.dtype.torch_dtype):
            raise RuntimeError(
                f"result type {_torch_type_name(value.dtype)} can't be cast to the desired output type "
                f"{_torch_type_name(proxy.dtype)}"
            )
        value = prims.convert_element_type(value, proxy.dtype)
    if value.shape != proxy.shape and not resizing:
        from thunder.core.promotion import broadcast_shapes

        try:
            broadcast = broadcast_shapes(value.shape, proxy.shape)
        except Exception:  # noqa: BLE001 -- reported as eager reports it
            broadcast = None
        if broadcast != proxy.shape:
            raise RuntimeError(
                f"output with shape {list(proxy.shape)} doesn't match the broadcast shape "
                f"{list(broadcast or value.shape)}"
            )
        offset = proxy.ndim - value.ndim
        value = prims.broadcast_in_dim(value, proxy.shape, tuple(range(offset, proxy.ndim)))
    return value


def _torch_type_name(dtype: dtypes.dtype) -> str:
    names = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
             torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
             torch.uint8: "Byte", torch.bool: "Bool"}  # fmt: skip
    return names.get(dtype.torch_dtype, str(dtype.torch_dtype))


# ---------------------------------------------------------------------------------------------
# View steps as PyTorch views (a returned view of an updated input, layouts.py)

_PRIM_STEP_NAMES = {
    prims.reshape.id: "reshape", prims.transpose.id: "permute", prims.slice_prim.id: "slice",
    prims.broadcast_in_dim.id: "broadcast_in_dim",
}  # fmt: skip


def torch_step(step: ViewStep) -> tuple | None:
    """``step`` as ``(name, *args)`` for ``replay_views``; None where PyTorch has no view for it."""
    if step.kwargs:
        return None
    if not step.opaque:
        name = _PRIM_STEP_NAMES.get(step.symbol.id)
        return None if name is None else (name, *step.args)
    if step.symbol.module == "ltorch" and callable(getattr(torch.Tensor, step.symbol.name, None)):
        return ("method", step.symbol.name, *step.args)
    return None
