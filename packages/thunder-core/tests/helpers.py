"""A minimal executor for core's tests: core alone has no executor, so the tests bring one."""

from __future__ import annotations

from typing import Any

import torch

from thunder.core import prims
from thunder.core.executor import FusionExecutor, OperatorExecutor, to_torch_arguments, to_torch_value
from thunder.core.symbol import BoundSymbol, Symbol


class PrimsExecutor(OperatorExecutor):
    """Runs a handful of prims with torch; enough for pipeline tests."""

    def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return to_torch_arguments(args, kwargs)


def _broadcast_in_dim(a: torch.Tensor, shape: tuple, dims: tuple) -> torch.Tensor:
    view = [1] * len(shape)
    for size, d in zip(a.shape, dims):
        view[d] = size
    return a.reshape(view).expand(shape)


def make_prims_executor(name: str = "test_prims") -> PrimsExecutor:
    executor = PrimsExecutor(name)
    table = {
        prims.add: torch.add, prims.mul: torch.mul, prims.sub: torch.sub, prims.sin: torch.sin,
        prims.exp: torch.exp, prims.gt: torch.gt, prims.where: torch.where, prims.reshape: torch.reshape,
        prims.sum: torch.sum, prims.convert_element_type: torch.Tensor.to, prims.broadcast_in_dim: _broadcast_in_dim,
        prims.amax: torch.amax, prims.div: torch.true_divide, prims.log: torch.log, prims.linear: torch.nn.functional.linear,
        prims.transpose: torch.permute,
    }  # fmt: skip
    for symbol, fn in table.items():
        executor.register_implementation(symbol, executor.register_operator(
            fn.__name__, fn=fn, like=symbol, module=_printable_module(fn)))  # fmt: skip
    return executor


def _printable_module(fn: Any) -> str | None:
    """The module path the printed trace can call ``fn`` through, if it is torch's."""
    for module, namespace in (
        ("torch", torch),
        ("torch.nn.functional", torch.nn.functional),
        ("torch.Tensor", torch.Tensor),
    ):
        if getattr(namespace, fn.__name__, None) is fn:
            return module
    return None


class PythonFusionExecutor(FusionExecutor):
    """Fuses elementwise prims into one Python function that calls torch for each of them."""

    def __init__(self, name: str = "pyfuser"):
        super().__init__(name)
        self.fused_regions: list[list[BoundSymbol]] = []

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return "elementwise" in bound_symbol.symbol.tags and bound_symbol.symbol.is_leaf

    def fuse(self, region: list[BoundSymbol], index: int, outputs: Any = None) -> BoundSymbol:
        self.fused_regions.append(region)
        inputs, outputs = _region_interface(region)
        run = _region_function(region, inputs, outputs)
        symbol = Symbol(
            name=f"PyFusion{index}", id=f"{self.name}.PyFusion{index}", meta=None, fn=run, executor=self
        )
        return BoundSymbol(symbol, tuple(inputs), {}, tuple(outputs), tuple(region))


def _region_interface(region: list[BoundSymbol]) -> tuple[list, list]:
    produced = {p.name for b in region for p in b.proxy_outputs()}
    inputs: dict[str, Any] = {}
    for b in region:
        for p in b.proxy_args():
            if p.name not in produced:
                inputs.setdefault(p.name, p)
    outputs = [p for b in region for p in b.proxy_outputs()]
    return list(inputs.values()), outputs


_TORCH_ELEMENTWISE = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "sin": torch.sin, "exp": torch.exp,
                      "gt": torch.gt, "where": torch.where, "convert_element_type": torch.Tensor.to}  # fmt: skip


def _region_function(region: list[BoundSymbol], inputs: list, outputs: list) -> Any:
    def run(*values: Any) -> tuple:
        env = {p.name: v for p, v in zip(inputs, values)}

        def read(x: Any) -> Any:
            return env[x.name] if hasattr(x, "name") and x.name in env else to_torch_value(x)

        for b in region:
            result = _TORCH_ELEMENTWISE[b.symbol.name](*[read(a) for a in b.args])
            env[b.proxy_outputs()[0].name] = result
        return tuple(env[p.name] for p in outputs)

    return run
