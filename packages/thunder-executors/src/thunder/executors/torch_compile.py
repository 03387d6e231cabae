"""The torch.compile executor: fusion regions handed to Inductor, an alternative fusion executor.

It claims the prims the torch executor runs that Inductor fuses well (elementwise, shape, reduction
prims, ``matmul`` and ``linear``; never random prims, whose numbers must match the torch
executor's), groups them into regions like any fusion executor, and runs each region as a small
Python function of torch calls (the torch executor's lowering of its prims) compiled by
``torch.compile(fullgraph=True, dynamic=False)`` on its first call. A region prints as
``TorchCompile<i>`` with its prims in comments. Opt-in: ``thunder.jit(fn, executors=["torchcompile"])``.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable, Iterable
from typing import Any

import torch

from thunder.core.executor import FusionExecutor, register_executor
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, tracectx
from thunder.executors.torchex import executor as torch_executor

__all__ = ["TorchCompileExecutor", "executor"]

_FUSED_TAGS = frozenset({"elementwise", "shape", "reduction"})
_FUSED_NAMES = frozenset({"matmul", "linear"})
_CXX_COMPILERS = ("c++", "g++", "clang++")


class CompiledRegion:
    """The callable of a ``TorchCompile`` bound symbol: the region's torch program, compiled on first call."""

    def __init__(self, program: Trace):
        self.program = program
        self.compiled: Callable | None = None

    def __call__(self, *tensors: torch.Tensor) -> Any:
        if self.compiled is None:
            self.compiled = torch.compile(self.program.python_callable(), fullgraph=True, dynamic=False)
        return self.compiled(*tensors)


class TorchCompileExecutor(FusionExecutor):
    """Runs each fusion region through ``torch.compile`` (Inductor)."""

    def is_available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("torch._inductor") is None:
            return False, f"this torch ({torch.__version__}) has no Inductor (torch._inductor)"
        if not torch.cuda.is_available() and not any(shutil.which(c) for c in _CXX_COMPILERS):
            return (
                False,
                "no CUDA device, and Inductor's CPU backend needs a C++ compiler (c++, g++ or clang++)",
            )
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        symbol = bound_symbol.symbol
        if not symbol.is_leaf or symbol.module != "prims" or not isinstance(bound_symbol.output, TensorProxy):
            return False
        if "random" in symbol.tags or not (symbol.tags & _FUSED_TAGS or symbol.name in _FUSED_NAMES):
            return False
        values = [*bound_symbol.args, *bound_symbol.kwargs.values()]
        if any(isinstance(a, Proxy) and not isinstance(a, TensorProxy) for a in values):
            return False  # symbolic numbers would become graph inputs; the torch executor runs these
        return torch_executor.can_execute(bound_symbol)

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One ``TorchCompile<index>`` bound symbol; ``outputs`` names the values read after the region."""
        region = [b for b in region if b.symbol.is_leaf]  # drops empty decompositions (identities)
        produced = [p for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        produced_names = {p.name for p in produced}
        wanted = set(outputs) if outputs is not None else produced_names
        inputs: dict[str, TensorProxy] = {}
        for b in region:
            for p in b.proxy_args():
                if isinstance(p, TensorProxy) and p.name not in produced_names:
                    inputs.setdefault(p.name, p)
        region_outputs = [p for p in produced if p.name in wanted]
        program = _torch_program(region, list(inputs.values()), region_outputs, index)
        name = f"TorchCompile{index}"
        symbol = Symbol(
            name=name, id=f"{self.name}.{name}", meta=None, fn=CompiledRegion(program), executor=self
        )
        return BoundSymbol(symbol, tuple(inputs.values()), {}, tuple(region_outputs), tuple(region))


def _torch_program(
    region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy], index: int
) -> Trace:
    """The region as a trace of the torch executor's operators, returning ``outputs`` as a tuple."""
    program = Trace(f"torch_compile_region{index}")
    program.args = list(inputs)
    program.names |= {p.name for b in region for p in (*b.proxy_args(), *b.proxy_outputs())}
    with tracectx(program):
        for b in region:
            program.bound_symbols.extend(torch_executor.lower(b))
    program.bound_symbols.append(BoundSymbol(RETURN, (tuple(outputs),), {}, None))
    program.header = "A torch.compile region: the torch executor's lowering of its prims"
    return program


executor = TorchCompileExecutor("torchcompile", version=torch.__version__)
register_executor(executor)
