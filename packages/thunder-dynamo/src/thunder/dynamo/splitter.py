"""Deciding, node by node, what thunder runs, and splitting an FX graph at the boundaries.

A ``call_function`` or ``call_method`` node is thunder's when its target has a thunder symbol (or
is a Python operator that proxies implement), the symbol accepts proxies built from the metadata
Dynamo recorded on the node's inputs, its outputs agree with that metadata, and one of the
executors runs what it recorded. Everything else goes to another piece, with a ``SplitReason``.
Runs of neighbouring nodes with the same verdict become one submodule of ``split_module``.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.experimental import symbolic_shapes
from torch.fx.passes.split_module import split_module

from thunder.core import dtypes, fallback
from thunder.core.executor import Executor
from thunder.core.proxies import TensorProxy, tensor_method
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, tracectx
from thunder.core.transforms.claim_executors import claim_executors
from thunder.dynamo.reasons import SplitReason, SplitReasonType
from thunder.torch.inplace import torch_lookaside

__all__ = ["SplitResult", "check_node", "split_graph", "thunder_callable", "example_value", "concrete"]

# Python's operators on proxies call the tensor methods the torch language registers.
_PYTHON_BUILTINS: frozenset[Any] = frozenset(
    {getattr(operator, name) for name in dir(operator) if not name.startswith("_")}
    | {builtins.getattr, builtins.len, builtins.abs, builtins.min, builtins.max}
)
# Nodes that change global state for the nodes after them; split_module copies them into each piece.
_GLOBAL_STATE_TARGETS = (torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast)


def example_value(node: torch.fx.Node) -> Any:
    """What Dynamo recorded for the node's value: fake tensors, SymInts, Python values."""
    return node.meta.get("example_value", node.meta.get("val"))


def _hint(value: torch.SymInt | torch.SymBool) -> int | bool:
    """The value Dynamo saw (``guarding_hint_or_throw`` from torch 2.12; before it, the node's hint)."""
    hint = getattr(symbolic_shapes, "guarding_hint_or_throw", None)
    if hint is not None:
        return hint(value)
    return value.node.require_hint()


def concrete(value: Any) -> Any:
    """A symbolic int, float or bool replaced by the value it has in the example Dynamo traced."""
    if isinstance(value, (torch.SymInt, torch.SymBool)):
        return _hint(value)
    if isinstance(value, torch.SymFloat):
        return float(value.node.hint)
    return value


def _describe(node: torch.fx.Node) -> str:
    return f"node with name: {node.name} and target: {node.target}"


def _to_proxy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.layout is not torch.strided:
            raise NotImplementedError(f"thunder takes strided tensors only, not {value.layout}")
        dtypes.to_dtype(value.dtype)  # raises for dtypes thunder has no counterpart of
        shape = tuple(concrete(size) for size in value.shape)
        return TensorProxy(
            shape=shape, dtype=value.dtype, device=value.device, requires_grad=value.requires_grad
        )
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return concrete(value)
    if isinstance(value, (tuple, list)):  # torch.Size too
        return (
            tuple(_to_proxy(v) for v in value) if isinstance(value, tuple) else [_to_proxy(v) for v in value]
        )
    return value


def _proxy_arguments(node: torch.fx.Node) -> tuple[tuple, dict]:
    proxies: dict[torch.fx.Node, Any] = {}

    def proxy_for(argument: torch.fx.Node) -> Any:
        if argument not in proxies:
            if "example_value" not in argument.meta and "val" not in argument.meta:
                raise ValueError(f"Dynamo recorded no example value for {argument.name}")
            proxies[argument] = _to_proxy(example_value(argument))
        return proxies[argument]

    args = torch.fx.node.map_arg(node.args, proxy_for)
    kwargs = torch.fx.node.map_arg(node.kwargs, proxy_for)
    return tuple(args), dict(kwargs)


def _method_caller(name: str) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name)(*args, **kwargs)

    return call


