"""Tensor factories: full, zeros, ones, ranges (random factories are in ``randomness``)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import devices, dtypes, prims
from thunder.core.promotion import default_float_dtype
from thunder.core.proxies import TensorProxy, pyval
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import int_list


def _dtype(dtype: Any, fill_value: Any = 0.0) -> dtypes.dtype:
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    fill_value = pyval(fill_value)  # a number proxy's type, which the prologue checks
    if isinstance(fill_value, bool):
        return dtypes.bool8
    if isinstance(fill_value, int):
        return dtypes.int64
    return default_float_dtype()


def _device(device: Any) -> devices.Device:
    return devices.to_device(device if device is not None else "cpu")


# Factories that read only their tensor argument's metadata (``zeros_like(x)``): the result is new
# data, which eager returns without requires_grad whatever ``x`` requires (transforms/autograd.py).
READS_METADATA = frozenset({"reads_metadata"})


@torchsymbol(torch.full)
def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None, layout: Any = None,
         requires_grad: bool = False, pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(tuple(size), fill_value, device=_device(device), dtype=_dtype(dtype, fill_value))


@torchsymbol(torch.zeros, sizes="size")
def zeros(size: Sequence[int], *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
          pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(int_list("zeros", "size", size), 0, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.ones, sizes="size")
def ones(size: Sequence[int], *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
         pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    return prims.full(int_list("ones", "size", size), 1, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.zeros_like, tags=READS_METADATA)
def zeros_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    return prims.full(a.shape, 0, device=_device(device or a.device), dtype=dtypes.to_dtype(dtype or a.dtype))


@torchsymbol(torch.ones_like, tags=READS_METADATA)
def ones_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    return prims.full(a.shape, 1, device=_device(device or a.device), dtype=dtypes.to_dtype(dtype or a.dtype))


def _like(a: TensorProxy, dtype: Any, device: Any) -> tuple[dtypes.dtype, devices.Device]:
    return dtypes.to_dtype(dtype if dtype is not None else a.dtype), devices.to_device(device or a.device)


@torchsymbol(torch.empty, sizes="size")
def empty(size: Sequence[int], *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
          pin_memory: bool = False, memory_format: Any = None, out: Any = None) -> TensorProxy:  # fmt: skip
    """Uninitialized memory in eager; zeros here (any value is a correct answer)."""
    return prims.full(int_list("empty", "size", size), 0, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.full_like, tags=READS_METADATA)
def full_like(a: TensorProxy, fill_value: Any, *, dtype: Any = None, device: Any = None,
              **unused: Any) -> TensorProxy:  # fmt: skip
    dtype_, device_ = _like(a, dtype, device)
    return prims.full(a.shape, _cast(fill_value, dtype_), device=device_, dtype=dtype_)


def _cast(value: Any, dtype: dtypes.dtype) -> Any:
    if dtype is dtypes.bool8:
        return builtins.bool(value)
    if dtypes.is_integer(dtype):
        return builtins.int(value)
    return value


@torchsymbol(torch.empty_like, tags=READS_METADATA)
def empty_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    dtype_, device_ = _like(a, dtype, device)
    return prims.full(a.shape, 0, device=device_, dtype=dtype_)


@torchsymbol(torch.empty_strided)
def empty_strided(size: Sequence[int], stride: Sequence[int], *, dtype: Any = None, device: Any = None,
                  **unused: Any) -> TensorProxy:  # fmt: skip
    """Zeros, like ``empty``; thunder's tensors are contiguous, so ``stride`` only has to fit ``size``."""
    if len(stride) != len(size):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(stride)} and {len(size)}")
    return prims.full(tuple(size), 0, device=_device(device), dtype=_dtype(dtype))


@torchsymbol(torch.Tensor.new_empty_strided, method="new_empty_strided", tags=READS_METADATA)
def new_empty_strided(a: TensorProxy, size: Sequence[int], stride: Sequence[int], *, dtype: Any = None,
                      device: Any = None, **unused: Any) -> TensorProxy:  # fmt: skip
    dtype_, device_ = _like(a, dtype, device)
    return empty_strided(size, stride, dtype=dtype_, device=device_)


@torchsymbol(torch.empty_permuted)
def empty_permuted(size: Sequence[int], physical_layout: Sequence[int], *, dtype: Any = None, device: Any = None,
                   **unused: Any) -> TensorProxy:  # fmt: skip
    """Zeros of the logical ``size``: the physical layout is a stride choice thunder does not model."""
    if sorted(physical_layout) != list(range(len(size))):
        raise RuntimeError(f"Dimension mismatch: {physical_layout} is not a permutation of {len(size)} dims")
    return prims.full(tuple(size), 0, device=_device(device), dtype=_dtype(dtype))


