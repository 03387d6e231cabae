"""thunder.dynamo: ThunderCompiler, the ``torch.compile`` backend that hands FX subgraphs to thunder.

``torch.compile(fn, backend=ThunderCompiler())`` splits each graph TorchDynamo captures into pieces
thunder runs and pieces Inductor runs; ``ThunderCompiler.subgraph_infos`` says how and why.
"""

from thunder.dynamo.compiler import ThunderCompiler
from thunder.dynamo.reasons import CompiledFunction, CompilerType, SplitReason, SplitReasonType, SubgraphInfo
from thunder.dynamo.repro import reproducer_script
from thunder.dynamo.splitter import check_node, split_graph

__all__ = [
    "ThunderCompiler",
    "SplitReason",
    "SplitReasonType",
    "SubgraphInfo",
    "CompiledFunction",
    "CompilerType",
    "reproducer_script",
    "check_node",
    "split_graph",
]
