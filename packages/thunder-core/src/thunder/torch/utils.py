"""Helpers shared by the torch language's op families: dims, broadcasting, dtype conversion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import broadcast_shapes
from thunder.core.proxies import NumberProxy, TensorProxy, data_dependent_error


def is_one_int(value: Any) -> bool:
    """Whether eager's argument parser reads ``value`` as one int of an int list (a 0-d tensor is one)."""
    if isinstance(value, (bool, str, Sequence)):
        return False
    return isinstance(value, (TensorProxy, torch.SymInt)) or hasattr(type(value), "__index__")


def int_list(op: str, name: str, value: Any) -> tuple[int, ...]:
    """The int-list argument ``name`` of ``op`` as eager's functions take it: a tuple, list or
    torch.Size of ints. Anything else raises eager's TypeError (``torch.reshape(x, 4)``); a tensor
    among the ints (eager reads its value) raises thunder's data-dependent error."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not {type(value).__name__}")
    for index, item in enumerate(value):
        if isinstance(item, TensorProxy):
            raise data_dependent_error(
                f"A tensor as an int of {op}'s '{name}' (a size or a dim given as a tensor)",
                "pass the number in as a Python int",
            )
        if not is_one_int(item):
            raise TypeError(
                f"{op}(): argument '{name}' must be tuple of ints, but found element of type "
                f"{type(item).__name__} at pos {index}"
            )
    return tuple(value)


def canonical_dim(dim: int | TensorProxy, ndim: int) -> int:
    """``dim`` as a non-negative index, as torch wraps it (a 0-d tensor accepts dims 0 and -1)."""
    if isinstance(dim, TensorProxy):  # eager reads an int tensor's value
        raise data_dependent_error("A tensor as a dim", "pass the dim in as a Python int")
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but got {dim})"
        )
    return dim % bound


def canonical_dims(dims: Any, ndim: int) -> tuple[int, ...]:
    """Reduction dims: None or () mean all dims."""
    if dims is None or (isinstance(dims, Sequence) and len(dims) == 0):
        return tuple(range(ndim))
    if isinstance(dims, TensorProxy):
        dims = (dims,)  # canonical_dim raises: eager reads the dim from the tensor's data
    elif isinstance(dims, (int, torch.SymInt)):
        dims = (int(dims),)  # a symbolic int as a dim: which dim is structure, so its value (guarded)
    result = tuple(canonical_dim(d, ndim) for d in dims)
    if len(set(result)) != len(result):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    return tuple(d for d in result if d < ndim)


def expand_to(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` broadcast to ``shape`` (numbers are left alone: prims broadcast them)."""
    # lengths first: a tuple compares items before lengths, and a symbolic size against another
    # dim's size would be a guard (core/symbolic_shapes.py)
    if not isinstance(a, TensorProxy) or (a.ndim == len(shape) and a.shape == shape):
        return a
    offset = len(shape) - a.ndim
    return prims.broadcast_in_dim(a, shape, tuple(range(offset, len(shape))))


def broadcast(*args: Any) -> list[Any]:
    """The arguments of an elementwise op made compatible: on one device (``on_one_device``), then
    broadcast to one shape."""
    args = tuple(on_one_device(args))
    shapes = [a.shape for a in args if isinstance(a, TensorProxy)]
    if not shapes:
        return list(args)
    shape = broadcast_shapes(*shapes)
    return [expand_to(a, shape) for a in args]


def on_one_device(args: Sequence[Any]) -> list[Any]:
    """``args`` with CPU tensors of no dims moved to the device of the other tensors, as eager
    allows (``cuda_tensor * cpu_scalar_tensor``, e.g. Adam's step count); other mixes of devices
    raise eager's error."""
    tensors = [a for a in args if isinstance(a, TensorProxy)]
    if len({t.device for t in tensors}) <= 1:
        return list(args)
    devices = list(dict.fromkeys(t.device for t in tensors if t.ndim != 0 or t.device.type != "cpu"))
    if len(devices) != 1:
        first, second = devices[:2]
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {first} and {second}!"
        )
    (device,) = devices
    return [
        prims.device_put(a, device) if isinstance(a, TensorProxy) and a.device != device else a for a in args
    ]


def check_tensor_argument(function: str, value: Any, name: str = "input", position: int = 1) -> None:
    """Eager's ``TypeError`` where a torch function takes only a tensor and got something else."""
    if not isinstance(value, TensorProxy):
        raise TypeError(
            f"{function}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}"
        )


def check_some_tensor(function: str, *args: Any) -> None:
    """Eager's ``TypeError`` for a function taking a tensor or numbers (``xlogy(2, x)``) called with numbers only."""
    if not any(isinstance(a, TensorProxy) for a in args):
        names = ", ".join(type(a).__name__ for a in args)
        raise TypeError(
            f"{function}() received an invalid combination of arguments - got ({names}), expected a Tensor"
        )


def to_dtype(a: Any, dtype: dtypes.dtype) -> Any:
    """A tensor converted to ``dtype``; numbers convert to the matching Python type."""
    if isinstance(a, TensorProxy):
        return a if a.dtype is dtype else prims.convert_element_type(a, dtype)
    if a is None:
        return a
    if isinstance(a, NumberProxy):  # recorded (``float(i0)``), not specialized
        from thunder.core.python_ops import convert

        kinds = ((dtype.is_complex, complex), (dtype.is_floating_point, float), (dtype is dtypes.bool8, bool))
        return convert(a, next((kind for matches, kind in kinds if matches), int))
    if type(a) is torch.SymInt and not dtype.is_complex and dtype is not dtypes.bool8:
        # a symbolic size (core/symbolic_shapes.py) stays symbolic: converted, not specialized
        return torch.sym_float(a) if dtype.is_floating_point else a
    if type(a) is torch.SymFloat and dtype.is_floating_point:
        return a
    if type(a) is torch.SymBool:  # ``x + (n == 4)``: float() takes no SymBool; its value, guarded
        a = bool(a)
    if dtype.is_complex:
        return complex(a)
    if isinstance(a, complex) and a.imag != 0:  # as eager: float(1j) would be Python's TypeError
        raise RuntimeError(f"value cannot be converted to type {dtype} without overflow")
    if isinstance(a, complex):
        a = a.real
    if dtype.is_floating_point:
        return float(a)
    if dtype is dtypes.bool8:
        return bool(a)
    return int(a)


def structseq(kind: str, *fields: Any) -> tuple:
    """``fields`` as eager's named tuple ``torch.return_types.<kind>``, so ``.values``/``.indices`` work."""
    return getattr(torch.return_types, kind)(fields)
