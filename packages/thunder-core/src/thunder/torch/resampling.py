"""Resampling and rearranging: ``F.interpolate`` (nearest, nearest-exact, linear/bilinear/trilinear,
bicubic, area), ``F.unfold``, ``F.pixel_shuffle``/``pixel_unshuffle`` and ``F.channel_shuffle``.

Interpolation is separable: each spatial dim is resampled on its own, by gathering the source
positions (constants computed at trace time, with torch in the same float precision as eager's
kernels, so that boundary cases round alike) and blending them with constant weights.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch import shape
from thunder.torch.convolution import per_dim
from thunder.torch.nn_common import computation_dtype, narrow, select_positions
from thunder.torch.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    regular_axis,
    windows,
)
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _output_sizes(
    a: TensorProxy, spatial: int, size: Any, scale_factor: Any
) -> tuple[list[int], list[float | None]]:
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [int(s) for s in (size if isinstance(size, Sequence) else [size] * spatial)]
        if len(sizes) != spatial:
            raise ValueError(
                f"Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of {list(a.shape[2:])} and output size of {sizes}."
            )
        return sizes, [None] * spatial
    scales: list[float | None] = [
        float(s) for s in (scale_factor if isinstance(scale_factor, Sequence) else [scale_factor] * spatial)
    ]
    if len(scales) != spatial:
        raise ValueError(
            f"Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {list(a.shape[2:])} and scale_factor of shape {scales}."
        )
    return [math.floor(n * float(s or 0)) for n, s in zip(a.shape[2:], scales)], scales


def _scale(
    in_size: int, out_size: int, scale: float | None, align_corners: bool, dtype: torch.dtype
) -> torch.Tensor:
    if align_corners:
        value = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    elif scale is not None and scale > 0:
        value = 1.0 / scale
    else:
        value = in_size / out_size
    return torch.tensor(value, dtype=dtype)


def _nearest(x: TensorProxy, dim: int, out_size: int, scale: float | None, exact: bool) -> TensorProxy:
    in_size = x.shape[dim]
    step = _scale(in_size, out_size, scale, False, torch.float32)
    offset = 0.5 if exact else 0.0
    positions = torch.floor((torch.arange(out_size, dtype=torch.float32) + offset) * step).clamp(
        max=in_size - 1
    )
    return select_positions(x, dim, [int(p) for p in positions.tolist()])


def _source(in_size: int, out_size: int, scale: float | None, align_corners: bool, cubic: bool,
            dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    step = _scale(in_size, out_size, scale, align_corners, dtype)
    destination = torch.arange(out_size, dtype=dtype)
    if align_corners:
        return destination * step
    source = step * (destination + 0.5) - 0.5
    return source if cubic else source.clamp(min=0)


def _weights(values: torch.Tensor, x: TensorProxy, dim: int) -> TensorProxy:
    """A constant along ``dim`` that broadcasts against ``x``."""
    constant = prims.tensor_from_sequence(values.tolist(), device=x.device, dtype=x.dtype)
    return prims.reshape(constant, tuple(x.shape[dim] if d == dim else 1 for d in range(x.ndim)))


def _linear(x: TensorProxy, dim: int, out_size: int, scale: float | None, align_corners: bool) -> TensorProxy:
    in_size = x.shape[dim]
    source = _source(in_size, out_size, scale, align_corners, False, x.dtype.torch_dtype)
    low = source.floor().long().clamp(max=in_size - 1)
    high = (low + 1).clamp(max=in_size - 1)
    high_weight = source - low.to(source.dtype)
    low_values = select_positions(x, dim, low.tolist())
    high_values = select_positions(x, dim, high.tolist())
    blended = ew.mul(low_values, _weights(1 - high_weight, low_values, dim))
    return ew.add(blended, ew.mul(high_values, _weights(high_weight, high_values, dim)))


def _cubic_coefficients(t: torch.Tensor) -> list[torch.Tensor]:
    """Keys' cubic convolution weights (a = -0.75) of the four taps around a fractional offset t."""
    a = -0.75

    def near(s: torch.Tensor) -> torch.Tensor:
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s: torch.Tensor) -> torch.Tensor:
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _cubic(x: TensorProxy, dim: int, out_size: int, scale: float | None, align_corners: bool) -> TensorProxy:
    in_size = x.shape[dim]
    source = _source(in_size, out_size, scale, align_corners, True, x.dtype.torch_dtype)
    base = source.floor()
    coefficients = _cubic_coefficients(source - base)
    result: Any = None
    for tap, coefficient in zip(range(-1, 3), coefficients):
        positions = (base.long() + tap).clamp(0, in_size - 1)
        values = select_positions(x, dim, positions.tolist())
        term = ew.mul(values, _weights(coefficient, values, dim))
        result = term if result is None else ew.add(result, term)
    return result