def _has_tensor_method(name: str) -> bool:
    if hasattr(TensorProxy, name):
        return True
    try:
        tensor_method(name)
    except NotImplementedError:
        return False
    return True


def thunder_callable(node: torch.fx.Node) -> Callable[..., Any] | None:
    """What thunder's frontend calls for this node, or None if thunder has nothing for it."""
    if node.op == "call_method":
        name = str(node.target)
        receiver = example_value(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(receiver, torch.Tensor) and not _has_tensor_method(name):
            return None
        return _method_caller(name)
    if node.op != "call_function":
        return None
    replacement = torch_lookaside(node.target)  # symbols, with their out=/inplace= forms
    if replacement is not None:
        return replacement
    if node.target in _PYTHON_BUILTINS:
        return node.target  # type: ignore[return-value]
    return None


def _fallback_calls(bound_symbols: Sequence[BoundSymbol]) -> list[BoundSymbol]:
    """The calls of thunder's automatic torch fallback among ``bound_symbols``, at any depth."""
    found = []
    for bound_symbol in bound_symbols:
        if fallback.is_fallback(bound_symbol.symbol):
            found.append(bound_symbol)
        else:
            found += _fallback_calls(bound_symbol.subsymbols)
    return found


def _missing_op_info(node: torch.fx.Node) -> str:
    if callable(node.target) and fallback.torch_name(node.target).startswith("torch."):
        return f"{_describe(node)} only has an automatic torch fallback in thunder."
    return f"{_describe(node)} has no thunder symbol (see thunder.torch)."


def _metadata_mismatch(output: Any, expected: Any) -> str | None:
    """Where thunder's output metadata differs from what PyTorch computed, if anywhere."""
    produced, recorded = tree_leaves(output), tree_leaves(expected)
    produced_tensors = [p for p in produced if isinstance(p, TensorProxy)]
    recorded_tensors = [r for r in recorded if isinstance(r, torch.Tensor)]
    if len(produced_tensors) != len(recorded_tensors):
        return f"thunder returns {len(produced_tensors)} tensors, PyTorch {len(recorded_tensors)}"
    for proxy, tensor in zip(produced_tensors, recorded_tensors):
        shape = tuple(concrete(size) for size in tensor.shape)
        if proxy.shape != shape or dtypes.to_torch_dtype(proxy.dtype) != tensor.dtype:
            return (
                f"thunder computes shape {list(proxy.shape)} and dtype {proxy.dtype}, "
                f"PyTorch shape {list(shape)} and dtype {tensor.dtype}"
            )
    return None


def check_node(node: torch.fx.Node, executors: Sequence[Executor]) -> SplitReason | None:
    """None if thunder can run ``node``; otherwise the reason it cannot."""
    if node.op in ("placeholder", "output", "get_attr"):
        return None
    if node.op not in ("call_function", "call_method") or node.target in _GLOBAL_STATE_TARGETS:
        return SplitReason(
            SplitReasonType.UNSUPPORTED_NODE, f"{_describe(node)} (op {node.op}) is not supported by thunder."
        )
    fn = thunder_callable(node)
    if fn is None:
        return SplitReason(SplitReasonType.MISSING_OP_SUPPORT, _missing_op_info(node))
    scratch = Trace("split check")
    with tracectx(scratch):
        try:
            args, kwargs = _proxy_arguments(node)
        except Exception as error:
            info = f"{_describe(node)}: its inputs could not be made into thunder proxies: {error}"
            return SplitReason(SplitReasonType.EXCEPTION_PROXY_THUNDER_OP, info, error)
        try:
            output = fn(*args, **kwargs)
        except Exception as error:
            info = f"{_describe(node)} raised in thunder's symbol: {type(error).__name__}: {error}"
            return SplitReason(SplitReasonType.EXCEPTION_META_THUNDER_OP, info, error)
    fallbacks = _fallback_calls(scratch.bound_symbols)
    if fallbacks:
        names = ", ".join(sorted({b.symbol.name for b in fallbacks}))
        info = f"{_describe(node)} only has an automatic torch fallback in thunder ({names})."
        return SplitReason(SplitReasonType.MISSING_OP_SUPPORT, info)
    mismatch = _metadata_mismatch(output, example_value(node))
    if mismatch is not None:
        return SplitReason(SplitReasonType.EXCEPTION_META_THUNDER_OP, f"{_describe(node)}: {mismatch}.")
    try:
        claim_executors(scratch, executors)
    except Exception as error:
        info = f"{_describe(node)}: no executor runs it: {error}"
        return SplitReason(SplitReasonType.MISSING_OP_SUPPORT, info, error)
    return None


def _in_global_state_region(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The grad-mode and autocast changes, and the nodes they apply to; thunder pieces do not model them.

    Dynamo guards on the grad mode, so the mode now is the one the graph starts in; a node runs in a
    changed mode from a ``_set_grad_enabled`` to the one restoring that mode.
    """
    initial_grad_mode = grad_mode = torch.is_grad_enabled()
    autocast_depth = 0
    inside: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "call_function" and node.target in _GLOBAL_STATE_TARGETS:
            if node.target is torch._C._set_grad_enabled:
                grad_mode = bool(node.args[0])
            else:
                autocast_depth += 1 if node.target is torch.amp._enter_autocast else -1
            inside.add(node)
        elif grad_mode != initial_grad_mode or autocast_depth > 0:
            inside.add(node)
    return inside


@dataclass
class SplitResult:
    """``split_module``'s output with pieces named ``thunder_N``/``inductor_N``, and the reasons."""

    split_graph_module: torch.fx.GraphModule
    is_thunder: dict[str, bool]  # piece name -> whether thunder runs it
    reasons: list[SplitReason]


def _partition(
    graph_module: torch.fx.GraphModule, executors: Sequence[Executor]
) -> tuple[dict[torch.fx.Node, int], list[bool], list[SplitReason]]:
    regions = _in_global_state_region(graph_module.graph)
    partition_of: dict[torch.fx.Node, int] = {}
    kinds: list[bool] = []  # per partition: whether thunder runs it
    reasons: list[SplitReason] = []
    for node in graph_module.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if node in regions and node.target not in _GLOBAL_STATE_TARGETS:
            reason: SplitReason | None = SplitReason(
                SplitReasonType.UNSUPPORTED_NODE,
                f"{_describe(node)} is inside a grad-mode or autocast region, which thunder pieces do not take.",
            )
        else:
            reason = check_node(node, executors)
        if reason is not None:
            reasons.append(reason)
        if not kinds or kinds[-1] != (reason is None):
            kinds.append(reason is None)
        partition_of[node] = len(kinds) - 1
    return partition_of, kinds, reasons


def split_graph(graph_module: torch.fx.GraphModule, executors: Sequence[Executor]) -> SplitResult:
    """Split ``graph_module`` into runs of nodes thunder supports and runs it does not."""
    partition_of, kinds, reasons = _partition(graph_module, executors)
    split = split_module(
        graph_module,
        graph_module,  # "root_m": unused by split_module
        lambda node: partition_of[node],
        keep_original_order=True,
        keep_original_node_name=True,
    )
    is_thunder: dict[str, bool] = {}
    for node in split.graph.nodes:
        if node.op != "call_module" or not str(node.target).startswith("submod_"):
            continue
        index = int(str(node.target).removeprefix("submod_"))
        name = f"{'thunder' if kinds[index] else 'inductor'}_{index}"
        submodule = split.get_submodule(str(node.target))
        delattr(split, str(node.target))
        split.add_submodule(name, submodule)
        node.target = name
        node._rename(name)
        is_thunder[name] = kinds[index]
    split.recompile()
    return SplitResult(split, is_thunder, reasons)
