"""Dtype conversions spelled as tensor methods (``x.float()``, ``x.type_as(y)``, ``x.to(...)``)."""

from __future__ import annotations

import builtins
from typing import Any

import torch
from thunder.core import devices, dtypes
from thunder.core.symbol import Symbol
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype


@torchsymbol(torch.Tensor.to, method="to")
def to(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``Tensor.to`` for a dtype, or a device the tensor is already on; copies are values here."""
    dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
    # non_blocking, copy and memory_format change how and where the result is stored, not its values
    kwargs.pop("non_blocking", None), kwargs.pop("copy", None), kwargs.pop("memory_format", None)
    for arg in args:
        if isinstance(arg, builtins.bool):  # non_blocking and copy: no effect on values in a functional trace
            continue
        if isinstance(arg, (torch.dtype, dtypes.dtype)):
            dtype = arg
        elif isinstance(arg, (str, torch.device, devices.Device)):
            device = arg
        elif hasattr(arg, "dtype") and hasattr(arg, "device"):
            dtype, device = arg.dtype, arg.device
        else:
            raise NotImplementedError(f"Tensor.to({arg!r}) is not supported by thunder")
    if kwargs:
        raise NotImplementedError(f"Tensor.to with {sorted(kwargs)} is not supported by thunder")
    if device is not None and devices.to_device(device) != a.device:
        raise NotImplementedError(f"moving a tensor from {a.device} to {device} inside a compiled function")
    return a if dtype is None else to_dtype(a, dtypes.to_dtype(dtype))


@torchsymbol(torch.Tensor.type_as, method="type_as")
def type_as(a: Any, other: Any) -> Any:
    return to_dtype(a, other.dtype)


def _dtype_method(name: str, dtype: dtypes.dtype) -> Symbol:
    def convert(a: Any, memory_format: Any = None) -> Any:
        # traces are functional: a memory format changes strides, never values
        return to_dtype(a, dtype)

    convert.__name__ = name
    return torchsymbol(getattr(torch.Tensor, name), method=name, name=name)(convert)


float = _dtype_method("float", dtypes.float32)  # noqa: A001
double = _dtype_method("double", dtypes.float64)
half = _dtype_method("half", dtypes.float16)
bfloat16 = _dtype_method("bfloat16", dtypes.bfloat16)
long = _dtype_method("long", dtypes.int64)
int = _dtype_method("int", dtypes.int32)  # noqa: A001
bool = _dtype_method("bool", dtypes.bool8)  # noqa: A001
