"""Pooling: max, average and adaptive pooling in 1, 2 and 3 spatial dims.

Every pooling here is a reduction over *windows*: for each kernel offset, the input elements that
offset picks for every output position. Per spatial dim, an offset's positions are a strided slice
of the padded input (regular pooling) or a constant index list (adaptive pooling); combining the
offsets with ``maximum`` or ``add`` gives the result. ``max_pool`` indices are the flat positions in
the unpadded input, tracked alongside the running maximum as eager's kernel does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch.convolution import per_dim
from thunder.torch.nn_common import computation_dtype, is_progression, select_positions
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import expand_to, to_dtype


@dataclass(frozen=True)
class Axis:
    """One spatial dim of a pooling: its input size and, per kernel offset, each output's input position.

    Positions outside ``[0, size)`` read padding. ``include`` counts, per output, the positions an
    average with ``count_include_pad`` divides by.
    """

    size: int
    positions: tuple[tuple[int, ...], ...]
    include: tuple[int, ...]

    @property
    def out(self) -> int:
        return len(self.positions[0]) if self.positions else 0


def regular_axis(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> Axis:
    out = pooled_size(size, kernel, stride, padding, dilation, ceil_mode)
    positions = tuple(tuple(o * stride - padding + j * dilation for o in range(out)) for j in range(kernel))
    include = tuple(
        min(o * stride - padding + (kernel - 1) * dilation + 1, size + padding) - (o * stride - padding)
        for o in range(out)
    )
    return Axis(size, positions, include)


def adaptive_axis(size: int, out: int) -> Axis:
    """Windows ``[floor(i*size/out), ceil((i+1)*size/out))``; shorter windows point past the end."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-((-(i + 1) * size) // out) for i in range(out)]
    longest = max((e - s for s, e in zip(starts, ends)), default=0)
    positions = tuple(
        tuple(s + j if s + j < e else size for s, e in zip(starts, ends)) for j in range(longest)
    )
    return Axis(size, positions, tuple(e - s for s, e in zip(starts, ends)))


def pooled_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _padded(x: TensorProxy, axes: Sequence[Axis], fill: Any) -> tuple[TensorProxy, list[int]]:
    """``x`` padded on its trailing dims so that every position is in range, and the low paddings."""
    config, lows = [(0, 0, 0)] * (x.ndim - len(axes)), []
    for axis in axes:
        flat = [p for offset in axis.positions for p in offset] or [0]
        low, high = max(0, -min(flat)), max(0, max(flat) - axis.size + 1)
        config.append((low, high, 0))
        lows.append(low)
    if any(low or high for low, high, _ in config):
        x = prims.pad(x, fill, config)
    return x, lows


def windows(x: TensorProxy, axes: Sequence[Axis], fill: Any) -> Iterator[tuple[tuple[int, ...], TensorProxy]]:
    """For each combination of kernel offsets, (the offsets, the elements they pick), in row-major order.

    Selections are shared between combinations with a common prefix of offsets."""
    padded, lows = _padded(x, axes, fill)
    first = x.ndim - len(axes)
    picked: dict[tuple[int, ...], TensorProxy] = {(): padded}
    for offsets in itertools.product(*(range(len(axis.positions)) for axis in axes)):
        for d in range(len(axes)):
            prefix = offsets[: d + 1]
            if prefix not in picked:
                positions = [p + lows[d] for p in axes[d].positions[offsets[d]]]
                picked[prefix] = select_positions(picked[offsets[:d]], first + d, positions)
        yield offsets, picked[offsets]


def _axis_constant(
    values: Sequence[int], d: int, axes: Sequence[Axis], x: TensorProxy, dtype: dtypes.dtype
) -> Any:
    """A 1-d constant along spatial dim ``d``, shaped to broadcast against the pooled output."""
    shape = (1,) * (x.ndim - len(axes)) + tuple(len(values) if i == d else 1 for i in range(len(axes)))
    if is_progression(values) and len(values) > 1:
        constant = prims.iota(
            len(values), start=values[0], step=values[1] - values[0], device=x.device, dtype=dtype
        )
    else:
        constant = prims.tensor_from_sequence(list(values), device=x.device, dtype=dtype)
    return prims.reshape(constant, shape)