@torchsymbol(F.interpolate)
def interpolate(input: TensorProxy, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> TensorProxy:  # fmt: skip
    spatial = input.ndim - 2
    if spatial < 1 or spatial > 3:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})"
        )
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"
        )
    if antialias:
        raise NotImplementedError("interpolate with antialias=True is not supported by thunder yet")
    sizes, scales = _output_sizes(input, spatial, size, scale_factor)
    if recompute_scale_factor:
        scales = [None] * spatial
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[spatial - 1](input, sizes)
    if mode in _LINEAR_MODES and _LINEAR_MODES[mode] != spatial:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_MODES[mode] + 2}D input"
        )
    if mode == "bicubic" and spatial != 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but bicubic mode needs 4D input")
    if mode not in ("nearest", "nearest-exact", "bicubic", *_LINEAR_MODES):
        raise NotImplementedError(f"interpolate mode {mode!r} is not supported")
    if any(s <= 0 for s in sizes) or any(s == 0 for s in input.shape[1:]):
        raise RuntimeError(
            f"Input and output sizes should be greater than 0, but got input {list(input.shape[2:])} and output {sizes}"
        )
    if mode in ("nearest", "nearest-exact"):
        x = input
        for d, (out_size, scale) in enumerate(zip(sizes, scales)):
            x = _nearest(x, d + 2, out_size, scale, mode == "nearest-exact")
        return x
    x = to_dtype(input, computation_dtype(input.dtype))
    resample = _cubic if mode == "bicubic" else _linear
    for d, (out_size, scale) in enumerate(zip(sizes, scales)):
        x = resample(x, d + 2, out_size, scale, bool(align_corners))
    return to_dtype(x, input.dtype)


@torchsymbol(F.upsample_nearest)
def upsample_nearest(input: TensorProxy, size: Any = None, scale_factor: Any = None) -> TensorProxy:
    return interpolate(input, size, scale_factor, "nearest")


@torchsymbol(F.upsample_bilinear)
def upsample_bilinear(input: TensorProxy, size: Any = None, scale_factor: Any = None) -> TensorProxy:
    return interpolate(input, size, scale_factor, "bilinear", True)


# ---------------------------------------------------------------------------------------------
# unfold (im2col), pixel and channel shuffles


@torchsymbol(F.unfold)
def im2col(
    input: TensorProxy, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> TensorProxy:
    """Sliding blocks as columns: (N, C * prod(kernel), L), channels outermost, then kernel offsets."""
    if input.ndim not in (3, 4):
        raise NotImplementedError(
            f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)"
        )
    batched = input if input.ndim == 4 else prims.reshape(input, (1, *input.shape))
    kernel, dilations = per_dim(kernel_size, 2, "kernel_size"), per_dim(dilation, 2, "dilation")
    paddings, strides = per_dim(padding, 2, "padding"), per_dim(stride, 2, "stride")
    if min(kernel) <= 0 or min(dilations) <= 0 or min(strides) <= 0 or min(paddings) < 0:
        raise RuntimeError(
            "unfold: kernel_size, dilation and stride must be positive and padding non-negative"
        )
    axes = []
    for size, k, s, p, d in zip(batched.shape[2:], kernel, strides, paddings, dilations):
        if (size + 2 * p - d * (k - 1) - 1) // s + 1 < 1:
            raise RuntimeError(
                f"unfold: the sliding blocks of {kernel} do not fit in the padded input {list(input.shape)}"
            )
        axes.append(regular_axis(size, k, s, p, d, False))
    blocks = [picked for _, picked in windows(batched, axes, 0.0 if input.dtype.is_floating_point else 0)]
    n, c = batched.shape[:2]
    length = axes[0].out * axes[1].out
    stacked = shape.stack([prims.reshape(b, (n, c, length)) for b in blocks], 2)
    result = prims.reshape(stacked, (n, c * len(blocks), length))
    return result if input.ndim == 4 else prims.reshape(result, result.shape[1:])


