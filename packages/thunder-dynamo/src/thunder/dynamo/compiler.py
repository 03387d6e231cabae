"""ThunderCompiler: the torch.compile backend that runs the pieces of each FX graph it supports in thunder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from thunder.core.executor import resolve_executors
from thunder.core.options import check_compile_options
from thunder.dynamo.pieces import inductor_piece, thunder_piece
from thunder.dynamo.reasons import (
    CompiledFunction,
    CompilerType,
    SplitReason,
    SplitReasonType,
    SubgraphInfo,
)
from thunder.dynamo.repro import record_first_inputs, save_reproducers
from thunder.dynamo.splitter import example_value, split_graph

__all__ = ["ThunderCompiler"]


def _symbolic_inputs(graph_module: torch.fx.GraphModule) -> list[str]:
    """The placeholders whose example value has symbolic sizes, or is itself symbolic."""
    names = []
    for node in graph_module.graph.find_nodes(op="placeholder"):
        value = example_value(node)
        if isinstance(value, torch.Tensor):
            symbolic = any(isinstance(size, torch.SymInt) for size in value.shape)
        else:
            symbolic = isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))
        if symbolic:
            names.append(node.name)
    return names


class ThunderCompiler:
    """A ``torch.compile`` backend: thunder compiles what it supports, Inductor the rest.

    Each FX graph TorchDynamo captures is split into runs of nodes thunder supports
    (submodules ``thunder_N``, each a ``ThunderModule`` compiled by thunder's pipeline from the FX
    graph) and runs it does not (``inductor_N``, compiled by Inductor with ``torch_inductor_options``).
    A piece whose compiler fails runs eagerly, with a recorded reason. ``subgraph_infos`` keeps one
    ``SubgraphInfo`` per graph, in the order Dynamo handed them over.

    Args:
        torch_inductor_options: Inductor configuration for the pieces thunder does not run.
        **thunder_options: options of ``thunder.jit`` (``executors``, ``cache``, ``transforms``, ...)
            for the pieces thunder runs.

    Example::

        backend = ThunderCompiler()
        compiled = torch.compile(fn, backend=backend)
        compiled(x, y)
        print(backend.subgraph_infos[0].split_reasons)
    """

    def __init__(self, *, torch_inductor_options: dict[str, Any] | None = None, **thunder_options: Any):
        check_compile_options(thunder_options, caller="ThunderCompiler")  # at once, not at the first graph
        self.thunder_options = dict(thunder_options)
        self.torch_inductor_options = dict(torch_inductor_options or {})
        self.subgraph_infos: list[SubgraphInfo] = []

    def __call__(
        self, graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        executors = resolve_executors(self.thunder_options.get("executors"))
        result = split_graph(graph_module, executors)
        reasons = list(result.reasons)
        symbolic = _symbolic_inputs(graph_module)
        if symbolic:
            message = (
                f"inputs {symbolic} have symbolic sizes; thunder pieces are compiled for the concrete "
                "values of each call (one compile per distinct value), Inductor pieces stay symbolic."
            )
            reasons.append(SplitReason(SplitReasonType.SYMBOLIC_SHAPES_SPECIALIZED, message))
        info = SubgraphInfo(graph_module, result.split_graph_module, {}, [], reasons)
        for name, runs_in_thunder in result.is_thunder.items():
            self._compile_piece(info, name, runs_in_thunder)
        self.subgraph_infos.append(info)
        return info.split_graph_module

    def _compile_piece(self, info: SubgraphInfo, name: str, runs_in_thunder: bool) -> None:
        split = info.split_graph_module
        piece = split.get_submodule(name)
        assert isinstance(piece, torch.fx.GraphModule)
        compiled: torch.nn.Module
        if runs_in_thunder:
            compiled = thunder_piece(piece, self.thunder_options, info.split_reasons, name)
            info.thunder_compiled_fns.append(compiled)
            compiler = CompilerType.THUNDER
        else:
            compiled = inductor_piece(piece, self.torch_inductor_options, info.split_reasons, name)
            compiler = CompilerType.TORCH_INDUCTOR
        record_first_inputs(compiled, info.recorded_inputs, name)
        split.add_submodule(name, compiled)  # replaces the plain piece
        info.submodule_to_compiled_functions[piece] = CompiledFunction(compiled, compiler)

    def save_reproducer_to_folder(self, folder: str | Path, *, graph_index: int | None = None) -> list[Path]:
        """Write one standalone script per piece that has run (``graph{i}_{piece}.py``) into ``folder``.

        Each script rebuilds the piece from its FX code, makes random inputs of the shapes, dtypes
        and strides its first call saw, and checks thunder (or Inductor, ``--compiler``) against eager.

        Args:
            folder: where to write; created if missing.
            graph_index: only this entry of ``subgraph_infos``; all of them if None.

        Returns:
            The paths written.
        """
        indices = range(len(self.subgraph_infos)) if graph_index is None else [graph_index]
        written: list[Path] = []
        for index in indices:
            written += save_reproducers(self.subgraph_infos[index], Path(folder), f"graph{index}")
        return written
