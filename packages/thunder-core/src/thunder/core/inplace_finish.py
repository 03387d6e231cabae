"""The end of a traced program's mutations (``finish``): the output's current values, the epilogue's
copies into mutated inputs, and what eager's results share with the inputs (an updated input returned
itself, a view of one taken again of the caller's tensor, a copy where thunder's value would be an
input eager's is not). See ``thunder.core.inplace`` for the functionalization it closes.
"""

from __future__ import annotations

from typing import Any

import torch

from thunder.core import prims
from thunder.core.epilogue_symbols import (
    _returned_view_meta,
    _snapshot_meta,
    copy_symbol,
    returned_view_symbol,
    snapshot_symbol,
)
from thunder.core.inplace import WRITE_BACK, Mutations, _leaves, torch_step
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace

__all__ = ["finish"]


def _returned_views(
    mutations: Mutations, leaves: list, copies: list[tuple[TensorProxy, TensorProxy]]
) -> dict[int, tuple[TensorProxy, tuple]]:
    """Position in the output -> (updated input, PyTorch view steps) for each output that is a view of
    an input the program updated in place (``x.add_(1); return x[0]``): eager returns a view of the
    input, which a later write by the caller changes. Raises where thunder cannot take that view."""
    updated = {destination.name: destination for destination, _ in copies}
    views: dict[int, tuple[TensorProxy, tuple]] = {}
    for position, leaf in enumerate(leaves):
        alias = mutations.aliases.get(leaf.name) if isinstance(leaf, TensorProxy) else None
        if alias is None or not alias.chain or alias.root not in updated:
            continue
        steps = tuple(torch_step(step) for step in alias.chain)
        if any(step is None for step in steps):
            names = ", ".join(step.symbol.name for step in alias.chain)
            raise NotImplementedError(
                f"the compiled function returns a view ({names}) of its input {alias.root}, which it "
                "updates in place; eager's result would share the input's memory, thunder cannot take "
                "that view of the caller's tensor. Return a clone() of the view, or the input itself"
            )
        views[position] = (updated[alias.root], steps)
    return views


def _copies_of_written_inputs(
    trace: Trace, output: Any, user_names: list[str | None], updated: set[str]
) -> Any:
    """``output`` with a copy for each tensor whose value is an unchanged input the program wrote into
    another tensor (``torch.empty(3).copy_(x)``: its value is ``x``'s proxy): eager returns a tensor of
    its own, thunder returned ``x`` itself, which the caller's writes then changed."""
    inputs = {p.name for p in trace.args if isinstance(p, TensorProxy)} - updated
    leaves, spec = tree_flatten(output)
    copies: dict[str, TensorProxy] = {}
    producers = None
    for position, leaf in enumerate(leaves):
        if not isinstance(leaf, TensorProxy) or (user_names[position] == leaf.name and leaf.name in inputs):
            continue
        if leaf.name not in inputs:
            # a value made of an input by view prims only (``v = a.clone(); v[...] = a``: the write's
            # value broadcast and reshaped back) is a view of it when run, where eager's ``v`` is a
            # tensor of its own; so is a view taken after such a write (``v.copy_(a); return v.t()``:
            # ``a.t()`` when run, a view of ``v`` in eager); an eager view of the input (an alias of
            # it) is one legitimately
            alias = trace.mutations.aliases.get(user_names[position])
            if alias is not None and alias.root in inputs or user_names[position] in inputs:
                continue
            producers = producers if producers is not None else _producers(trace)
            if not _viewed_input(leaf, inputs, producers):
                continue
        if leaf.name not in copies:
            copies[leaf.name] = prims.copy(leaf)
        leaves[position] = copies[leaf.name]
    return tree_unflatten(leaves, spec) if copies else output


def _producers(trace: Trace) -> dict[str, BoundSymbol]:
    """Each tensor's maker; a symbol that returns its input itself (``x.view(x.shape)``) makes nothing."""
    return {
        p.name: b
        for b in trace.bound_symbols
        for p in b.proxy_outputs()
        if isinstance(p, TensorProxy) and not any(a is p for a in b.proxy_args())
    }