@torchsymbol(F.pixel_shuffle, torch.pixel_shuffle)
def pixel_shuffle(input: TensorProxy, upscale_factor: int) -> TensorProxy:
    r = upscale_factor
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0 or input.shape[-3] % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={input.shape[-3]} is not divisible by {r * r}"
        )
    *batch, c, h, w = input.shape
    split = prims.reshape(input, (*batch, c // (r * r), r, r, h, w))
    b = len(batch)
    moved = shape.permute(split, [*range(b), b, b + 3, b + 1, b + 4, b + 2])
    return prims.reshape(moved, (*batch, c // (r * r), h * r, w * r))


@torchsymbol(F.pixel_unshuffle, torch.pixel_unshuffle)
def pixel_unshuffle(input: TensorProxy, downscale_factor: int) -> TensorProxy:
    r = downscale_factor
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0 or input.shape[-2] % r or input.shape[-1] % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height and width to be divisible by downscale_factor {r}, got {list(input.shape)}"
        )
    *batch, c, h, w = input.shape
    split = prims.reshape(input, (*batch, c, h // r, r, w // r, r))
    b = len(batch)
    moved = shape.permute(split, [*range(b), b, b + 2, b + 4, b + 1, b + 3])
    return prims.reshape(moved, (*batch, c * r * r, h // r, w // r))


@torchsymbol(F.channel_shuffle, torch.channel_shuffle)
def channel_shuffle(input: TensorProxy, groups: int) -> TensorProxy:
    if input.ndim < 3:
        raise RuntimeError(
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if groups <= 0 or input.shape[1] % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {input.shape[1]} channels and {groups} groups."
        )
    n, c, *rest = input.shape
    split = prims.reshape(input, (n, groups, c // groups, *rest))
    moved = shape.permute(split, [0, 2, 1, *range(3, split.ndim)])
    return prims.reshape(moved, input.shape)


# ---------------------------------------------------------------------------------------------
# grid sampling: gathers at data-dependent positions

_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


def _reflect_coordinates(x: TensorProxy, twice_low: int, twice_high: int) -> TensorProxy:
    if twice_low == twice_high:
        return ew.mul(x, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = ew.abs(ew.sub(x, low))
    extra = ew.fmod(distance, span)
    flips = ew.floor(ew.true_divide(distance, span))
    even = ew.eq(ew.fmod(flips, 2.0), 0.0)
    return ew.where(even, ew.add(extra, low), ew.add(ew.sub(span, extra), low))


def _clip(x: TensorProxy, size: int) -> TensorProxy:
    return ew.where(ew.lt(x, 0.0), 0.0, ew.where(ew.gt(x, float(size - 1)), float(size - 1), x))


def _pad_coordinates(x: TensorProxy, size: int, padding_mode: int, align_corners: bool) -> TensorProxy:
    if padding_mode == 1:
        return _clip(x, size)
    if padding_mode == 2:
        reflected = (
            _reflect_coordinates(x, 0, 2 * (size - 1))
            if align_corners
            else _reflect_coordinates(x, -1, 2 * size - 1)
        )
        return _clip(reflected, size)
    return x


def _unnormalize(coordinate: TensorProxy, size: int, align_corners: bool) -> TensorProxy:
    if align_corners:
        return ew.mul(ew.add(coordinate, 1.0), (size - 1) / 2)
    return ew.true_divide(ew.sub(ew.mul(ew.add(coordinate, 1.0), float(size)), 1.0), 2.0)


class _Gather:
    """Reads input[n, :, i_0, ..., i_k] for integer-valued float coordinate tensors, 0 out of bounds."""

    def __init__(self, a: TensorProxy, out_spatial: tuple[int, ...]):
        self.n, self.c = a.shape[:2]
        self.sizes = a.shape[2:]
        self.out_spatial = out_spatial
        self.flat = prims.reshape(a, (self.n, self.c, math.prod(self.sizes)))

    def __call__(self, coordinates: Sequence[TensorProxy]) -> TensorProxy:
        inside: Any = None
        flat_index: Any = None
        stride = 1
        for coordinate, size in reversed(list(zip(coordinates, self.sizes))):
            ok = ew.bitwise_and(ew.ge(coordinate, 0.0), ew.le(coordinate, float(size - 1)))
            inside = ok if inside is None else ew.bitwise_and(inside, ok)
            term = ew.mul(to_dtype(_clip(coordinate, size), dtypes.int64), stride)
            flat_index = term if flat_index is None else ew.add(flat_index, term)
            stride *= size
        count = math.prod(self.out_spatial)
        index = prims.broadcast_in_dim(
            prims.reshape(flat_index, (self.n, 1, count)), (self.n, self.c, count), (0, 1, 2)
        )
        values = prims.take_along_axis(self.flat, index, 2)
        values = prims.reshape(values, (self.n, self.c, *self.out_spatial))
        mask = prims.reshape(inside, (self.n, 1, *self.out_spatial))
        return ew.where(mask, values, 0.0)


def _grid_sample(
    a: TensorProxy, grid: TensorProxy, mode: int, padding_mode: int, align_corners: bool
) -> TensorProxy:
    spatial = a.ndim - 2
    if (
        spatial not in (2, 3)
        or grid.ndim != a.ndim
        or grid.shape[-1] != spatial
        or grid.shape[0] != a.shape[0]
    ):
        raise RuntimeError(
            f"grid_sampler(): expected a {spatial + 2}-D input and a grid of shape (N, ..., {spatial}), got {list(a.shape)} and {list(grid.shape)}"
        )
    if mode == 2 and spatial != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if grid.dtype is not a.dtype:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have same dtype as input, got {grid.dtype} and {a.dtype}"
        )
    out_spatial = grid.shape[1:-1]
    compute = computation_dtype(a.dtype)
    x = to_dtype(a, compute)
    g = to_dtype(grid, compute)
    gather = _Gather(x, out_spatial)
    # grid's last dim is (x, y[, z]): x indexes the last input dim
    coordinates = [
        _unnormalize(
            prims.reshape(select_positions(g, g.ndim - 1, [spatial - 1 - d]), g.shape[:-1]),
            size,
            align_corners,
        )
        for d, size in enumerate(a.shape[2:])
    ]
    if mode == 2:
        result = _bicubic_sample(gather, coordinates, a.shape[2:], padding_mode, align_corners)
    else:
        coordinates = [
            _pad_coordinates(c, size, padding_mode, align_corners)
            for c, size in zip(coordinates, a.shape[2:])
        ]
        if mode == 1:
            result = gather([ew.round(c) for c in coordinates])
        else:
            result = _linear_sample(gather, coordinates)
    return to_dtype(result, a.dtype)


def _linear_sample(gather: _Gather, coordinates: list[TensorProxy]) -> TensorProxy:
    lows = [ew.floor(c) for c in coordinates]
    fractions = [ew.sub(c, low) for c, low in zip(coordinates, lows)]
    result: Any = None
    for corner in itertools.product((0, 1), repeat=len(coordinates)):
        weight: Any = None
        for high, fraction in zip(corner, fractions):
            factor = fraction if high else ew.sub(1.0, fraction)
            weight = factor if weight is None else ew.mul(weight, factor)
        values = gather([ew.add(low, float(high)) for low, high in zip(lows, corner)])
        term = ew.mul(values, shape.unsqueeze(weight, 1))
        result = term if result is None else ew.add(result, term)
    return result


def _bicubic_sample(gather: _Gather, coordinates: list[TensorProxy], sizes: Sequence[int], padding_mode: int,
                    align_corners: bool) -> TensorProxy:  # fmt: skip
    lows = [ew.floor(c) for c in coordinates]
    coefficients = [_cubic_coefficients_proxy(ew.sub(c, low)) for c, low in zip(coordinates, lows)]
    result: Any = None
    for taps in itertools.product(range(4), repeat=2):
        positions = [
            _pad_coordinates(ew.add(low, float(tap - 1)), size, padding_mode, align_corners)
            for low, tap, size in zip(lows, taps, sizes)
        ]
        weight = ew.mul(coefficients[0][taps[0]], coefficients[1][taps[1]])
        term = ew.mul(gather(positions), shape.unsqueeze(weight, 1))
        result = term if result is None else ew.add(result, term)
    return result


def _cubic_coefficients_proxy(t: TensorProxy) -> list[TensorProxy]:
    a = -0.75

    def near(s: TensorProxy) -> TensorProxy:
        return ew.add(ew.mul(ew.mul(ew.sub(ew.mul(s, a + 2), a + 3), s), s), 1.0)

    def far(s: TensorProxy) -> TensorProxy:
        return ew.sub(ew.mul(ew.add(ew.mul(ew.sub(ew.mul(s, a), 5 * a), s), 8 * a), s), 4 * a)

    return [far(ew.add(t, 1.0)), near(t), near(ew.sub(1.0, t)), far(ew.sub(2.0, t))]


@torchsymbol(F.grid_sample)
def grid_sample(input: TensorProxy, grid: TensorProxy, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> TensorProxy:  # fmt: skip
    if mode not in _MODES:
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in _PADDINGS:
        raise ValueError(
            f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '{padding_mode}'"
        )
    return _grid_sample(input, grid, _MODES[mode], _PADDINGS[padding_mode], bool(align_corners))


@torchsymbol(torch.grid_sampler_2d)
def grid_sampler_2d(input: TensorProxy, grid: TensorProxy, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> TensorProxy:  # fmt: skip
    if input.ndim != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, got {input.ndim}D")
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners)


@torchsymbol(torch.grid_sampler_3d)
def grid_sampler_3d(input: TensorProxy, grid: TensorProxy, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> TensorProxy:  # fmt: skip
    if input.ndim != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, got {input.ndim}D")
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners)


@torchsymbol(F.fold)
def col2im(input: TensorProxy, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> TensorProxy:  # fmt: skip
    """The inverse layout of ``F.unfold``, summing overlaps: each kernel offset's block is spread
    to its strided output positions with ``prims.pad`` (interior padding), and the blocks are added."""
    if input.ndim not in (2, 3):
        raise NotImplementedError(
            f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got {input.ndim}D)"
        )
    batched = input if input.ndim == 3 else prims.reshape(input, (1, *input.shape))
    sizes, kernel = per_dim(output_size, 2, "output_size"), per_dim(kernel_size, 2, "kernel_size")
    dilations, paddings = per_dim(dilation, 2, "dilation"), per_dim(padding, 2, "padding")
    strides = per_dim(stride, 2, "stride")
    if min(kernel) <= 0 or min(dilations) <= 0 or min(strides) <= 0 or min(paddings) < 0:
        raise RuntimeError("fold: kernel_size, dilation and stride must be positive and padding non-negative")
    blocks = [
        (s + 2 * p - d * (k - 1) - 1) // st + 1
        for s, p, d, k, st in zip(sizes, paddings, dilations, kernel, strides)
    ]
    n, rows, length = batched.shape
    offsets = math.prod(kernel)
    if rows % offsets or min(blocks) < 1 or length != math.prod(blocks):
        raise RuntimeError(
            f"fold: expected an input of shape (N, C * {offsets}, {math.prod(blocks)}) for output_size {sizes}, got {list(input.shape)}"
        )
    channels = rows // offsets
    split = prims.reshape(batched, (n, channels, kernel[0], kernel[1], blocks[0], blocks[1]))
    padded_sizes = [s + 2 * p for s, p in zip(sizes, paddings)]
    total: Any = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            block = prims.reshape(
                narrow(narrow(split, 2, i, 1), 3, j, 1), (n, channels, blocks[0], blocks[1])
            )
            config = [(0, 0, 0), (0, 0, 0)]
            for offset, d, st, b, size in zip((i, j), dilations, strides, blocks, padded_sizes):
                low = offset * d
                config.append((low, size - low - (b - 1) * st - 1, st - 1))
            placed = prims.pad(block, 0.0 if input.dtype.is_floating_point else 0, config)
            total = placed if total is None else ew.add(total, placed)
    result = narrow(narrow(total, 2, paddings[0], sizes[0]), 3, paddings[1], sizes[1])
    return result if input.ndim == 3 else prims.reshape(result, result.shape[1:])