class _FlatPositions:
    """The flat index into the unpadded spatial dims of the positions some offsets pick (padding
    clamps to the nearest valid position, which eager reports for a window of padding only); the
    partial sums over leading dims are shared between offsets."""

    def __init__(self, axes: Sequence[Axis], x: TensorProxy):
        self.axes, self.x = axes, x
        self.strides = [math.prod(axis.size for axis in axes[d + 1 :]) for d in range(len(axes))]
        self.sums: dict[tuple[int, ...], Any] = {}

    def __call__(self, offsets: tuple[int, ...], out_shape: tuple[int, ...]) -> TensorProxy:
        total: Any = None
        for d, axis in enumerate(self.axes):
            prefix = offsets[: d + 1]
            if prefix not in self.sums:
                clamped = [
                    min(max(p, 0), axis.size - 1) * self.strides[d] for p in axis.positions[offsets[d]]
                ]
                term = _axis_constant(clamped, d, self.axes, self.x, dtypes.int64)
                self.sums[prefix] = term if total is None else ew.add(total, term)
            total = self.sums[prefix]
        return expand_to(total, out_shape)


def max_over_windows(
    x: TensorProxy, axes: Sequence[Axis], with_indices: bool
) -> tuple[TensorProxy, TensorProxy | None]:
    fill = -math.inf if x.dtype.is_floating_point else torch.iinfo(x.dtype.torch_dtype).min
    best: Any = None
    best_index: Any = None
    flat_positions = _FlatPositions(axes, x)
    for offsets, picked in windows(x, axes, fill):
        if best is None:
            best = picked
            best_index = flat_positions(offsets, picked.shape) if with_indices else None
        elif not with_indices:
            best = ew.maximum(best, picked)
        else:
            take = (
                ew.bitwise_or(ew.gt(picked, best), ew.isnan(picked))
                if x.dtype.is_floating_point
                else ew.gt(picked, best)
            )
            best = ew.where(take, picked, best)
            best_index = ew.where(take, flat_positions(offsets, picked.shape), best_index)
    return best, best_index


def sum_over_windows(x: TensorProxy, axes: Sequence[Axis]) -> TensorProxy:
    total: Any = None
    for _, picked in windows(x, axes, 0.0 if x.dtype.is_floating_point else 0):
        total = picked if total is None else ew.add(total, picked)
    return total


def _divisor(axes: Sequence[Axis], x: TensorProxy, include_pad: bool) -> Any:
    """Per output, how many elements an average divides by: a number when all agree."""
    per_axis = []
    for axis in axes:
        if include_pad:
            per_axis.append(list(axis.include))
        else:
            valid = [0] * axis.out
            for offset in axis.positions:
                for i, p in enumerate(offset):
                    valid[i] += 0 <= p < axis.size
            per_axis.append(valid)
    if all(len(set(values)) <= 1 for values in per_axis):
        count = math.prod(values[0] if values else 1 for values in per_axis)
        return float(count) if x.dtype.is_floating_point else count
    result: Any = None
    for d, values in enumerate(per_axis):
        term = _axis_constant(values, d, axes, x, x.dtype)
        result = term if result is None else ew.mul(result, term)
    return result


# ---------------------------------------------------------------------------------------------
# argument handling


def _batched(a: TensorProxy, spatial: int, name: str) -> tuple[TensorProxy, bool]:
    if a.ndim == spatial + 1:
        return prims.reshape(a, (1, *a.shape)), True
    if a.ndim != spatial + 2:
        raise RuntimeError(
            f"{name}: Expected {spatial + 1}D or {spatial + 2}D input, but got input of size {list(a.shape)}"
        )
    return a, False


def _unbatched(result: TensorProxy | None, squeeze: bool) -> Any:
    return prims.reshape(result, result.shape[1:]) if squeeze and result is not None else result


def _check_nonempty(name: str, a: TensorProxy, spatial: int) -> None:
    if any(s == 0 for s in a.shape[-spatial - 1 :]) or (a.ndim == spatial + 2 and a.shape[1] == 0):
        raise RuntimeError(
            f"{name}: Expected input's non-batch dimensions to have positive length, but got {list(a.shape)}"
        )


def _regular_axes(name: str, a: TensorProxy, spatial: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                  ceil_mode: bool) -> list[Axis]:  # fmt: skip
    kernel = per_dim(kernel_size, spatial, "kernel_size")
    strides = (
        per_dim(stride, spatial, "stride") if stride is not None and stride != [] and stride != () else kernel
    )
    paddings = per_dim(padding, spatial, "padding")
    dilations = per_dim(dilation, spatial, "dilation")
    if min(kernel) <= 0 or min(strides) <= 0 or min(dilations) <= 0:
        raise RuntimeError(f"{name}: kernel_size, stride and dilation must be greater than zero")
    axes = []
    for size, k, s, p, d in zip(a.shape[-spatial:], kernel, strides, paddings, dilations):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(
                f"{name}: pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation={d}"
            )
        if pooled_size(size, k, s, p, d, ceil_mode) < 1:
            raise RuntimeError(f"{name}: Output size is too small for input of size {list(a.shape)}")
        axes.append(regular_axis(size, k, s, p, d, ceil_mode))
    return axes


