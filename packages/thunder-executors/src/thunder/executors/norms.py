"""The ``triton_norms`` executor: layer-norm and RMS-norm backwards as one Triton kernel each call.

It claims ``ltorch.layer_norm_backward`` and ``ltorch.rms_norm_backward`` (the backward symbols of
``thunder/torch/normalization.py``) where the norm is over the last dim, at most ``MAX_WIDTH`` wide,
of a CUDA tensor of float32, float16 or bfloat16 (a CPU tensor under ``TRITON_INTERPRET=1``), with
a weight and bias of the input's dtype and float32 statistics. Its implementations beat fusion
(``register_implementation``'s ``beats_fusion``): listed after nvFuser, it still takes these
symbols, whose nvFuser kernels (inner-outer persistent) cost seconds each to compile. The kernel is
``triton/norm_backward.py``.

It also takes a residual gradient to add (``addend``: thunder-core's
``transforms/norm_backward_adds.py`` folds the add after a norm backward into it for an executor
that accepts it), as nvFuser's region takes that add in.

Not a default executor: its speed against nvFuser's fused backward has not been measured yet. Ask
for it with ``thunder.jit(model, executors=["triton_norms"])`` (``benchmarks/run.py --executors
triton_norms``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import thunder.torch as ltorch
from thunder.core import dtypes
from thunder.core.executor import register_executor
from thunder.core.proxies import TensorProxy
from thunder.executors.triton_operator import TritonOperatorExecutor, kernel_device_type

__all__ = ["executor", "NormsExecutor", "layer_norm_backward", "rms_norm_backward"]

_DTYPES = (dtypes.float32, dtypes.float16, dtypes.bfloat16)
MAX_WIDTH = 16384  # as triton/norm_backward.py's (not imported: it imports triton)


class NormsExecutor(TritonOperatorExecutor):
    pass


executor = NormsExecutor("triton_norms")
register_executor(executor)


def _fits(
    g: Any, a: Any, normalized_shape: Any, statistics: list[Any], parameters: list[Any], addend: Any = None
) -> bool:
    """A norm over the last dim of a tensor the kernel reads, parameters of its dtype, float32 statistics,
    and a residual gradient to add (if any) of the input's shape and dtype."""
    if not (isinstance(a, TensorProxy) and isinstance(g, TensorProxy)) or a.dtype not in _DTYPES:
        return False
    sizes = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(sizes) != 1 or a.ndim == 0 or any(type(s) is not int for s in a.shape) or a.shape[-1] > MAX_WIDTH:
        return False
    device_type = kernel_device_type()
    if addend is not None and not (
        isinstance(addend, TensorProxy) and (addend.shape, addend.dtype) == (a.shape, a.dtype)
    ):
        return False
    tensors = [g, a, *statistics, *(t for t in (*parameters, addend) if t is not None)]
    if not all(isinstance(t, TensorProxy) and t.device.type == device_type for t in tensors):
        return False
    return (
        g.shape == a.shape
        and g.dtype == a.dtype
        and all(s.dtype == dtypes.float32 for s in statistics)
        and all(p is None or (p.dtype == a.dtype and p.shape == sizes) for p in parameters)
    )


def _layer_norm_fits(g: Any, a: Any, normalized_shape: Any, mean: Any, rstd: Any, weight: Any, bias: Any,
                     output_mask: Any, addend: Any = None) -> bool:  # fmt: skip
    return _fits(g, a, normalized_shape, [mean, rstd], [weight, bias], addend)


def _rms_norm_fits(g: Any, a: Any, normalized_shape: Any, rstd: Any, weight: Any, output_mask: Any,
                   weighting: str = "torch", addend: Any = None) -> bool:  # fmt: skip
    return _fits(g, a, normalized_shape, [rstd], [weight], addend)


def layer_norm_backward(*args: Any, **kwargs: Any) -> tuple:
    from thunder.executors.triton import norm_backward  # triton is imported at the first call

    return norm_backward.layer_norm_backward(*args, **kwargs)


def rms_norm_backward(*args: Any, **kwargs: Any) -> tuple:
    from thunder.executors.triton import norm_backward

    return norm_backward.rms_norm_backward(*args, **kwargs)


def _claim(symbol: Any, fn: Callable, checker: Callable[..., bool]) -> None:
    operator = executor.register_operator(fn.__name__, fn=fn, like=symbol)
    executor.register_implementation(symbol, operator, checker=checker, beats_fusion=True)


_claim(ltorch.layer_norm_backward, layer_norm_backward, _layer_norm_fits)
_claim(ltorch.rms_norm_backward, rms_norm_backward, _rms_norm_fits)
