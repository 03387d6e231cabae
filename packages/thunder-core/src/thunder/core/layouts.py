"""Eager's memory layout of a trace's tensors, where eager's answer depends on it.

Traces carry no strides: thunder computes every tensor dense and contiguous. Three constructs
answer differently by the layout eager would have: ``x.view(shape)`` fails where the strides do not
allow the view, ``x.contiguous()`` copies a tensor that is not contiguous (a new tensor, which a write
does not share with ``x``), and ``x.reshape(shape)`` copies instead of viewing. ``x.t().view(-1)``
returned a reshape where eager raises, and ``y = x.t().contiguous(); y.add_(1)`` wrote into ``x``.

A tensor's eager layout is its view chain (``core/inplace.py``: the view prims from the tensor they
view) replayed on a meta tensor of its root's layout. The root is contiguous when a non-view op made
it (eager's ops return contiguous tensors, except elementwise ops on permuted inputs, which keep the
permutation: not modelled). A root that is an input has the strides it had when traced
(``PrologueBuilder.input_strides``), and the prologue checks on every call that eager answers for
that call's input as it did for the traced one (``layouts.guard``): another answer is a cache miss,
a compile for that layout, which raises eager's error where eager raises (``x.view(-1)`` of a
transposed input). A trace no prologue is being built for (a transform's) assumes a contiguous input,
and its computation checks that on every call (``layouts.check``, raising).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from thunder.core.inplace import is_view_symbol, replay_views, torch_step, view_chains
from thunder.core.prologue import GuardFailure, builder_of
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace, get_tracectx

__all__ = ["view_allowed", "is_contiguous", "reshape_views", "guard", "check"]


class _Chains:
    """For each top-level tensor of a trace that is a view: its root and PyTorch view steps."""

    def __init__(self) -> None:
        self.scanned = 0
        self.chains: dict[str, tuple[TensorProxy, tuple]] = {}

    def of(self, trace: Trace, proxy: TensorProxy) -> tuple[TensorProxy, tuple]:
        for bound_symbol in trace.bound_symbols[self.scanned :]:
            self._note(bound_symbol)
        self.scanned = len(trace.bound_symbols)
        name = _held_name(trace, proxy)
        roots = trace.mutations.roots if trace.mutations is not None else {}
        held = roots[name].proxy if name in roots else proxy  # an updated input is still that input
        return self.chains.get(name, (held, ()))

    def _note(self, bound_symbol: BoundSymbol) -> None:
        if not is_view_symbol(bound_symbol.symbol) or not bound_symbol.args:
            return
        source = bound_symbol.args[0]
        if not isinstance(source, TensorProxy):
            return
        root, steps = self.chains.get(source.name, (source, ()))
        for name, chain in view_chains(bound_symbol, source).items():
            more = tuple(torch_step(step) for step in chain)
            if name != source.name and all(step is not None for step in more):
                self.chains[name] = (root, steps + more)


_chains: weakref.WeakKeyDictionary[Trace, _Chains] = weakref.WeakKeyDictionary()


def _held_name(trace: Trace, proxy: TensorProxy) -> str:
    """The name of the tensor the user's code holds whose current value ``proxy`` is: after an in-place
    update a value is made by write-backs (``core/inplace.py``: a transpose of a slice write, for a
    write through ``y.t()[::2]``), whose chain is not the layout of the tensor it stands for."""
    mutations = trace.mutations
    if mutations is None:
        return proxy.name
    for name, alias in mutations.aliases.items():
        if alias.value is proxy and alias.generation == mutations.roots[alias.root].generation:
            return name
    return proxy.name


def _hinted(value: Any) -> Any:
    """``value`` with each symbolic size replaced by the size it had when traced (its hint), unguarded."""
    if isinstance(value, (tuple, list)):
        return type(value)(_hinted(item) for item in value)
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise _Unknown
        return int(hint)
    return value


class _Unknown(Exception):
    pass


def _eager_tensor(trace: Trace, proxy: TensorProxy) -> tuple[torch.Tensor, TensorProxy, tuple] | None:
    """A meta tensor with eager's layout of ``proxy``, its root and steps: the root has the strides of
    the input it is (as traced), else is contiguous. Symbolic sizes take the sizes of the traced call:
    a view of an input is checked with the real ones on every call; an intermediate's may differ where
    another size makes a dim 1 (not modelled)."""
    chains = _chains.get(trace)
    if chains is None:
        chains = _chains[trace] = _Chains()
    root, steps = chains.of(trace, proxy)
    builder = builder_of(trace)
    strides = builder.input_strides.get(root.name) if builder is not None else None
    try:
        shape, dtype = _hinted(tuple(root.shape)), root.dtype.torch_dtype
        if strides is not None and any(root is p for p in trace.args):
            base = torch.empty_strided(shape, strides, dtype=dtype, device="meta")
        else:
            base = torch.empty(shape, dtype=dtype, device="meta")
        return replay_views(base, _hinted(steps)), root, steps
    except Exception:  # noqa: BLE001 -- a size without a hint, a step PyTorch replays otherwise: unknown
        return None


def _decide(proxy: TensorProxy, kind: str, shape: tuple, answer: Any) -> tuple[bool | None, bool]:
    """``answer(eager_tensor)`` where thunder knows eager's layout, else None; and whether the answer
    is checked when the computation runs (then eager's error comes from there).

    A view of an input takes the input's layout as traced, and the prologue checks that a later call's
    input gets the same answer: another answer is a cache miss, a compile for that layout. Where no
    prologue is being built (a trace a transform makes) the input is assumed contiguous and the
    computation checks it on every call (``layouts.check``: another answer raises)."""
    trace = get_tracectx()
    if trace is None or trace.depth > 1:  # inside a decomposition: thunder's own ops, not the user's
        return None, False
    modelled = _eager_tensor(trace, proxy)
    if modelled is None:
        return None, False
    tensor, root, steps = modelled
    try:
        decided = answer(tensor)
    except _Unknown:
        return None, False
    if not any(root is p for p in trace.args):
        return decided, False
    builder = builder_of(trace)
    arguments = (root, steps, kind, shape, decided)
    if builder is not None and root.name in builder.input_strides:
        traced = builder.input_strides[root.name]
        if builder.add_layout_guard(BoundSymbol(guard_symbol(), (*arguments, traced), {}, None, ())):
            return decided, False
    bound = BoundSymbol(check_symbol(), arguments, {}, None, (), grad_enabled=False)
    if trace.depth == 0:
        trace.record(bound)
    else:  # the user's call being recorded: the check goes before it
        trace.bound_symbols.append(bound)
    return decided, True


def _viewable(tensor: torch.Tensor, shape: tuple) -> bool:
    try:
        tensor.view(_hinted(shape))
    except RuntimeError:
        return False
    return True


def view_allowed(proxy: TensorProxy, shape: tuple) -> bool:
    """False where eager's ``proxy.view(shape)`` fails."""
    decided, checked_when_run = _decide(proxy, "view", tuple(shape), lambda t: _viewable(t, tuple(shape)))
    return decided is not False or checked_when_run


def is_contiguous(proxy: TensorProxy) -> bool:
    """Whether eager's ``proxy`` is contiguous (True where the layout is not modelled)."""
    decided, _ = _decide(proxy, "contiguous", (), lambda t: t.is_contiguous())
    return decided is not False


def reshape_views(proxy: TensorProxy, shape: tuple) -> bool:
    """Whether eager's ``proxy.reshape(shape)`` is a view, not a copy (True where not modelled)."""
    decided, _ = _decide(proxy, "reshape", tuple(shape), lambda t: _viewable(t, tuple(shape)))
    return decided is not False


# ---------------------------------------------------------------------------------------------
# The check on every call


def _answer(tensor: torch.Tensor, kind: str, shape: tuple) -> bool:
    return tensor.is_contiguous() if kind == "contiguous" else _viewable(tensor, shape)


def _guard(x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple) -> None:
    """In the prologue: eager answers for ``x``'s layout as for the one traced (``traced``: its strides,
    for the recompile reason), else another entry."""
    try:
        actual = _answer(replay_views(x, steps), kind, shape)
    except Exception as error:  # noqa: BLE001 -- a view PyTorch refuses for this layout: not this entry
        raise GuardFailure from error
    if actual is not expected:
        raise GuardFailure


def _guard_meta(x: TensorProxy, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple) -> None:
    return None


_guard_symbol: Symbol | None = None


def guard_symbol() -> Symbol:
    """``layouts.guard(x, steps, kind, shape, expected, traced)``: the prologue's check of an input's layout."""
    global _guard_symbol
    if _guard_symbol is None:
        _guard_symbol = Symbol(
            name="guard", id="layouts.guard", meta=_guard_meta, module="layouts", fn=_guard
        )
    return _guard_symbol


guard = _guard  # what ``layouts.guard`` names in a printed prologue


def describe_guard(
    x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple
) -> tuple:
    """For a recompile reason: the strides before and after, and what eager does otherwise for them."""
    construct = {"view": "view({})", "reshape": "reshape({})", "contiguous": "contiguous()"}[kind]
    construct = construct.format(list(shape))
    of = "x" + "".join(f".{step[0]}({', '.join(map(repr, step[1:]))})" for step in steps)
    verb = {"view": ("fails", "works"), "reshape": ("copies", "views"), "contiguous": ("copies", "views")}[
        kind
    ]
    does, otherwise = (verb[1], verb[0]) if expected else (verb[0], verb[1])
    consequence = f"eager's {of}.{construct} {does} for the first, {otherwise} for the second"
    return f"strides {tuple(traced)}", f"strides {tuple(x.stride())}", consequence


def _check(x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool) -> None:
    tensor = replay_views(x, steps)
    if kind == "view":
        tensor.view(shape)  # eager's error where this call's layout does not allow the view
        return
    actual = _answer(tensor, kind, shape)
    if actual != expected:
        construct = "contiguous()" if kind == "contiguous" else f"reshape({list(shape)})"
        raise RuntimeError(
            f"thunder compiled this program for a contiguous input: {construct} of a view of it "
            f"{'copies' if (kind == 'contiguous') != expected else 'views'} in eager for that layout, and "
            f"this call's input (strides {tuple(x.stride())}) makes eager do otherwise. Pass a "
            "contiguous tensor (x.contiguous()), or compile a separate function for this layout"
        )


def _check_meta(x: TensorProxy, steps: tuple, kind: str, shape: tuple, expected: bool) -> None:
    return None


_check_symbol: Symbol | None = None


def check_symbol() -> Symbol:
    """``layouts.check(x, steps, kind, shape, expected)``: eager's decision for the input's real layout."""
    global _check_symbol
    if _check_symbol is None:
        from thunder.core.executor import get_executor

        _check_symbol = Symbol(
            name="check", id="layouts.check", meta=_check_meta, module="layouts", fn=_check,
            executor=get_executor("torch"), tags=frozenset({"side_effect"}),
        )  # fmt: skip
    return _check_symbol


check = _check  # what ``layouts.check`` names in a printed trace