def _max_pool(name: str, spatial: int, a: TensorProxy, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool, return_indices: bool) -> Any:  # fmt: skip
    x, squeeze = _batched(a, spatial, name)
    _check_nonempty(name, a, spatial)
    if x.dtype is dtypes.bool8 or x.dtype.is_complex:
        raise RuntimeError(f"{name}: not implemented for {x.dtype}")
    axes = _regular_axes(name, x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    values, indices = max_over_windows(x, axes, return_indices)
    if return_indices:
        return _unbatched(values, squeeze), _unbatched(indices, squeeze)
    return _unbatched(values, squeeze)


@torchsymbol(F.max_pool1d, torch.max_pool1d)
def max_pool1d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:  # fmt: skip
    return _max_pool(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@torchsymbol(F.max_pool2d, torch.max_pool2d)
def max_pool2d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:  # fmt: skip
    return _max_pool(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@torchsymbol(F.max_pool3d, torch.max_pool3d)
def max_pool3d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:  # fmt: skip
    return _max_pool(
        "max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def _avg_pool(name: str, spatial: int, a: TensorProxy, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: Any) -> TensorProxy:  # fmt: skip
    x, squeeze = _batched(a, spatial, name)
    _check_nonempty(name, a, spatial)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    axes = _regular_axes(name, x, spatial, kernel_size, stride, padding, 1, ceil_mode)
    x = to_dtype(x, computation_dtype(x.dtype))
    total = sum_over_windows(x, axes)
    divisor = divisor_override if divisor_override is not None else _divisor(axes, x, count_include_pad)
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        return _unbatched(ew.div(total, divisor, rounding_mode="trunc"), squeeze)  # as eager's integer kernel
    return _unbatched(to_dtype(ew.true_divide(total, divisor), a.dtype), squeeze)


@torchsymbol(F.avg_pool1d, torch.avg_pool1d)
def avg_pool1d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> TensorProxy:  # fmt: skip
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@torchsymbol(F.avg_pool2d)
def avg_pool2d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> TensorProxy:  # fmt: skip
    return _avg_pool(
        "avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


@torchsymbol(F.avg_pool3d)
def avg_pool3d(input: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> TensorProxy:  # fmt: skip
    return _avg_pool(
        "avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


# ---------------------------------------------------------------------------------------------
# adaptive pooling


def _adaptive_axes(name: str, a: TensorProxy, spatial: int, output_size: Any) -> list[Axis]:
    sizes = (
        [output_size] * spatial if isinstance(output_size, int) or output_size is None else list(output_size)
    )
    if len(sizes) == 1 and spatial > 1:
        sizes = sizes * spatial
    if len(sizes) != spatial:
        raise RuntimeError(f"{name}: output_size must be {spatial} values, got {output_size}")
    resolved = [a.shape[a.ndim - spatial + d] if s is None else int(s) for d, s in enumerate(sizes)]
    if min(resolved) < 0:
        raise RuntimeError(
            f"{name}: elements of output_size must be greater than or equal to 0, got {resolved}"
        )
    return [adaptive_axis(a.shape[a.ndim - spatial + d], s) for d, s in enumerate(resolved)]


def _check_output_size_rank(spatial: int, a: TensorProxy, output_size: Any) -> None:
    """torch.nn.functional's own check, before ATen's: a ValueError where the input has too few dims."""
    if spatial > 1 and isinstance(output_size, Sequence) and a.ndim <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")


def _adaptive_avg_pool(name: str, spatial: int, a: TensorProxy, output_size: Any) -> TensorProxy:
    _check_output_size_rank(spatial, a, output_size)
    x, squeeze = _batched(a, spatial, name)
    _check_nonempty(name, a, spatial)
    axes = _adaptive_axes(name, x, spatial, output_size)
    x = to_dtype(x, computation_dtype(x.dtype))
    if any(axis.out == 0 for axis in axes):
        empty = x.shape[: x.ndim - spatial] + tuple(axis.out for axis in axes)
        return _unbatched(prims.full(empty, 0.0, device=x.device, dtype=a.dtype), squeeze)
    total = sum_over_windows(x, axes)
    return _unbatched(to_dtype(ew.true_divide(total, _divisor(axes, x, False)), a.dtype), squeeze)


@torchsymbol(F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d)
def adaptive_avg_pool1d(input: TensorProxy, output_size: Any) -> TensorProxy:
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


@torchsymbol(F.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input: TensorProxy, output_size: Any) -> TensorProxy:
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


@torchsymbol(F.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input: TensorProxy, output_size: Any) -> TensorProxy:
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max_pool(
    name: str, spatial: int, a: TensorProxy, output_size: Any, return_indices: bool
) -> Any:
    _check_output_size_rank(spatial, a, output_size)
    x, squeeze = _batched(a, spatial, name)
    _check_nonempty(name, a, spatial)
    axes = _adaptive_axes(name, x, spatial, output_size)
    if any(axis.out == 0 for axis in axes):
        raise NotImplementedError(f"{name} with an output size of 0 is not supported by thunder")
    values, indices = max_over_windows(x, axes, return_indices)
    if return_indices:
        return _unbatched(values, squeeze), _unbatched(indices, squeeze)
    return _unbatched(values, squeeze)


@torchsymbol(F.adaptive_max_pool1d)
def adaptive_max_pool1d(a: TensorProxy, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive_max_pool("adaptive_max_pool1d", 1, a, output_size, return_indices)


@torchsymbol(F.adaptive_max_pool2d)
def adaptive_max_pool2d(a: TensorProxy, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive_max_pool("adaptive_max_pool2d", 2, a, output_size, return_indices)


@torchsymbol(F.adaptive_max_pool3d)
def adaptive_max_pool3d(a: TensorProxy, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive_max_pool("adaptive_max_pool3d", 3, a, output_size, return_indices)


def _max_unpool(name: str, spatial: int, a: TensorProxy, indices: TensorProxy, kernel_size: Any, stride: Any,
                padding: Any, output_size: Any) -> TensorProxy:  # fmt: skip
    """Each input value written at its flat spatial index of the output; everything else is 0."""
    x, squeeze = _batched(a, spatial, name)
    index, _ = _batched(indices, spatial, name)
    if index.shape != x.shape or index.dtype is not dtypes.int64:
        raise RuntimeError(
            f"{name}: Expected shape of indices to be same as that of the input tensor ({list(a.shape)}) and an int64 dtype"
        )
    kernel = per_dim(kernel_size, spatial, "kernel_size")
    strides = per_dim(stride, spatial, "stride") if stride is not None else kernel
    paddings = per_dim(padding, spatial, "padding")
    default = [(size - 1) * s - 2 * p + k for size, s, p, k in zip(x.shape[2:], strides, paddings, kernel)]
    sizes = default if output_size is None else [int(s) for s in list(output_size)[-spatial:]]
    if output_size is not None and any(abs(s - d) >= st for s, d, st in zip(sizes, default, strides)):
        raise ValueError(
            f"{name}: output_size {sizes} is not within one stride of the default size {default}"
        )
    n, c = x.shape[:2]
    flat_size = math.prod(sizes)
    zeros = prims.full((n, c, flat_size), 0, device=x.device, dtype=x.dtype)
    flat_index = prims.reshape(index, (n, c, math.prod(x.shape[2:])))
    flat_values = prims.reshape(x, (n, c, math.prod(x.shape[2:])))
    result = prims.reshape(prims.scatter(zeros, 2, flat_index, flat_values), (n, c, *sizes))
    return _unbatched(result, squeeze)


@torchsymbol(F.max_unpool1d)
def max_unpool1d(input: TensorProxy, indices: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> TensorProxy:  # fmt: skip
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


@torchsymbol(F.max_unpool2d)
def max_unpool2d(input: TensorProxy, indices: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> TensorProxy:  # fmt: skip
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


@torchsymbol(F.max_unpool3d)
def max_unpool3d(input: TensorProxy, indices: TensorProxy, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> TensorProxy:  # fmt: skip
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


def _lp_pool(
    name: str, spatial: int, a: TensorProxy, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool
) -> TensorProxy:
    """(sum over the window of x^p)^(1/p), as eager computes it: the average pool of x^p times the
    window size, then the root (NaN for a negative sum, as in eager); p = +-inf pools |x| by max."""
    kernel = per_dim(kernel_size, spatial, "kernel_size")
    if norm_type == math.inf:
        return _max_pool(name, spatial, ew.abs(a), kernel, stride, 0, 1, ceil_mode, False)
    if norm_type == -math.inf:
        return ew.neg(_max_pool(name, spatial, ew.neg(ew.abs(a)), kernel, stride, 0, 1, ceil_mode, False))
    average = _avg_pool(name, spatial, ew.pow(a, norm_type), kernel, stride, 0, ceil_mode, True, None)
    return ew.pow(ew.mul(average, float(math.prod(kernel))), 1.0 / norm_type)


@torchsymbol(F.lp_pool1d)
def lp_pool1d(
    input: TensorProxy, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> TensorProxy:
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


@torchsymbol(F.lp_pool2d)
def lp_pool2d(
    input: TensorProxy, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> TensorProxy:
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


@torchsymbol(F.lp_pool3d)
def lp_pool3d(
    input: TensorProxy, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> TensorProxy:
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)
