"""Dtype conversions spelled as tensor methods (``x.float()``, ``x.type_as(y)``, ``x.to(...)``)."""

from __future__ import annotations

import builtins
from typing import Any

import torch
from thunder.core import devices, dtypes, prims
from thunder.core.symbol import Symbol
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype


@torchsymbol(torch.Tensor.to, method="to")
def to(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``Tensor.to`` for a dtype, or a device the tensor is already on; copies are values here."""
    dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
    # non_blocking and memory_format change how and where the result is stored, not its values; copy
    # makes a tensor of its own where ``to`` would return ``a`` itself (a write to it must not reach a)
    kwargs.pop("non_blocking", None), kwargs.pop("memory_format", None)
    copy = kwargs.pop("copy", False)
    flags = [arg for arg in args if isinstance(arg, builtins.bool)]  # non_blocking, then copy
    copy = copy or (len(flags) > 1 and flags[1])
    for arg in args:
        if isinstance(arg, builtins.bool):
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
    result = a if dtype is None else to_dtype(a, dtypes.to_dtype(dtype))
    if device is not None and devices.to_device(device) != a.device:
        result = prims.device_put(result, devices.to_device(device))
    return prims.copy(a) if copy and result is a else result


# only ``other``'s dtype is read: the result requires grad as ``a`` does (transforms/autograd.py)
@torchsymbol(torch.Tensor.type_as, method="type_as", tags=frozenset({"reads_metadata_of_others"}))
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
byte = _dtype_method("byte", dtypes.uint8)
char = _dtype_method("char", dtypes.int8)
short = _dtype_method("short", dtypes.int16)
cfloat = _dtype_method("cfloat", dtypes.complex64)
cdouble = _dtype_method("cdouble", dtypes.complex128)

_TENSOR_TYPES = {
    "torch.FloatTensor": dtypes.float32, "torch.DoubleTensor": dtypes.float64, "torch.HalfTensor": dtypes.float16,
    "torch.BFloat16Tensor": dtypes.bfloat16, "torch.ByteTensor": dtypes.uint8, "torch.CharTensor": dtypes.int8,
    "torch.ShortTensor": dtypes.int16, "torch.IntTensor": dtypes.int32, "torch.LongTensor": dtypes.int64,
    "torch.BoolTensor": dtypes.bool8, "torch.ComplexFloatTensor": dtypes.complex64,
    "torch.ComplexDoubleTensor": dtypes.complex128,
}  # fmt: skip


@torchsymbol(torch.Tensor.type, method="type")
def type(a: Any, dtype: Any = None, non_blocking: builtins.bool = False, **kwargs: Any) -> Any:  # noqa: A001
    """``a.type()`` is the type's name; ``a.type(dtype)`` (a dtype or a name) converts."""
    if dtype is None:
        names = {v: k for k, v in _TENSOR_TYPES.items()}
        name = names[a.dtype]
        return name if a.device.type == "cpu" else name.replace("torch.", f"torch.{a.device.type}.")
    if isinstance(dtype, str):
        base = dtype.replace("torch.cuda.", "torch.")
        if base not in _TENSOR_TYPES:
            raise ValueError(f"invalid type: {dtype!r}")
        converted = to_dtype(a, _TENSOR_TYPES[base])
        if dtype.startswith("torch.cuda.") and a.device.type != "cuda":
            return prims.device_put(converted, devices.to_device("cuda"))
        return converted
    return to_dtype(a, dtypes.to_dtype(dtype))
