"""What ThunderCompiler records about each FX graph: why it was split and who compiled each piece."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["SplitReasonType", "SplitReason", "CompilerType", "CompiledFunction", "SubgraphInfo"]


class SplitReasonType(enum.Enum):
    """Why part of a graph does not run in thunder, or runs differently than asked."""

    UNSUPPORTED_NODE = 1  # an FX node kind thunder does not take (call_module, ...)
    MISSING_OP_SUPPORT = 2  # the target has no thunder symbol, or no executor runs it
    EXCEPTION_PROXY_THUNDER_OP = 3  # the node's inputs could not be made into thunder proxies
    EXCEPTION_META_THUNDER_OP = 4  # thunder's symbol failed on the inputs, or disagrees with PyTorch
    SYMBOLIC_SHAPES_SPECIALIZED = 5  # Dynamo's symbolic sizes became concrete values in thunder
    INDUCTOR_FAILED = 6  # Inductor could not compile a piece; it runs eagerly
    THUNDER_FAILED = 7  # thunder failed on a piece where eager PyTorch did not; it runs eagerly


@dataclass(frozen=True)
class SplitReason:
    """One recorded reason: its kind, a message naming the node, and the exception if one was raised."""

    reason_type: SplitReasonType
    info: str
    exception: BaseException | None = None


class CompilerType(enum.Enum):
    THUNDER = "thunder"
    TORCH_INDUCTOR = "torch_inductor"


@dataclass(frozen=True)
class CompiledFunction:
    """A piece of a split graph as compiled: the callable that runs it and who compiled it."""

    compiled_fn: Callable[..., Any]
    compiler: CompilerType


@dataclass
class SubgraphInfo:
    """Everything about one FX graph that TorchDynamo handed to ThunderCompiler.

    ``original_graph_module`` is Dynamo's graph; ``split_graph_module`` runs it as a sequence of
    ``thunder_N`` and ``inductor_N`` submodules; ``submodule_to_compiled_functions`` maps each
    uncompiled piece (a GraphModule) to its compiled form; ``thunder_compiled_fns`` are the thunder
    pieces (``ThunderModule``s, accepted by ``thunder.last_traces``); ``split_reasons`` say why.
    """

    original_graph_module: torch.fx.GraphModule
    split_graph_module: torch.fx.GraphModule
    submodule_to_compiled_functions: dict[torch.fx.GraphModule, CompiledFunction]
    thunder_compiled_fns: list[torch.nn.Module]
    split_reasons: list[SplitReason]
    # Per piece name (``thunder_0``): the inputs of its first call, for reproducer scripts.
    recorded_inputs: dict[str, list[Any]] = field(default_factory=dict)
