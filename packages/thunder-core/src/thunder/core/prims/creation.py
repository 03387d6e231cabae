"""Creation prims: iota, random draws, tensors from Python data, device transfers."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number
from typing import Any

from thunder.core import devices, dtypes
from thunder.core.gradients import register_vjp
from thunder.core.prims.core import RANDOM, _check, _zero_gradient
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_prim


def _iota_meta(length: int, *, start: Number, step: Number, device: Any, dtype: Any) -> TensorProxy:
    """``start + step * arange(length)`` in ``dtype``."""
    _check(length >= 0, lambda: f"prims.iota: negative length {length}")
    return TensorProxy(shape=(length,), dtype=dtype, device=devices.to_device(device))


iota = make_prim("iota", _iota_meta)


# Random prims take the ``torch.Generator`` to draw from (None: the device's default generator). They
# are tagged ``random``: no transform merges, drops, reorders or recomputes them (docs/random.md).
def _normal_meta(
    shape: Sequence[int], mean: float, std: float, *, device: Any, dtype: Any, generator: Any = None
) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


normal = make_prim("normal", _normal_meta, tags=RANDOM)


def _randint_meta(
    shape: Sequence[int], low: int, high: int, *, device: Any, dtype: Any, generator: Any = None
) -> TensorProxy:
    _check(
        low < high, lambda: f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
    )
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


randint = make_prim("randint", _randint_meta, tags=RANDOM)


def _randperm_meta(n: int, *, device: Any, dtype: Any, generator: Any = None) -> TensorProxy:
    _check(n >= 0, lambda: f"randperm: n must be non-negative, got {n}")
    return TensorProxy(shape=(n,), dtype=dtype, device=devices.to_device(device))


randperm = make_prim("randperm", _randperm_meta, tags=RANDOM)


def _multinomial_meta(
    a: TensorProxy, num_samples: int, replacement: bool, *, generator: Any = None
) -> TensorProxy:
    """Indices of ``num_samples`` draws from each row of probabilities ``a`` (1-d or 2-d)."""
    _check(a.ndim in (1, 2), lambda: f"prob_dist must be 1 or 2 dim, got {a.ndim}")
    _check(num_samples > 0, lambda: "cannot sample n_sample <= 0 samples")
    _check(
        replacement or num_samples <= a.shape[-1],
        lambda: "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
    )
    return TensorProxy(shape=(*a.shape[:-1], num_samples), dtype=dtypes.int64, device=a.device)


multinomial = make_prim("multinomial", _multinomial_meta, tags=RANDOM)


def _manual_seed_meta(seed: int, *, generator: Any = None) -> None:
    """Reseeds ``generator``, or every device's default generator when None (``torch.manual_seed``)."""
    return None


# ordered among the random prims like them; kept although it has no output
manual_seed = make_prim("manual_seed", _manual_seed_meta, tags=RANDOM | {"side_effect"})


def _tensor_from_sequence_meta(data: Any, *, device: Any, dtype: Any) -> TensorProxy:
    """A tensor holding ``data``, nested lists of Python numbers (a constant of the program)."""
    import torch

    shape = torch.tensor(data, dtype=dtypes.to_dtype(dtype).torch_dtype, device="meta").shape
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


tensor_from_sequence = make_prim("tensor_from_sequence", _tensor_from_sequence_meta)
register_vjp(iota, normal, randint, randperm, multinomial, tensor_from_sequence)(_zero_gradient)


def _device_put_meta(a: TensorProxy, device: Any) -> TensorProxy:
    return a.replace(device=devices.to_device(device))


device_put = make_prim("device_put", _device_put_meta)
register_vjp(device_put)(lambda g, a, device, *, out: (None if g is None else device_put(g, a.device), None))
