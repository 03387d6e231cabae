"""Convolutions: ``F.conv{1,2,3}d`` and ``F.conv_transpose{1,2,3}d`` over ``prims.convolution``.

The torch language normalizes what the prim keeps strict: unbatched inputs, scalar-or-tuple
arguments, and string paddings (``'same'`` pads asymmetrically first when the kernel needs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol


def per_dim(value: Any, spatial: int, name: str) -> list[int]:
    """A scalar-or-sequence argument as one int per spatial dim."""
    if isinstance(value, int):
        return [value] * spatial
    values = list(value)
    if len(values) == 1:
        return values * spatial
    if len(values) != spatial:
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {spatial} values, got {values}"
        )
    return [int(v) for v in values]


def _batched(a: TensorProxy, spatial: int, name: str) -> tuple[TensorProxy, bool]:
    if a.ndim == spatial + 1:
        return prims.reshape(a, (1, *a.shape)), True
    if a.ndim != spatial + 2:
        raise RuntimeError(
            f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {name}, but got input of size: {list(a.shape)}"
        )
    return a, False


def _unbatched(result: TensorProxy, squeeze: bool) -> TensorProxy:
    return prims.reshape(result, result.shape[1:]) if squeeze else result


def _check_operands(
    name: str, a: TensorProxy, weight: TensorProxy, bias: TensorProxy | None, groups: int
) -> None:
    if weight.ndim != a.ndim:
        raise RuntimeError(
            f"{name}: expected weight to be {a.ndim}-dimensional, but got weight of size {list(weight.shape)}"
        )
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    for t in (weight, bias):
        if t is not None and t.dtype is not a.dtype:
            raise RuntimeError(
                f"{name}: input type ({a.dtype}) and weight/bias type ({t.dtype}) should be the same"
            )


def _convolve(name: str, spatial: int, a: TensorProxy, weight: TensorProxy, bias: TensorProxy | None, stride: Any,
              padding: Any, dilation: Any, groups: int) -> TensorProxy:  # fmt: skip
    a, squeeze = _batched(a, spatial, name)
    _check_operands(name, a, weight, bias, groups)
    strides = per_dim(stride, spatial, "stride")
    dilations = per_dim(dilation, spatial, "dilation")
    if isinstance(padding, str):
        a, paddings = _string_padding(a, weight, padding, strides, dilations)
    else:
        paddings = per_dim(padding, spatial, "padding")
    if min(paddings) < 0:
        raise RuntimeError("negative padding is not supported")
    result = prims.convolution(a, weight, bias, strides, paddings, dilations, False, [0] * spatial, groups)
    return _unbatched(result, squeeze)


def _string_padding(a: TensorProxy, weight: TensorProxy, padding: str, strides: Sequence[int],
                    dilations: Sequence[int]) -> tuple[TensorProxy, list[int]]:  # fmt: skip
    spatial = a.ndim - 2
    if padding == "valid":
        return a, [0] * spatial
    if padding != "same":
        raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
    if any(s != 1 for s in strides):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    symmetric, extra = [], [(0, 0, 0), (0, 0, 0)]
    for k, d in zip(weight.shape[2:], dilations):
        total = d * (k - 1)
        symmetric.append(total // 2)
        extra.append((0, total - 2 * (total // 2), 0))
    if any(high for _, high, _ in extra):
        a = prims.pad(a, 0.0 if a.dtype.is_floating_point else 0, extra)
    return a, symmetric


def _convolve_transposed(name: str, spatial: int, a: TensorProxy, weight: TensorProxy, bias: TensorProxy | None,
                         stride: Any, padding: Any, output_padding: Any, groups: int, dilation: Any) -> TensorProxy:  # fmt: skip
    if isinstance(padding, str):
        raise RuntimeError(f"{name}: padding must be an int or a tuple, not a string")
    a, squeeze = _batched(a, spatial, name)
    _check_operands(name, a, weight, bias, groups)
    paddings = per_dim(padding, spatial, "padding")
    if min(paddings) < 0:
        raise RuntimeError("negative padding is not supported")
    result = prims.convolution(
        a, weight, bias, per_dim(stride, spatial, "stride"), paddings, per_dim(dilation, spatial, "dilation"), True,
        per_dim(output_padding, spatial, "output_padding"), groups,
    )  # fmt: skip
    return _unbatched(result, squeeze)


@torchsymbol(F.conv1d, torch.conv1d)
def conv1d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> TensorProxy:  # fmt: skip
    return _convolve("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(F.conv2d, torch.conv2d)
def conv2d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> TensorProxy:  # fmt: skip
    return _convolve("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(F.conv3d, torch.conv3d)
def conv3d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> TensorProxy:  # fmt: skip
    return _convolve("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(F.conv_transpose1d, torch.conv_transpose1d)
def conv_transpose1d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> TensorProxy:  # fmt: skip
    return _convolve_transposed(
        "conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@torchsymbol(F.conv_transpose2d, torch.conv_transpose2d)
def conv_transpose2d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> TensorProxy:  # fmt: skip
    return _convolve_transposed(
        "conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@torchsymbol(F.conv_transpose3d, torch.conv_transpose3d)
def conv_transpose3d(input: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> TensorProxy:  # fmt: skip
    return _convolve_transposed(
        "conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups, dilation
    )
