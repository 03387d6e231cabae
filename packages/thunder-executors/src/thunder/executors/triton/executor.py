"""The Triton executor: claims the prims it can generate code for and fuses each region into kernels.

What it claims is decided per bound symbol from tables (``ops.py``): elementwise prims, ``where``,
``convert_element_type``, ``broadcast_in_dim``, squeeze/unsqueeze ``reshape`` and the reductions
``sum``/``amax``/``amin``/``var`` of floating-point tensors. Everything else is left to the next
executor (usually torch). A region prints as ``TritonFusion<i>`` with its prims in comments.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from numbers import Number

import torch

from thunder.core.executor import FusionExecutor
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.executors.triton import ops
from thunder.executors.triton.cache import RegionRunner, interpret_mode
from thunder.executors.triton.plan import REDUCTION_NAMES, plan_region

__all__ = ["TritonExecutor", "executor"]

_FLOAT_ONLY = {**ops.UNARY_FLOAT, **ops.BINARY_FLOAT}
_ANY_REAL = {**ops.UNARY_ANY, **ops.BINARY_ANY, **ops.COMPARISONS}
_INTEGER_ONLY = {**ops.BINARY_INTEGER, "bitwise_not": ""}


def _supported_dtype(dtype: torch.dtype) -> bool:
    return dtype in ops.TRITON_DTYPES


def _squeeze_only(source: TensorProxy, shape: Iterable[int]) -> bool:
    return [s for s in source.shape if s != 1] == [s for s in shape if s != 1]


def _is_identity(bound_symbol: BoundSymbol) -> bool:
    if bound_symbol.symbol.is_leaf or bound_symbol.subsymbols:
        return False
    inputs = {p.name for p in bound_symbol.proxy_args()}
    return all(p.name in inputs for p in bound_symbol.proxy_outputs())


class TritonExecutor(FusionExecutor):
    """Generates, compiles and caches Triton kernels for fusion regions."""

    def is_available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("triton") is None:
            return False, "triton is not installed (pip install 'thunder[triton]')"
        if interpret_mode() or torch.cuda.is_available():
            return True, ""
        return False, "no CUDA device (set TRITON_INTERPRET=1 to run Triton's interpreter on the CPU)"

    def _device_ok(self, tensor: TensorProxy) -> bool:
        return tensor.device.type == "cuda" or (interpret_mode() and tensor.device.type == "cpu")

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        symbol = bound_symbol.symbol
        if not symbol.is_leaf or symbol.module != "prims" or not isinstance(bound_symbol.output, TensorProxy):
            return False
        values = [*bound_symbol.args, *bound_symbol.kwargs.values()]
        tensors = [a for a in values if isinstance(a, TensorProxy)] + [bound_symbol.output]
        if any(isinstance(a, Proxy) and not isinstance(a, TensorProxy) for a in values):
            return False  # symbolic numbers are not generated as kernel arguments
        for t in tensors:
            if not _supported_dtype(t.dtype.torch_dtype) or not self._device_ok(t) or t.numel() == 0:
                return False
        return self._claims(symbol.name, bound_symbol, tensors)

    def _claims(self, name: str, b: BoundSymbol, tensors: list[TensorProxy]) -> bool:
        first = tensors[0]
        is_float = first.dtype.is_floating_point
        if name in _FLOAT_ONLY:
            return is_float
        if name in _ANY_REAL:
            return True
        if name in _INTEGER_ONLY:
            return not is_float
        if name in ("where", "convert_element_type", "broadcast_in_dim"):
            return True
        if name == "reshape":
            return _squeeze_only(b.args[0], b.args[1])
        if name == "pow":
            exponent = b.args[1]
            return is_float and isinstance(exponent, Number) and float(exponent) in ops.POW_EXPONENTS  # type: ignore[arg-type]
        if name in REDUCTION_NAMES:
            dims = tuple(b.args[1])
            return is_float and bool(dims) and all(first.shape[d] > 1 for d in dims)
        return False

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        # A composite whose decomposition is empty (``reshape`` to the same shape) computes nothing.
        if _is_identity(bound_symbol):
            return True
        return super().can_execute(bound_symbol)

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One ``TritonFusion<index>`` bound symbol computing ``region``.

        ``outputs`` names the region's values read after it; without it every value is an output.
        """
        name = f"TritonFusion{index}"
        region = [b for b in region if not _is_identity(b)]
        plan = plan_region(region, outputs)
        runner = RegionRunner(plan, name)
        symbol = Symbol(name=name, id=f"{self.name}.{name}", meta=None, fn=runner, executor=self)
        return BoundSymbol(symbol, tuple(plan.inputs), {}, tuple(plan.outputs), tuple(region))


executor = TritonExecutor("triton")
