"""Window functions, ``torch.signal.windows``: a linspace and elementwise math, as PyTorch writes them.

Each follows PyTorch's own definition (``torch/signal/windows/windows.py``) step by step with thunder
symbols, so the values round as eager's do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch import elementwise as ew
from thunder.torch import reductions
from thunder.torch.creation import _device, linspace
from thunder.torch.registry import torchsymbol
from thunder.torch.special import i0


def _checks(name: str, M: int, dtype: Any, layout: Any) -> dtypes.dtype:  # noqa: N803 -- torch's names
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not torch.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtypes.to_dtype(dtype)


def _constant(M: int, value: float, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    """The window of length 0 or 1 (empty, or a single ``value``); the callers check that ``M <= 1``."""
    assert M <= 1, M
    return prims.full((M,), value, device=_device(device), dtype=dtype)


def _window(name: str, body: Callable[..., TensorProxy]) -> Symbol:
    def window(M: int, *args: Any, sym: bool = True, dtype: Any = None, layout: Any = torch.strided,  # noqa: N803
               device: Any = None, requires_grad: bool = False, **kwargs: Any) -> TensorProxy:  # fmt: skip
        dtype_ = _checks(name, M, dtype, layout)
        return body(M, *args, sym=sym, dtype=dtype_, device=device, **kwargs)

    window.__name__ = window.__qualname__ = f"window_{name}"
    return torchsymbol(getattr(torch.signal.windows, name))(window)


def _linspace(start: Any, end: Any, M: int, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    return linspace(start, end, M, dtype=dtype, device=device)


def _exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool, dtype: dtypes.dtype,  # noqa: N803
                 device: Any) -> TensorProxy:  # fmt: skip
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _constant(0, 0.0, dtype, device)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _linspace(-center * constant, (-center + (M - 1)) * constant, M, dtype, device)
    return ew.exp(ew.neg(ew.abs(k)))


def _cosine(M: int, *, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    if M == 0:
        return _constant(0, 0.0, dtype, device)
    start = 0.5
    constant = torch.pi / (M + 1 if not sym and M > 1 else M)
    return ew.sin(_linspace(start * constant, (start + (M - 1)) * constant, M, dtype, device))


def _gaussian(M: int, *, std: float = 1.0, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _constant(0, 0.0, dtype, device)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _linspace(start * constant, (start + (M - 1)) * constant, M, dtype, device)
    return ew.exp(ew.neg(ew.pow(k, 2)))


def _kaiser(M: int, *, beta: float = 12.0, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _constant(M, 1.0, dtype, device)
    beta_ = prims.full((), float(beta), device=_device(device), dtype=dtype)
    start = ew.neg(beta_)
    constant = ew.true_divide(ew.mul(2.0, beta_), M if not sym else M - 1)
    end = ew.minimum(beta_, ew.add(start, ew.mul(M - 1, constant)))
    k = _linspace(start, end, M, dtype, device)
    return ew.true_divide(i0(ew.sqrt(ew.sub(ew.mul(beta_, beta_), ew.pow(k, 2)))), i0(beta_))


def _bartlett(M: int, *, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    if M <= 1:
        return _constant(M, 1.0, dtype, device)
    start = -1
    constant = 2 / (M if not sym else M - 1)
    return ew.sub(1, ew.abs(_linspace(start, start + (M - 1) * constant, M, dtype, device)))


def _general_cosine(M: int, *, a: Iterable, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
    if M <= 1:
        return _constant(M, 1.0, dtype, device)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * torch.pi / (M if not sym else M - 1)
    k = _linspace(0, (M - 1) * constant, M, dtype, device)
    coefficients = [(-1) ** i * w for i, w in enumerate(a)]
    a_i = prims.tensor_from_sequence(coefficients, device=_device(device), dtype=dtype)
    i = prims.iota(len(coefficients), start=0, step=1, device=_device(device), dtype=dtype)
    n = len(coefficients)
    angles = ew.mul(prims.reshape(i, (n, 1)), prims.reshape(k, (1, M)))
    return reductions.sum(ew.mul(prims.reshape(a_i, (n, 1)), ew.cos(angles)), 0)


def _general_hamming(
    M: int, *, alpha: float = 0.54, sym: bool, dtype: dtypes.dtype, device: Any
) -> TensorProxy:  # noqa: N803
    return _general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device)


def _fixed_cosine(coefficients: list[float]) -> Callable[..., TensorProxy]:
    def body(M: int, *, sym: bool, dtype: dtypes.dtype, device: Any) -> TensorProxy:  # noqa: N803
        return _general_cosine(M, a=coefficients, sym=sym, dtype=dtype, device=device)

    return body


window_exponential = _window("exponential", _exponential)
window_cosine = _window("cosine", _cosine)
window_gaussian = _window("gaussian", _gaussian)
window_kaiser = _window("kaiser", _kaiser)
window_bartlett = _window("bartlett", _bartlett)
window_general_cosine = _window("general_cosine", _general_cosine)
window_general_hamming = _window("general_hamming", _general_hamming)
window_hamming = _window("hamming", _general_hamming)
window_hann = _window("hann", _fixed_cosine([0.5, 0.5]))
window_blackman = _window("blackman", _fixed_cosine([0.42, 0.5, 0.08]))
window_nuttall = _window("nuttall", _fixed_cosine([0.3635819, 0.4891775, 0.1365995, 0.0106411]))
