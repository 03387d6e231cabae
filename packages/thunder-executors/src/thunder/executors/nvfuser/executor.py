"""The nvFuser executor: fusion regions as nvFuser fusion definitions, cached per input layout.

nvFuser is imported on first use (``nvfuser_direct``, else the older ``nvfuser`` module). Regions
print as ``nvFusion<i>`` with their prims in comments, as in the seed traces.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from typing import Any

import torch

from thunder.core.executor import FusionExecutor
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.executors.nvfuser.translate import (
    ELEMENTWISE,
    REDUCTIONS,
    SHAPES,
    SUPPORTED_DTYPES,
    define_fusion,
    layout_key,
)

__all__ = ["NvFuserExecutor", "executor", "nvfuser_module"]

_MODULES = ("nvfuser_direct", "nvfuser")
_module: Any = None


def nvfuser_module() -> Any:
    """The nvFuser Python module, imported on first use."""
    global _module
    if _module is None:
        for name in _MODULES:
            if importlib.util.find_spec(name) is not None:
                _module = importlib.import_module(name)
                break
        else:
            raise ImportError("nvFuser is not installed: pip install 'thunder[nvfuser]'")
    return _module


class FusionRunner:
    """The callable of an ``nvFusion`` bound symbol: one definition per input layout."""

    def __init__(self, region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]):
        self.region, self.inputs, self.outputs = region, inputs, outputs
        self.definitions: dict[tuple, Any] = {}

    def __call__(self, *tensors: torch.Tensor) -> tuple:
        key = tuple(layout_key(t) for t in tensors)
        fd = self.definitions.get(key)
        if fd is None:
            fd = define_fusion(nvfuser_module(), self.region, self.inputs, self.outputs, list(tensors))
            self.definitions[key] = fd
        return tuple(fd.execute(list(tensors)))


def _is_identity(bound_symbol: BoundSymbol) -> bool:
    if bound_symbol.symbol.is_leaf or bound_symbol.subsymbols:
        return False
    inputs = {p.name for p in bound_symbol.proxy_args()}
    return all(p.name in inputs for p in bound_symbol.proxy_outputs())


class NvFuserExecutor(FusionExecutor):
    def is_available(self) -> tuple[bool, str]:
        if not any(importlib.util.find_spec(name) is not None for name in _MODULES):
            return (
                False,
                "nvFuser is not installed (pip install 'thunder[nvfuser]'; see NVFUSER.md for the GPU machine)",
            )
        if not torch.cuda.is_available():
            return False, "nvFuser needs a CUDA device"
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        symbol = bound_symbol.symbol
        if not symbol.is_leaf or symbol.module != "prims" or not isinstance(bound_symbol.output, TensorProxy):
            return False
        name = symbol.name
        if name not in ELEMENTWISE and name not in REDUCTIONS and name not in SHAPES:
            return False
        values = [*bound_symbol.args, *bound_symbol.kwargs.values()]
        if any(isinstance(a, Proxy) and not isinstance(a, TensorProxy) for a in values):
            return False
        tensors = [a for a in values if isinstance(a, TensorProxy)] + [bound_symbol.output]
        return all(t.device.type == "cuda" and t.dtype.torch_dtype in SUPPORTED_DTYPES for t in tensors)

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        return _is_identity(bound_symbol) or super().can_execute(bound_symbol)

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One ``nvFusion<index>`` bound symbol; ``outputs`` names the values read after the region."""
        region = [b for b in region if not _is_identity(b)]
        produced = [p for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        produced_names = {p.name for p in produced}
        wanted = set(outputs) if outputs is not None else produced_names
        inputs: dict[str, TensorProxy] = {}
        for b in region:
            for p in b.proxy_args():
                if isinstance(p, TensorProxy) and p.name not in produced_names:
                    inputs.setdefault(p.name, p)
        region_outputs = [p for p in produced if p.name in wanted]
        runner = FusionRunner(region, list(inputs.values()), region_outputs)
        name = f"nvFusion{index}"
        symbol = Symbol(name=name, id=f"{self.name}.{name}", meta=None, fn=runner, executor=self)
        return BoundSymbol(symbol, tuple(inputs.values()), {}, tuple(region_outputs), tuple(region))


executor = NvFuserExecutor("nvfuser")