def _viewed_input(proxy: TensorProxy, inputs: set[str], producers: dict[str, BoundSymbol]) -> bool:
    """Whether ``proxy`` is made of an input by view prims only (it then shares the input's memory)."""
    while proxy.name not in inputs:
        made = producers.get(proxy.name)
        if made is None or not made.args or not isinstance(made.args[0], TensorProxy):
            return False
        leaves = _leaves(made)
        if not leaves or any(leaf.symbol.id not in WRITE_BACK for leaf in leaves):
            return False
        proxy = made.args[0]
    return True


def finish(trace: Trace, output: Any) -> Any:
    """Close a trace's mutations: the output's current values, and the epilogue's copies recorded.

    Call it inside the trace's context, just before recording its return.
    """
    mutations = trace.mutations
    if mutations is None:
        return output
    # which outputs the user's code returned as a mutated input itself (``x.add_(1); return x``), by
    # position, before resolving: ``y = x + 1; x.copy_(y); return y`` returns the same current value,
    # but ``y`` is a tensor of its own in eager, which a later write to ``x`` does not change
    copies = mutations.mutated_inputs()
    destinations = {destination.name for destination, _ in copies}
    returned_as_input = [
        isinstance(leaf, TensorProxy) and leaf.name in destinations for leaf in tree_leaves(output)
    ]
    returned_views = _returned_views(mutations, tree_leaves(output), copies)
    user_names = [leaf.name if isinstance(leaf, TensorProxy) else None for leaf in tree_leaves(output)]
    # an input the program also updates gets its own tensor from the snapshot below, taken before the
    # update; a copy recorded here would read the input after it (v = a.clone(); v.copy_(a); a.add_(1))
    output = _copies_of_written_inputs(trace, mutations.resolve(output), user_names, destinations)
    returned_inputs: dict[str, TensorProxy] = {}  # by name: the updated inputs returned themselves
    # An output that is an input's value from before its update (``v = a.clone(); a.add_(1); return v``:
    # the functional clone is ``a`` itself) must not be the input, which the epilogue overwrites.
    overwritten = {id(destination) for destination, _ in copies}
    snapshots: dict[int, TensorProxy] = {}
    for leaf in tree_leaves(output):
        if (
            id(leaf) in overwritten
            and id(leaf) not in snapshots
            and not (torch.is_grad_enabled() and leaf.requires_grad)
        ):
            snapshots[id(leaf)] = _snapshot_meta(leaf)
            trace.record(
                BoundSymbol(snapshot_symbol(), (leaf,), {}, snapshots[id(leaf)], (), grad_enabled=False)
            )
    output = tree_map(lambda x: snapshots.get(id(x), x) if isinstance(x, TensorProxy) else x, output)
    for destination, value in copies:
        # recorded directly: calling the symbol would replace ``destination`` by its current value
        trace.record(BoundSymbol(copy_symbol(), (destination, value), {}, None, (), grad_enabled=False))
        if not (torch.is_grad_enabled() and (value.requires_grad or destination.requires_grad)):
            returned_inputs[destination.name] = destination
    # An input updated in place and returned is returned itself, as in eager mode: the same object
    # (later writes to it reach the caller's tensor), with its own requires_grad. With gradients the
    # value is returned, since the copy into the input is not recorded by autograd. Found by the name
    # the user's code returned, not by the value: ``c.copy_(a); return c`` has ``a`` itself for its
    # value, which the output gets a copy of (``a`` is an input too), and ``c`` was lost.
    leaves, spec = tree_flatten(output)
    leaves = [
        returned_inputs.get(name, leaf) if isinstance(leaf, TensorProxy) and as_input and name else leaf
        for leaf, as_input, name in zip(leaves, returned_as_input, user_names)
    ]
    # A view of an updated input is taken again of the input itself, as eager's shares its memory
    # (the same condition as above: with gradients the copy into the input is not recorded)
    inputs_returned = set(returned_inputs)
    for position, (destination, steps) in returned_views.items():
        if destination.name in inputs_returned:
            view = _returned_view_meta(destination, steps, leaves[position])
            trace.record(
                BoundSymbol(returned_view_symbol(), (destination, steps), {}, view, (), grad_enabled=False)
            )
            leaves[position] = view
    return tree_unflatten(leaves, spec)
