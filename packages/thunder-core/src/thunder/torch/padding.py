"""``F.pad``: constant padding through ``prims.pad``; reflect, replicate and circular padding as a
gather of each padded dim's source positions (slices where they are contiguous)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.torch.nn_common import narrow, select_positions
from thunder.torch.registry import torchsymbol


def _pairs(a: TensorProxy, pad: Sequence[int]) -> list[tuple[int, int]]:
    """(low, high) per dim of ``a``, from F.pad's last-dim-first flat list."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > a.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension")
    pairs = [(0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        pairs[a.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return pairs


def _constant(a: TensorProxy, pairs: list[tuple[int, int]], value: Any) -> TensorProxy:
    for d, (low, high) in enumerate(pairs):
        if a.shape[d] + low + high < 0:
            raise RuntimeError(
                f"The input size {a.shape[d]}, plus negative padding {low} and {high} resulted in a negative output size"
            )
    if value is None:
        value = 0
    fill = float(value) if a.dtype.is_floating_point else complex(value) if a.dtype.is_complex else int(value)
    if any(low > 0 or high > 0 for low, high in pairs):
        a = prims.pad(a, fill, [(max(low, 0), max(high, 0), 0) for low, high in pairs])
    for d, (low, high) in enumerate(pairs):
        if low < 0 or high < 0:
            start = -min(low, 0)
            a = narrow(a, d, start, a.shape[d] - start + min(high, 0))
    return a


def _reflect(i: int, n: int) -> int:
    period = 2 * (n - 1)
    i = abs(i) % period if period else 0
    return period - i if i >= n else i


_SOURCES: dict[str, Callable[[int, int], int]] = {
    "reflect": _reflect,
    "replicate": lambda i, n: min(max(i, 0), n - 1),
}


def _check_mode(mode: str, a: TensorProxy, pairs: list[tuple[int, int]], padded_dims: int) -> None:
    if padded_dims > 3 or a.ndim not in (padded_dims + 1, padded_dims + 2):
        raise NotImplementedError(
            f"Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now (got a {a.ndim}-d input and {padded_dims} padded dims)"
        )
    for d in range(a.ndim - padded_dims, a.ndim):
        low, high = pairs[d]
        n = a.shape[d]
        if mode == "reflect" and (low >= n or high >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({low}, {high}) at dimension {d} of input {list(a.shape)}"
            )
        if mode == "circular" and (low > n or high > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + low + high < 0 or (n == 0 and (low or high)):
            raise RuntimeError(
                f"input tensor with shape {list(a.shape)} cannot be padded by {(low, high)} in dim {d}"
            )
    if any(a.shape[d] == 0 for d in range(1, a.ndim)):
        raise RuntimeError(
            f"Expected {a.ndim}D tensor with possibly 0 batch size and other non-zero dimensions for input, but got: {list(a.shape)}"
        )


@torchsymbol(F.pad)
def pad(
    input: TensorProxy, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> TensorProxy:
    pairs = _pairs(input, pad)
    if mode == "constant":
        return _constant(input, pairs, value)
    if mode not in (*_SOURCES, "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    _check_mode(mode, input, pairs, len(pad) // 2)
    source = _SOURCES.get(mode)
    for d, (low, high) in enumerate(pairs):
        if low == 0 and high == 0:
            continue
        n = input.shape[d]
        if mode == "circular":  # eager crops first, then wraps around what is left
            start, kept = -min(low, 0), n + min(low, 0) + min(high, 0)
            positions = [start + (i - max(low, 0)) % kept for i in range(n + low + high)]
        else:
            assert source is not None
            positions = [source(i - low, n) for i in range(n + low + high)]
        input = select_positions(input, d, positions)
    return input


@torchsymbol(torch.constant_pad_nd)
def constant_pad_nd(input: TensorProxy, pad: Sequence[int], value: float = 0) -> TensorProxy:
    return _constant(input, _pairs(input, pad), value)
