"""Random numbers: the random factories, ``native_dropout``, and seeding (``torch.manual_seed``).

The contract (docs/random.md): every random symbol is tagged ``random`` and runs, in program order,
as the PyTorch call it stands for, so that a program run by the torch executor draws exactly the
numbers eager PyTorch draws from the same generator state. No transform merges, drops, reorders or
recomputes a random symbol. ``torch.manual_seed(s)`` and ``g.manual_seed(s)`` are recorded as
``prims.manual_seed`` and run when the trace runs (every call), never while tracing. A
``generator=`` argument is passed through to the prims and to PyTorch: the trace draws from that
generator at run time, advancing it.

Random symbols whose outputs carry no gradient have a zero gradient rule, which keeps them whole in
a forward trace (their decomposition would draw differently from eager's kernel). ``F.dropout``
goes through ``native_dropout``, which returns the mask it drew: the backward multiplies by that
mask and never draws again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.gradients import register_vjp
from thunder.core.prims.core import _zero_gradient
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch.creation import READS_METADATA, _device, _dtype, _like
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import int_list

__all__ = [
    "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "normal", "bernoulli",
    "multinomial", "native_dropout", "dropout_backward", "manual_seed", "random_lookaside",
]  # fmt: skip

RANDOM = frozenset({"random"})


@torchsymbol(torch.rand, tags=RANDOM, sizes="size")
def rand(size: Sequence[int], *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
         pin_memory: bool = False, generator: Any = None, out: Any = None) -> TensorProxy:  # fmt: skip
    shape = int_list("rand", "size", size)
    return prims.uniform(shape, 0.0, 1.0, device=_device(device), dtype=_dtype(dtype), generator=generator)


@torchsymbol(torch.randn, tags=RANDOM, sizes="size")
def randn(size: Sequence[int], *, dtype: Any = None, device: Any = None, layout: Any = None, requires_grad: bool = False,
          pin_memory: bool = False, generator: Any = None, out: Any = None) -> TensorProxy:  # fmt: skip
    shape = int_list("randn", "size", size)
    return prims.normal(shape, 0.0, 1.0, device=_device(device), dtype=_dtype(dtype), generator=generator)


@torchsymbol(torch.rand_like, tags=RANDOM | READS_METADATA)
def rand_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, generator: Any = None,
              **unused: Any) -> TensorProxy:  # fmt: skip
    dtype_, device_ = _like(a, dtype, device)
    return prims.uniform(a.shape, 0.0, 1.0, device=device_, dtype=dtype_, generator=generator)


@torchsymbol(torch.randn_like, tags=RANDOM | READS_METADATA)
def randn_like(a: TensorProxy, *, dtype: Any = None, device: Any = None, generator: Any = None,
               **unused: Any) -> TensorProxy:  # fmt: skip
    dtype_, device_ = _like(a, dtype, device)
    return prims.normal(a.shape, 0.0, 1.0, device=device_, dtype=dtype_, generator=generator)


@torchsymbol(torch.randint, tags=RANDOM)
def randint(*args: Any, low: Any = None, high: Any = None, size: Any = None, dtype: Any = None,
            device: Any = None, layout: Any = None, requires_grad: bool = False, pin_memory: bool = False,
            generator: Any = None, out: Any = None) -> TensorProxy:  # fmt: skip
    """``randint(high, size)`` or ``randint(low, high, size)``, each argument positional or by name."""
    given = {"low": low, "high": high, "size": size}
    three = len(args) + sum(v is not None for v in given.values()) == 3
    names = ("low", "high", "size") if three else ("high", "size")
    bounds = dict(zip(names, args))
    for name, value in given.items():
        if value is not None:
            if name in bounds or name not in names:
                raise TypeError(f"randint() got an unexpected or repeated argument '{name}'")
            bounds[name] = value
    if len(args) > len(names) or set(bounds) != set(names):
        raise TypeError("randint() takes (high, size) or (low, high, size)")
    dtype_ = dtypes.to_dtype(dtype) if dtype is not None else dtypes.int64
    shape = int_list("randint", "size", bounds["size"])
    return prims.randint(
        shape, bounds.get("low", 0), bounds["high"], device=_device(device), dtype=dtype_, generator=generator
    )


@torchsymbol(torch.randint_like, tags=RANDOM | READS_METADATA)
def randint_like(a: TensorProxy, low: int, high: int | None = None, *, dtype: Any = None, device: Any = None,
                 generator: Any = None, **unused: Any) -> TensorProxy:  # fmt: skip
    low, high = (0, low) if high is None else (low, high)
    dtype_, device_ = _like(a, dtype, device)
    return prims.randint(a.shape, low, high, device=device_, dtype=dtype_, generator=generator)


@torchsymbol(torch.randperm, tags=RANDOM)
def randperm(n: int, *, generator: Any = None, out: Any = None, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> TensorProxy:  # fmt: skip
    dtype_ = dtypes.to_dtype(dtype) if dtype is not None else dtypes.int64
    return prims.randperm(n, device=_device(device), dtype=dtype_, generator=generator)


@torchsymbol(torch.normal, tags=RANDOM)
def normal(mean: Any = 0.0, std: Any = 1.0, size: Sequence[int] | None = None, *, generator: Any = None,
           dtype: Any = None, device: Any = None, **unused: Any) -> TensorProxy:  # fmt: skip
    """Eager draws standard normals, then scales by ``std`` and shifts by ``mean``: so does this."""
    from thunder.core.promotion import broadcast_shapes
    from thunder.torch.elementwise import add, mul

    tensors = [x for x in (mean, std) if isinstance(x, TensorProxy)]
    if size is not None:
        shape, dtype_, device_ = tuple(size), _dtype(dtype), _device(device)
    elif tensors:
        shape = broadcast_shapes(*(t.shape for t in tensors))
        dtype_, device_ = tensors[0].dtype, tensors[0].device
    else:
        raise RuntimeError("normal() needs a size when mean and std are numbers")
    noise = prims.normal(shape, 0.0, 1.0, device=device_, dtype=dtype_, generator=generator)
    return add(mul(noise, std), mean)


@torchsymbol(torch.bernoulli, torch.Tensor.bernoulli, method="bernoulli", tags=RANDOM)
def bernoulli(a: TensorProxy, p: Any = None, *, generator: Any = None) -> TensorProxy:
    probability = a if p is None else p
    draws = prims.uniform(a.shape, 0.0, 1.0, device=a.device, dtype=dtypes.float64, generator=generator)
    if isinstance(probability, TensorProxy):
        probability = prims.convert_element_type(probability, dtypes.float64)
    return prims.convert_element_type(prims.lt(draws, probability), a.dtype)


@torchsymbol(torch.multinomial, torch.Tensor.multinomial, method="multinomial", tags=RANDOM)
def multinomial(a: TensorProxy, num_samples: int, replacement: bool = False, *, generator: Any = None,
                out: Any = None) -> TensorProxy:  # fmt: skip
    return prims.multinomial(a, num_samples, replacement, generator=generator)


# PyTorch's gradient of these is zero (torch.normal's too, w.r.t. mean and std): a rule keeps each
# whole in a forward trace, where PyTorch runs it as eager does, instead of its decomposition.
register_vjp(rand_like, randn_like, randint_like, normal, bernoulli, multinomial)(_zero_gradient)


@torchsymbol(torch.native_dropout, tags=RANDOM)
def native_dropout(a: TensorProxy, p: float, train: bool | None) -> tuple[TensorProxy, TensorProxy]:
    """The output and the boolean mask of kept elements, as ``torch.native_dropout``."""
    if train is False:
        return a, prims.full(a.shape, True, device=a.device, dtype=dtypes.bool8)
    keep = prims.lt(prims.uniform(a.shape, 0.0, 1.0, device=a.device, dtype=dtypes.float32), 1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return prims.mul(prims.mul(a, prims.convert_element_type(keep, a.dtype)), scale), keep


@register_vjp(native_dropout)
def _native_dropout_vjp(g: Any, a: TensorProxy, p: float, train: bool | None, *, out: Any) -> tuple:
    """The mask drawn by the forward, never a new one (eager's native_dropout_backward)."""
    grad = g[0] if isinstance(g, (tuple, list)) else g
    if grad is None:
        return None, None, None
    if train is False:
        return grad, None, None
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return dropout_backward(grad, out[1], scale), None, None


def _dropout_backward(g: TensorProxy, mask: TensorProxy, scale: float) -> TensorProxy:
    """``g`` where the forward kept an element, times ``scale``: eager's native_dropout_backward."""
    return prims.mul(prims.mul(g, prims.convert_element_type(mask, g.dtype)), scale)


# One symbol, so that the torch executor runs PyTorch's kernel (one instead of three)
dropout_backward = make_composite("dropout_backward", _dropout_backward, tags=frozenset({"elementwise"}))


# ---------------------------------------------------------------------------------------------
# Seeding: recorded, run by the trace on every call


def manual_seed(seed: Any) -> torch.Generator:
    """``torch.manual_seed(seed)``: every device's default generator is reseeded when the trace runs."""
    prims.manual_seed(int(seed))
    return torch.default_generator


def _generator_manual_seed(generator: torch.Generator) -> Callable[[Any], torch.Generator]:
    def seed(value: Any) -> torch.Generator:
        prims.manual_seed(int(value), generator=generator)
        return generator

    return seed


def _unwrapped(fn: Any) -> Any:
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


_TORCH_MANUAL_SEED = _unwrapped(torch.manual_seed)


def random_lookaside(fn: Any) -> Callable | None:
    """What the frontend calls instead of a seeding function (``torch.manual_seed``, ``g.manual_seed``)."""
    if getattr(fn, "__name__", None) != "manual_seed":
        return None
    if isinstance(getattr(fn, "__self__", None), torch.Generator):
        return _generator_manual_seed(fn.__self__)
    # importing torch._dynamo rebinds torch.manual_seed to a wrapper of the same function
    return manual_seed if _unwrapped(fn) is _TORCH_MANUAL_SEED else None
