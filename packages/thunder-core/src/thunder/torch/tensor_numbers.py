"""Python numbers read from a tensor's data (``float(t)``), kept as 0-d tensors of the trace.

Eager reads the value (a device sync); a trace has no data. ``float(t)`` in a traced program gives a
``TensorNumber``: arithmetic with Python numbers stays one (``1.0 / float(self.num_batches_tracked)``,
BatchNorm's cumulative moving average with ``momentum=None``), and the torch language takes one
where it says so (``F.batch_norm``'s momentum). Any other use (a branch, a format, an op that takes
no such number) raises the error for constructs that read a tensor's data, naming ``float(Tensor)``.
"""

from __future__ import annotations

from typing import Any

import torch
from thunder.core import dtypes
from thunder.core.proxies import TensorProxy, reads_data_error

__all__ = ["TensorNumber", "float_of", "int_of", "tensor_of"]


def _operand(value: Any) -> Any:
    if isinstance(value, TensorNumber):
        return value.tensor
    if type(value) in (int, float, bool):
        return value
    raise reads_data_error("float(Tensor)")


class TensorNumber:
    """A Python float the program read from a tensor (``float(t)``): a 0-d float64 tensor of the trace."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: TensorProxy):
        self.tensor = tensor

    def _apply(self, op: str, other: Any, reflected: bool = False) -> TensorNumber:
        from thunder.torch import elementwise

        a, b = self.tensor, _operand(other)
        with torch.no_grad():  # a number carries no gradient
            return TensorNumber(getattr(elementwise, op)(*((b, a) if reflected else (a, b))))

    def __add__(self, other: Any) -> TensorNumber:
        return self._apply("add", other)

    def __radd__(self, other: Any) -> TensorNumber:
        return self._apply("add", other, reflected=True)

    def __sub__(self, other: Any) -> TensorNumber:
        return self._apply("sub", other)

    def __rsub__(self, other: Any) -> TensorNumber:
        return self._apply("sub", other, reflected=True)

    def __mul__(self, other: Any) -> TensorNumber:
        return self._apply("mul", other)

    def __rmul__(self, other: Any) -> TensorNumber:
        return self._apply("mul", other, reflected=True)

    def __truediv__(self, other: Any) -> TensorNumber:
        return self._apply("true_divide", other)

    def __rtruediv__(self, other: Any) -> TensorNumber:
        return self._apply("true_divide", other, reflected=True)

    def __neg__(self) -> TensorNumber:
        return self._apply("mul", -1)

    def reads_data(self, *args: Any) -> Any:
        """Any use that needs the value; also a symbol called with this number (core/symbol.py)."""
        raise reads_data_error("float(Tensor)")

    __bool__ = __float__ = __int__ = __index__ = __format__ = __hash__ = reads_data
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __pow__ = __rpow__ = __floordiv__ = reads_data

    def __repr__(self) -> str:
        return f"float({self.tensor.name})"


def float_of(value: Any = 0.0) -> Any:
    """``float(value)`` as the frontend calls it: a ``TensorNumber`` for a one-element tensor."""
    if not isinstance(value, TensorProxy):
        return float(value)
    if value.numel() != 1:
        raise RuntimeError("a Tensor with more than one value cannot be converted to a Python scalar")
    from thunder.torch import shape
    from thunder.torch.utils import to_dtype

    with torch.no_grad():
        return TensorNumber(to_dtype(shape.reshape(value, ()), dtypes.float64))


def int_of(value: Any = 0, *args: Any) -> Any:
    """``int(value)`` as the frontend calls it: a tensor's value is data the trace does not have."""
    if isinstance(value, TensorProxy):
        raise reads_data_error("int(Tensor)")
    return int(value, *args)


def tensor_of(value: Any) -> Any:
    """A ``TensorNumber``'s 0-d tensor; anything else as it is."""
    return value.tensor if isinstance(value, TensorNumber) else value
