"""Helpers of the CUDA-graph tests (test_cuda_graphs.py, test_cuda_graph_pools.py): where a jitted
training computation keeps its forward's and backward's ``GraphedFunction``."""

from __future__ import annotations

from thunder.core.autograd_function import _CompiledPair
from thunder.core.cuda_graphs import GraphedFunction


def graphed_pair(jitted: object) -> tuple[GraphedFunction, GraphedFunction]:
    """A training computation's forward and backward graphs (inside its autograd glue's closures)."""
    computation = jitted._thunder_jitted._cache[-1].computation  # type: ignore[attr-defined]
    pair = next(
        c.cell_contents for c in computation.__closure__ if isinstance(c.cell_contents, _CompiledPair)
    )
    backward = pair.backward.__self__  # GraphedFunction.call_with_list
    assert isinstance(pair.forward, GraphedFunction) and isinstance(backward, GraphedFunction)
    return pair.forward, backward
