"""A thunder frontend for FX graphs: one thunder call per FX node, no bytecode interpretation.

An FX graph from TorchDynamo is already a flat program of torch calls, so the computation trace is
made by walking its nodes and calling, on proxies, what ``splitter.thunder_callable`` names for
each: the same callables the support check ran, so a node the splitter accepted traces here too.
The prologue checks the tensors' metadata and the values of Python inputs (ints Dynamo left
symbolic become concrete values: one compile per distinct value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder.core import inplace_finish
from thunder.core.pipeline import CompileData, FrontendResult
from thunder.core.prologue import PrologueBuilder
from thunder.core.proxies import TensorProxy
from thunder.core.sources import ArgumentSource, AttributeSource, ConstantSource, ItemSource, Source
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, tracectx
from thunder.dynamo.splitter import thunder_callable

__all__ = ["fx_frontend"]


def _load(value: Any, source: Source, name: str | None, builder: PrologueBuilder) -> Any:
    """The computation's view of an input: tensors become proxies, Python values are guarded."""
    if isinstance(value, torch.Tensor):
        return builder.add_tensor(value, source, name)
    if type(value) in (tuple, list):
        items = [_load(item, ItemSource(source, i), None, builder) for i, item in enumerate(value)]
        return type(value)(items)
    builder.add_value_guard(value, source)
    return value


def _attribute(graph_module: torch.nn.Module, target: str, builder: PrologueBuilder, root: Source) -> Any:
    value: Any = graph_module
    source = root
    for part in target.split("."):
        value = getattr(value, part)
        source = AttributeSource(source, part)
    return _load(value, source, target.replace(".", "_"), builder)


def _call(node: torch.fx.Node, environment: dict[torch.fx.Node, Any]) -> Any:
    if node.target is torch._C._set_grad_enabled:
        # split_module repeats a grad-mode change at the start of every later piece. The splitter
        # keeps the change itself out of thunder pieces, so a repeat here restates the current mode.
        if torch.is_grad_enabled() != node.args[0]:
            raise NotImplementedError(f"FX node {node.name} changes the grad mode inside a thunder piece")
        return None
    fn: Callable[..., Any] | None = thunder_callable(node)
    if fn is None:
        raise NotImplementedError(f"thunder has nothing for FX node {node.name} ({node.op} {node.target})")
    args = torch.fx.node.map_arg(node.args, environment.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, environment.__getitem__)
    return fn(*args, **kwargs)


def fx_frontend(fn: Any, args: tuple, kwargs: dict, compile_data: CompileData) -> FrontendResult:
    """Trace the FX GraphModule ``fn`` called with ``args`` into a prologue and a computation."""
    if not isinstance(fn, torch.fx.GraphModule):
        raise TypeError(f"fx_frontend compiles torch.fx.GraphModules, not {type(fn).__name__}")
    if kwargs:
        raise TypeError("an FX graph from TorchDynamo takes positional arguments only")
    computation = Trace("computation")
    builder = PrologueBuilder(computation)
    root = ConstantSource(fn, "the compiled FX graph")
    environment: dict[torch.fx.Node, Any] = {}
    position = 0
    with tracectx(computation):
        for node in fn.graph.nodes:
            if node.op == "placeholder":
                environment[node] = _load(args[position], ArgumentSource(position), node.name, builder)
                position += 1
            elif node.op == "get_attr":
                environment[node] = _attribute(fn, str(node.target), builder, root)
            elif node.op == "output":
                output = torch.fx.node.map_arg(node.args[0], environment.__getitem__)
                output = inplace_finish.finish(computation, output)  # current values; the epilogue's copies
                computation.record(BoundSymbol(RETURN, (output,)))
            else:
                environment[node] = _call(node, environment)
    computation.header = "Constructed by thunder.dynamo from an FX graph"
    if not (
        torch.is_grad_enabled()
        and any(p.requires_grad for p in computation.args if isinstance(p, TensorProxy))
    ):
        computation.decorators = ["@torch.no_grad()"]
    return FrontendResult(builder.finish(), computation)
