"""Channel-wise and alpha dropout, drawing their masks from ``prims.uniform`` (``F.dropout`` itself is
in ``nn.py``). A channel mask has the input's batch and channel sizes and size 1 elsewhere."""

from __future__ import annotations

import math

import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch.nn import no_inplace
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import to_dtype

# selu's negative saturation value: alpha dropout drops units to it, keeping mean and variance
_ALPHA_PRIME = -1.7580993408473766


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(a: TensorProxy, mask_shape: tuple[int, ...], p: float) -> TensorProxy:
    random = prims.uniform(mask_shape, 0.0, 1.0, device=a.device, dtype=dtypes.float32)
    keep = prims.lt(random, 1.0 - p)
    return to_dtype(keep, a.dtype)


def _channel_shape(a: TensorProxy, batched_ndim: int) -> tuple[int, ...]:
    """(N, C, 1, ...) for a batched input, (C, 1, ...) for an unbatched one."""
    leading = 2 if a.ndim == batched_ndim else 1
    return a.shape[:leading] + (1,) * (a.ndim - leading)


def _feature_dropout(
    name: str, a: TensorProxy, p: float, training: bool, inplace: bool, batched_ndim: int
) -> TensorProxy:
    no_inplace(name, inplace)
    _check_p(p)
    if a.ndim not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(
            f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a {a.ndim}D input"
        )
    if not training or p == 0.0:
        return a
    if p == 1.0:
        return ew.mul(a, 0.0)
    keep = _keep_mask(a, _channel_shape(a, batched_ndim), p)
    return ew.mul(ew.mul(a, keep), 1.0 / (1.0 - p))


@torchsymbol(F.dropout1d)
def dropout1d(a: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> TensorProxy:
    return _feature_dropout("dropout1d", a, p, training, inplace, 3)


@torchsymbol(F.dropout2d)
def dropout2d(a: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> TensorProxy:
    # eager treats a 3-d input as batched 1-d channels (N, C, L), with a warning
    return _feature_dropout("dropout2d", a, p, training, inplace, 3 if a.ndim == 3 else 4)


@torchsymbol(F.dropout3d)
def dropout3d(a: TensorProxy, p: float = 0.5, training: bool = True, inplace: bool = False) -> TensorProxy:
    return _feature_dropout("dropout3d", a, p, training, inplace, 5)


def _alpha(a: TensorProxy, p: float, training: bool, mask_shape: tuple[int, ...]) -> TensorProxy:
    _check_p(p)
    if not training or p == 0.0:
        return a
    if p == 1.0:
        return ew.mul(a, 0.0)
    keep = _keep_mask(a, mask_shape, p)
    scale = 1.0 / math.sqrt((1.0 - p) * (1.0 + p * _ALPHA_PRIME**2))
    shift = -scale * _ALPHA_PRIME * p
    dropped = ew.add(ew.mul(a, keep), ew.mul(ew.sub(1.0, keep), _ALPHA_PRIME))
    return ew.add(ew.mul(dropped, scale), shift)


@torchsymbol(F.alpha_dropout)
def alpha_dropout(
    a: TensorProxy, p: float = 0.5, training: bool = False, inplace: bool = False
) -> TensorProxy:
    no_inplace("alpha_dropout", inplace)
    return _alpha(a, p, training, a.shape)


@torchsymbol(F.feature_alpha_dropout)
def feature_alpha_dropout(
    a: TensorProxy, p: float = 0.5, training: bool = False, inplace: bool = False
) -> TensorProxy:
    no_inplace("feature_alpha_dropout", inplace)
    if a.ndim < 2 and training and p != 0.0:  # eager checks the dims only when it drops
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _alpha(a, p, training, a.shape[:2] + (1,) * (a.ndim - 2))
