"""thunder's dtypes: one object per element type, printable as ``dtypes.float32`` and short as ``f32``.

``str()`` (and so an f-string in an error message) gives torch's name, ``torch.float32``, the name
a user knows from eager's messages; ``repr()`` gives the name traces use.

thunder keeps its own dtype objects (rather than using ``torch.dtype`` directly) so that traces and
metas can ask questions of them (is it floating? what is its category for type promotion?) without
tables spread over the code, and so that a trace names its types independently of any executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "dtype",
    "to_dtype",
    "to_torch_dtype",
    "is_boolean",
    "is_integer",
    "is_float",
    "is_complex",
    "is_low_precision",
    "python_type_to_dtype",
    "bool8",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
]

BOOLEAN, INTEGER, FLOAT, COMPLEX = 0, 1, 2, 3


@dataclass(frozen=True, eq=False)
class dtype:  # noqa: N801 -- named like torch.dtype, which it mirrors
    """An element type. Identity is equality: there is exactly one object per type."""

    name: str
    short_name: str
    category: int  # BOOLEAN < INTEGER < FLOAT < COMPLEX, the order type promotion uses
    bits: int
    torch_dtype: torch.dtype

    def __repr__(self) -> str:  # how a trace spells it
        return f"dtypes.{self.name}"

    def __str__(self) -> str:  # how a message spells it: as eager's errors do, ``torch.float64``
        return str(self.torch_dtype)

    # User code compares a tensor's dtype with torch's (``x.dtype == torch.float16``); a proxy's
    # dtype is a thunder dtype, so the two must compare equal and hash alike.
    def __eq__(self, other: object) -> bool:
        return other is self or other is self.torch_dtype

    def __hash__(self) -> int:
        return hash(self.torch_dtype)

    @property
    def itemsize(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOAT

    @property
    def is_complex(self) -> bool:
        return self.category == COMPLEX


bool8 = dtype("bool8", "b8", BOOLEAN, 8, torch.bool)
uint8 = dtype("uint8", "u8", INTEGER, 8, torch.uint8)
int8 = dtype("int8", "i8", INTEGER, 8, torch.int8)
int16 = dtype("int16", "i16", INTEGER, 16, torch.int16)
int32 = dtype("int32", "i32", INTEGER, 32, torch.int32)
int64 = dtype("int64", "i64", INTEGER, 64, torch.int64)
float16 = dtype("float16", "f16", FLOAT, 16, torch.float16)
bfloat16 = dtype("bfloat16", "bf16", FLOAT, 16, torch.bfloat16)
float32 = dtype("float32", "f32", FLOAT, 32, torch.float32)
float64 = dtype("float64", "f64", FLOAT, 64, torch.float64)
complex64 = dtype("complex64", "c64", COMPLEX, 64, torch.complex64)
complex128 = dtype("complex128", "c128", COMPLEX, 128, torch.complex128)
float8_e4m3fn = dtype("float8_e4m3fn", "f8_e4m3fn", FLOAT, 8, torch.float8_e4m3fn)
float8_e5m2 = dtype("float8_e5m2", "f8_e5m2", FLOAT, 8, torch.float8_e5m2)

all_dtypes: tuple[dtype, ...] = (
    bool8, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
    complex64, complex128, float8_e4m3fn, float8_e5m2,
)  # fmt: skip

_from_torch: dict[torch.dtype, dtype] = {d.torch_dtype: d for d in all_dtypes}
_from_python: dict[type, dtype] = {bool: bool8, int: int64, float: float32, complex: complex64}


def to_dtype(x: Any) -> dtype:
    """A thunder dtype from a thunder dtype, a ``torch.dtype``, or a Python number type."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, torch.dtype):
        try:
            return _from_torch[x]
        except KeyError:
            raise NotImplementedError(f"thunder does not support the dtype {x}") from None
    if x in _from_python:
        return _from_python[x]
    raise ValueError(f"{x!r} is not a dtype")


def to_torch_dtype(x: Any) -> torch.dtype:
    return x if isinstance(x, torch.dtype) else to_dtype(x).torch_dtype


def python_type_to_dtype(typ: type) -> dtype:
    return _from_python[typ]


def is_boolean(d: Any) -> bool:
    return to_dtype(d).category == BOOLEAN


def is_integer(d: Any) -> bool:
    """Integer, excluding bool (as ``torch.is_floating_point``'s counterpart would)."""
    return to_dtype(d).category == INTEGER


def is_float(d: Any) -> bool:
    return to_dtype(d).category == FLOAT


def is_complex(d: Any) -> bool:
    return to_dtype(d).category == COMPLEX


def is_low_precision(d: Any) -> bool:
    """Floating types that PyTorch computes in float32 inside fused elementwise kernels."""
    return to_dtype(d) in (float16, bfloat16, float8_e4m3fn, float8_e5m2)
