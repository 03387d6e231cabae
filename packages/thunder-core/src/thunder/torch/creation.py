"""Tensor factories: full, zeros, ones and uniform random numbers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import devices, dtypes, prims
from thunder.core.promotion import default_float_dtype
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol


def _shape(size: Sequence[Any]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], Sequence):
        return tuple(size[0])
    return tuple(size)


def _dtype(dtype: Any, fill_value: Any = 0.0) -> dtypes.dtype:
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    if isinstance(fill_value, bool):
        return dtypes.bool8
    if isinstance(fill_value, int):
        return dtypes.int64
    return default_float_dtype()


def _device(device: Any) -> devices.Device:
    return devices.to_device(device if device is not None else "cpu")


@torchsymbol(torch.full)
def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None, layout: Any = None,
         requires_grad: bool = False, pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(tuple(size), fill_value, device=_device(device), dtype=_dtype(dtype, fill_value))


@torchsymbol(torch.zeros)
def zeros(*size: Any, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
          pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(_shape(size), 0, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.ones)
def ones(*size: Any, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
         pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(_shape(size), 1, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.zeros_like)
def zeros_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    return prims.full(a.shape, 0, device=_device(device or a.device), dtype=dtypes.to_dtype(dtype or a.dtype))


@torchsymbol(torch.ones_like)
def ones_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    return prims.full(a.shape, 1, device=_device(device or a.device), dtype=dtypes.to_dtype(dtype or a.dtype))


@torchsymbol(torch.rand)
def rand(*size: Any, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
         pin_memory: bool = False, generator: Any = None) -> TensorProxy:  # fmt: skip
    if generator is not None:
        raise NotImplementedError("torch.rand with a generator is not supported by thunder yet")
    return prims.uniform(_shape(size), 0.0, 1.0, device=_device(device), dtype=_dtype(dtype))