def _new_factory(name: str, fill: Any) -> Any:
    def op(a: TensorProxy, size: Sequence[int], *, dtype: Any = None, device: Any = None,
           **unused: Any) -> TensorProxy:  # fmt: skip
        dtype_, device_ = _like(a, dtype, device)
        return prims.full(int_list(name, "size", size), _cast(fill, dtype_), device=device_, dtype=dtype_)

    op.__name__ = name
    return torchsymbol(getattr(torch.Tensor, name), method=name, tags=READS_METADATA, sizes="size")(op)


new_zeros = _new_factory("new_zeros", 0)
new_ones = _new_factory("new_ones", 1)
new_empty = _new_factory("new_empty", 0)


@torchsymbol(torch.Tensor.new_full, method="new_full", tags=READS_METADATA)
def new_full(a: TensorProxy, size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
             **unused: Any) -> TensorProxy:  # fmt: skip
    dtype_, device_ = _like(a, dtype, device)
    return prims.full(tuple(size), _cast(fill_value, dtype_), device=device_, dtype=dtype_)


@torchsymbol(torch.scalar_tensor)
def scalar_tensor(s: Any, *, dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:
    dtype_ = dtypes.to_dtype(dtype) if dtype is not None else default_float_dtype()
    return prims.full((), _cast(s, dtype_), device=_device(device), dtype=dtype_)


def _infer_dtype(values: list[Any]) -> dtypes.dtype:
    if builtins.any(isinstance(v, complex) for v in values):
        return dtypes.complex128 if default_float_dtype() is dtypes.float64 else dtypes.complex64
    if builtins.any(isinstance(v, float) for v in values):
        return default_float_dtype()
    if values and builtins.all(isinstance(v, bool) for v in values):
        return dtypes.bool8
    return dtypes.int64


def _leaves(data: Any) -> list[Any]:
    if isinstance(data, (list, tuple)):
        return [leaf for item in data for leaf in _leaves(item)]
    return [data]


def _nested(data: Any) -> Any:
    return [_nested(d) for d in data] if isinstance(data, (list, tuple)) else data


@torchsymbol(torch.tensor)
def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    """A tensor from Python numbers (nested lists of them): a constant of the program."""
    if isinstance(data, TensorProxy):
        from thunder.torch.utils import to_dtype

        return to_dtype(data, dtypes.to_dtype(dtype)) if dtype is not None else data
    leaves = _leaves(data)
    if builtins.any(isinstance(v, TensorProxy) for v in leaves):
        raise NotImplementedError(
            "torch.tensor of a list holding tensors is not supported by thunder; use torch.stack"
        )
    dtype_ = dtypes.to_dtype(dtype) if dtype is not None else _infer_dtype(leaves)
    if not isinstance(data, (list, tuple)):
        return prims.full((), _cast(data, dtype_), device=_device(device), dtype=dtype_)
    return prims.tensor_from_sequence(_nested(data), device=_device(device), dtype=dtype_)


@torchsymbol(torch.as_tensor)
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> TensorProxy:
    if isinstance(data, TensorProxy):
        from thunder.torch.conversions import to

        return to(data, device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


def _arange_length(start: Any, end: Any, step: Any) -> int:
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if builtins.any(type(v) is torch.SymInt for v in (start, end, step)) and type(step) is int:
        # integer bounds, one of them a symbolic size: the length stays symbolic (the checks above
        # guarded the bounds' order); -(a // -b) is ceil(a / b) for ints
        return end - start if step == 1 else -((end - start) // -step)
    return builtins.max(0, math.ceil((end - start) / step))


@torchsymbol(torch.arange)
def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           layout: Any = None, requires_grad: bool = False, pin_memory: bool = False, out: Any = None) -> TensorProxy:  # fmt: skip
    if end is None:
        start, end = 0, start
    for value in (start, end, step):
        if isinstance(value, TensorProxy):
            raise NotImplementedError("torch.arange with tensor bounds has a data-dependent shape")
    if dtype is None:
        floating = builtins.any(isinstance(v, float) for v in (start, end, step))
        dtype_ = default_float_dtype() if floating else dtypes.int64
    else:
        dtype_ = dtypes.to_dtype(dtype)
    finite = (v for v in (start, end) if not isinstance(v, (complex, torch.SymInt)))  # a size is finite
    if not builtins.all(math.isfinite(v) for v in finite):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if not (dtype_.is_floating_point or dtype_.is_complex):  # as eager: integer bounds and step
        start, end, step = (v if type(v) is torch.SymInt else builtins.int(v) for v in (start, end, step))
    length = _arange_length(start, end, step)
    return prims.iota(length, start=start, step=step, device=_device(device), dtype=dtype_)


def _scalar_or_tensor(x: Any) -> Any:
    if isinstance(x, TensorProxy):
        if x.numel() != 1 or x.ndim > 1:
            raise RuntimeError("linspace only supports 0-dimensional start and end tensors")
        return prims.convert_element_type(prims.reshape(x, ()), dtypes.float64)
    return x


def _linspace_values(start: Any, end: Any, steps: int, device: devices.Device) -> Any:
    """float64 values of linspace, each computed from the nearer end as PyTorch's kernel does."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    index = prims.iota(steps, start=0, step=1, device=device, dtype=dtypes.float64)
    if steps == 1:
        first = _scalar_or_tensor(start)
        if isinstance(first, TensorProxy):
            return prims.broadcast_in_dim(first, (1,), ())
        return prims.full((1,), float(first.real if isinstance(first, complex) else first), device=device,
                          dtype=dtypes.float64)  # fmt: skip
    start, end = _scalar_or_tensor(start), _scalar_or_tensor(end)

    def spread(x: Any) -> Any:
        return prims.broadcast_in_dim(x, (steps,), ()) if isinstance(x, TensorProxy) else x

    difference = (
        prims.sub(end, start)
        if builtins.any(isinstance(v, TensorProxy) for v in (start, end))
        else end - start
    )
    step = (
        prims.div(difference, float(steps - 1))
        if isinstance(difference, TensorProxy)
        else difference / (steps - 1)
    )
    step, start, end = spread(step), spread(start), spread(end)
    low = prims.add(prims.mul(index, step), start)
    high = prims.sub(end, prims.mul(prims.sub(float(steps - 1), index), step))
    return prims.where(prims.lt(index, steps // 2), low, high)


def _range_dtype(dtype: Any, *values: Any) -> dtypes.dtype:
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    if builtins.any(
        isinstance(v, complex) or (isinstance(v, TensorProxy) and v.dtype.is_complex) for v in values
    ):
        raise NotImplementedError("complex linspace/logspace is not supported by thunder")
    return default_float_dtype()


@torchsymbol(torch.linspace)
def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None, layout: Any = None,
             requires_grad: bool = False, pin_memory: bool = False, out: Any = None) -> TensorProxy:  # fmt: skip
    dtype_ = _range_dtype(dtype, start, end)
    if not (dtype_.is_floating_point or dtype_.is_complex):  # as eager: integer ends, a float step
        start, end = (_truncated(x) for x in (start, end))
    values = _linspace_values(start, end, steps, _device(device))
    return prims.convert_element_type(values, dtype_)


def _truncated(x: Any) -> Any:
    if isinstance(x, TensorProxy):
        return prims.trunc(x) if x.dtype.is_floating_point else x
    return builtins.int(x)


@torchsymbol(torch.logspace)
def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None, device: Any = None,
             layout: Any = None, requires_grad: bool = False, pin_memory: bool = False, out: Any = None) -> TensorProxy:  # fmt: skip
    dtype_ = _range_dtype(dtype, start, end)
    if not (dtype_.is_floating_point or dtype_.is_complex):  # as eager: integer ends
        start, end = (_truncated(x) for x in (start, end))
    exponents = _linspace_values(start, end, steps, _device(device))
    return prims.convert_element_type(prims.pow(float(base), exponents), dtype_)


@torchsymbol(torch.eye)
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None, layout: Any = None,
        requires_grad: bool = False, pin_memory: bool = False, out: Any = None) -> TensorProxy:  # fmt: skip
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {builtins.min(n, m)}")
    dtype_, device_ = _dtype(dtype), _device(device)
    rows = prims.broadcast_in_dim(
        prims.iota(n, start=0, step=1, device=device_, dtype=dtypes.int64), (n, m), (0,)
    )
    cols = prims.broadcast_in_dim(
        prims.iota(m, start=0, step=1, device=device_, dtype=dtypes.int64), (n, m), (1,)
    )
    return prims.convert_element_type(prims.eq(rows, cols), dtype_)
