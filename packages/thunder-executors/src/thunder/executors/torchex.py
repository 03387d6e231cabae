"""The torch executor: runs every torch-language symbol and every prim with PyTorch's own ops.

Torch-language symbols mirror PyTorch's signatures, so each is claimed as a call of the torch
callable it was registered for (``ltorch.linear`` runs as ``torch.nn.functional.linear``). Prims are
claimed too, so that anything another executor leaves decomposed still runs; the few whose
signature differs from PyTorch's go through small adapters defined below.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

import thunder.torch as ltorch
from thunder.core import dtypes, prims
from thunder.core.executor import OperatorExecutor, register_executor, to_torch_arguments
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import Symbol
from thunder.core.trace import get_tracectx
from thunder.executors.linear_cross_entropy import register_linear_cross_entropy
from thunder.executors.torch_distributed import register_distributed
from thunder.executors.torch_kernels import register_torch_kernels

__all__ = ["executor", "TorchExecutor"]

_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", torch.nn.functional),
    ("torch.special", torch.special),
    ("torch.Tensor", torch.Tensor),
    ("operator", operator),
)


class TorchExecutor(OperatorExecutor):
    def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return to_torch_arguments(args, kwargs)


executor = TorchExecutor("torch", version=torch.__version__)


def _printable_path(fn: Any) -> tuple[str, str] | None:
    """(module path, name) under which ``fn`` is reachable from ``import torch`` or ``import operator``."""
    name = getattr(fn, "__name__", None)
    for module, namespace in _NAMESPACES:
        if name and getattr(namespace, name, None) is fn:
            return module, name
    return None


def _operator(fn: Callable, like: Symbol) -> Symbol:
    path = _printable_path(fn)
    if path is None:
        return executor.register_operator(fn.__name__, fn=fn, like=like)
    module, name = path
    existing = executor.operators.get(f"{module}.{name}")
    if existing is not None:
        return existing
    operator_symbol = executor.register_operator(name, fn=fn, like=like, module=module)
    executor.operators[f"{module}.{name}"] = operator_symbol
    return operator_symbol


def _claim_torch_language() -> None:
    """Each torch-language symbol runs as the first torch callable it stands for."""
    # Traces do not track strides (``contiguous`` is a no-op in them), so ``view`` runs as ``reshape``:
    # a view wherever eager's ``view`` succeeds, a copy where the real input's layout needs one.
    executor.register_implementation(ltorch.view, _operator(torch.Tensor.reshape, ltorch.view))
    for torch_fn, symbol in ltorch.torch_callables().items():
        if symbol.id in executor.implementations:
            continue
        if _printable_path(torch_fn) is not None:
            executor.register_implementation(symbol, _operator(torch_fn, symbol))
    executor.register_implementation(ltorch.getitem, _operator(operator.getitem, ltorch.getitem))


# Prims whose arguments match a PyTorch function's.
_SAME_SIGNATURE: dict[Symbol, Callable] = {
    prims.copy: torch.clone,
    prims.convert_element_type: torch.Tensor.to,
    prims.full: torch.full,
    prims.reshape: torch.reshape,
    prims.transpose: torch.permute,
    prims.cat: torch.cat,
    prims.var: torch.var,
    prims.argmax: torch.argmax,
    prims.argmin: torch.argmin,
    prims.matmul: torch.matmul,
    prims.linear: torch.nn.functional.linear,
    prims.take_along_axis: torch.take_along_dim,
    prims.where: torch.where,
}


def _elementwise_prims() -> dict[Symbol, Callable]:
    table = {}
    for name in dir(prims):
        symbol = getattr(prims, name)
        if isinstance(symbol, Symbol) and "elementwise" in symbol.tags and symbol not in _SAME_SIGNATURE:
            table[symbol] = getattr(torch, symbol.name, None)
    return {s: fn for s, fn in table.items() if fn is not None}


# Adapters for the prims whose semantics or signature differ from PyTorch's.
def broadcast_in_dim(
    a: torch.Tensor, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> torch.Tensor:
    view_shape = [1] * len(shape)
    for size, dim in zip(a.shape, broadcast_dimensions):
        view_shape[dim] = size
    return a.reshape(view_shape).expand(shape)


def slice_prim(
    a: torch.Tensor, start: Sequence[int], end: Sequence[int], strides: Sequence[int]
) -> torch.Tensor:
    return a[tuple(slice(s, e, st) for s, e, st in zip(start, end, strides))]


def uniform(
    shape: Sequence[int], minval: float, maxval: float, *, device: torch.device, dtype: torch.dtype,
    generator: torch.Generator | None = None,
) -> torch.Tensor:  # fmt: skip
    return torch.empty(shape, device=device, dtype=dtype).uniform_(minval, maxval, generator=generator)


def pad(a: torch.Tensor, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> torch.Tensor:
    """Low, high and interior padding (torch's pad has no interior padding)."""
    shape = [
        low + high + size + max(size - 1, 0) * interior
        for size, (low, high, interior) in zip(a.shape, padding_config)
    ]
    result = torch.full(shape, padding_value, dtype=a.dtype, device=a.device)
    window = tuple(
        slice(low, low + max(size - 1, 0) * (interior + 1) + (size > 0), interior + 1)
        for size, (low, _, interior) in zip(a.shape, padding_config)
    )
    result[window] = a
    return result


def prod(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """The prim keeps the input's dtype (torch.prod makes bools and small integers int64)."""
    for dim in sorted(dims, reverse=True):
        a = torch.prod(a, dim, dtype=a.dtype)
    return a


def sum(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:  # noqa: A001 -- the prim's name
    """The prim keeps the input's dtype and reduces nothing for no dims (torch.sum reduces all)."""
    return torch.sum(a, tuple(dims), dtype=a.dtype) if dims else a.clone()


def amax(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    return torch.amax(a, tuple(dims)) if dims else a.clone()


def amin(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    return torch.amin(a, tuple(dims)) if dims else a.clone()


def div(a: Any, b: Any) -> Any:
    """Prim division: true division for floats, truncation for integers."""
    floating = any(
        isinstance(x, float) or (isinstance(x, torch.Tensor) and x.is_floating_point()) for x in (a, b)
    )
    return torch.true_divide(a, b) if floating else torch.div(a, b, rounding_mode="trunc")


def _binary_adapter(fn: Callable) -> Callable:
    """PyTorch's binary functions take a number only as their second argument."""

    def adapted(a: Any, b: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            a = torch.scalar_tensor(a, dtype=b.dtype, device=b.device)
        return fn(a, b)

    return adapted


_ADAPTED: dict[Symbol, Callable] = {
    prims.broadcast_in_dim: broadcast_in_dim,
    prims.slice_prim: slice_prim,
    prims.pad: pad,
    prims.uniform: uniform,
    prims.prod: prod,
    prims.sum: sum,
    prims.amax: amax,
    prims.amin: amin,
    prims.div: div,
}

_BINARY_PRIMS = frozenset(
    {"add", "sub", "mul", "pow", "remainder", "fmod", "maximum", "minimum", "atan2"}
    | {"bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge"}
)


# Where the arguments a prim is traced with make its adapter's work moot, the trace calls torch
# itself: a Python wrapper costs a frame and its checks on every call (tenths of a microsecond to a
# few on our CPU machines), which a host-bound step pays for each executed op. Each function takes
# the adapter's operator and the prim's arguments, and returns what the trace calls.
def _direct(torch_name: str, fallback: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
    """The torch operator ``torch_name`` called as the trace's op, or ``fallback()`` where its rules
    return an input as it is (a pad by nothing): the lowering would rename that input instead."""
    trace = get_tracectx()
    assert trace is not None
    with trace.subscope() as scope:
        result = executor.operators[torch_name](*args, **kwargs)
    inputs = {p.name for p in tree_leaves((args, kwargs)) if isinstance(p, Proxy)}
    if any(isinstance(p, Proxy) and p.name in inputs for p in tree_leaves(result)):
        return fallback()
    for bound_symbol in scope:
        trace.record(bound_symbol)
    return result


def _direct_binary(torch_name: str, adapter: Symbol, a: Any, b: Any) -> Any:
    """The adapter only turns a number in first place into a tensor of the other's dtype. torch's
    add, sub and mul take that number themselves and compute alike where its kind is the tensor's
    and the tensor's dtype is the precision torch computes in (half precision computes in float32
    with the number unrounded)."""
    if isinstance(a, TensorProxy) or (torch_name in _TAKE_NUMBER_FIRST and _exact_with(a, b)):
        return _direct(torch_name, lambda: adapter(a, b), a, b)
    return adapter(a, b)


_TAKE_NUMBER_FIRST = frozenset({"torch.add", "torch.sub", "torch.mul"})


def _exact_with(number: Any, b: Any) -> bool:
    if not isinstance(b, TensorProxy):
        return False
    if type(number) is float:
        return b.dtype in (dtypes.float32, dtypes.float64)
    return type(number) is int and dtypes.is_integer(b.dtype)


def _direct_reduction(torch_name: str, keeps_dtype: Callable[[Any], bool], adapter: Symbol, a: Any,
                      dims: Sequence[int]) -> Any:  # fmt: skip
    """The adapter copies for no dims, and keeps a sum's integer dtype (torch's sum promotes it)."""
    if isinstance(a, TensorProxy) and dims and keeps_dtype(a.dtype):
        return _direct(torch_name, lambda: adapter(a, dims), a, tuple(dims))
    return adapter(a, dims)


def _inexact(dtype: Any) -> bool:
    return dtypes.is_float(dtype) or dtypes.is_complex(dtype)


def _direct_div(adapter: Symbol, a: Any, b: Any) -> Any:
    """True division where ``div`` decides for it at run time (a float number or float tensor)."""
    floating = any(
        isinstance(x, float) or (isinstance(x, TensorProxy) and dtypes.is_float(x.dtype)) for x in (a, b)
    )
    if floating and isinstance(a, TensorProxy):
        return _direct("torch.true_divide", lambda: adapter(a, b), a, b)
    return adapter(a, b)


def _direct_broadcast_in_dim(
    adapter: Symbol, a: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> Any:
    """``broadcast_in_dim``'s reshape and expand, each only where it changes the shape."""
    if not isinstance(a, TensorProxy):
        return adapter(a, shape, broadcast_dimensions)
    view_shape = [1] * len(shape)
    for size, dim in zip(a.shape, broadcast_dimensions):
        view_shape[dim] = size
    fallback = functools.partial(adapter, a, shape, broadcast_dimensions)
    if tuple(view_shape) == tuple(shape):  # nothing to expand
        return _direct("torch.reshape", fallback, a, tuple(shape))
    if tuple(broadcast_dimensions) != tuple(range(len(shape) - len(a.shape), len(shape))):
        a = _direct("torch.reshape", fallback, a, tuple(view_shape))  # else expand adds the leading dims
    return _direct("torch.Tensor.expand", fallback, a, tuple(shape))


def _direct_slice(
    adapter: Symbol, a: Any, start: Sequence[int], end: Sequence[int], strides: Sequence[int]
) -> Any:
    """A slice of one dimension with unit stride (rotary embeddings' halves) is ``torch.narrow``."""
    if isinstance(a, TensorProxy) and all(stride == 1 for stride in strides):
        sliced = [dim for dim, (s, e, size) in enumerate(zip(start, end, a.shape)) if (s, e) != (0, size)]
        if len(sliced) == 1:
            dim = sliced[0]
            fallback = functools.partial(adapter, a, start, end, strides)
            return _direct("torch.narrow", fallback, a, dim, start[dim], end[dim] - start[dim])
    return adapter(a, start, end, strides)


def _direct_pad(
    adapter: Symbol, a: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]
) -> Any:
    """Padding without interior or negative padding (the gradient of a slice) is torch's constant pad,
    which takes the low and high padding of the last dimension first."""
    if (
        isinstance(a, TensorProxy) and dtypes.is_float(a.dtype) and isinstance(padding_value, (int, float))
        and all(interior == 0 and low >= 0 and high >= 0 for low, high, interior in padding_config)
    ):  # fmt: skip
        config = list(padding_config)
        while len(config) > 1 and config[0][:2] == (0, 0):  # leading dims without padding need no entry
            config.pop(0)
        flat = [amount for low, high, _ in reversed(config) for amount in (low, high)]
        fallback = functools.partial(adapter, a, padding_value, padding_config)
        return _direct("torch.nn.functional.pad", fallback, a, flat, value=float(padding_value))
    return adapter(a, padding_value, padding_config)


_DIRECT: dict[Symbol, Callable] = {
    prims.slice_prim: _direct_slice,
    prims.pad: _direct_pad,
    prims.sum: functools.partial(_direct_reduction, "torch.sum", _inexact),
    prims.amax: functools.partial(_direct_reduction, "torch.amax", lambda dtype: True),
    prims.amin: functools.partial(_direct_reduction, "torch.amin", lambda dtype: True),
    prims.div: _direct_div,
    prims.broadcast_in_dim: _direct_broadcast_in_dim,
}


def _claim_prims() -> None:
    for symbol, fn in {**_elementwise_prims(), **_SAME_SIGNATURE}.items():
        if symbol.id in executor.implementations:
            continue
        if symbol.name not in _BINARY_PRIMS:
            executor.register_implementation(symbol, _operator(fn, symbol))
            continue
        adapted = _binary_adapter(fn)
        adapted.__name__ = adapted.__qualname__ = f"prim_{symbol.name}"
        globals()[adapted.__name__] = adapted
        direct = functools.partial(_direct_binary, f"torch.{fn.__name__}", _operator(adapted, symbol))
        executor.register_implementation(symbol, execution_transform=direct)
    for symbol, fn in _ADAPTED.items():
        adapter = executor.register_operator(fn.__name__, fn=fn, like=symbol)
        direct_rule = _DIRECT.get(symbol)
        if direct_rule is None:
            executor.register_implementation(symbol, adapter)
        else:
            executor.register_implementation(
                symbol, execution_transform=functools.partial(direct_rule, adapter)
            )


# Prims of the torch language's math, scans, sorting and indexing (ops A): special functions,
# torch calls whose signatures differ, and binary functions that take numbers in either place.
_SPECIAL_FUNCTIONS = (
    ("i0e", "i1", "i1e", "ndtri", "log_ndtr", "erfcx", "zeta") + prims.SPECIAL_UNARY_NO_GRAD
    + prims.SPECIAL_BINARY_NO_GRAD
)  # fmt: skip
_BINARY_MATH = frozenset(
    {"zeta", "copysign", "hypot", "igamma", "igammac", "fmax", "fmin", "nextafter", "gcd", "lcm"}
    | {"bitwise_left_shift", "bitwise_right_shift"}
    | set(prims.SPECIAL_BINARY_NO_GRAD)
)


def _tensor_operands(fn: Callable) -> Callable:
    """PyTorch's binary math functions want tensors (a number first is no overload for most)."""

    def adapted(a: Any, b: Any) -> Any:
        like = a if isinstance(a, torch.Tensor) else b
        if not isinstance(a, torch.Tensor):
            a = torch.scalar_tensor(a, dtype=like.dtype, device=like.device)
        if not isinstance(b, torch.Tensor):
            b = torch.scalar_tensor(b, dtype=like.dtype, device=like.device)
        return fn(a, b)

    return adapted


def prim_cumsum(a: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cumsum(a, dim, dtype=a.dtype)


def prim_cumprod(a: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cumprod(a, dim, dtype=a.dtype)


def prim_sort(a: torch.Tensor, dim: int, descending: bool, stable: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.sort(a, dim=dim, descending=descending, stable=stable))  # type: ignore[return-value]


def prim_topk(
    a: torch.Tensor, k: int, dim: int, largest: bool, is_sorted: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.topk(a, k, dim, largest, is_sorted))  # type: ignore[return-value]


def prim_scatter_reduce(
    a: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, reduce: str, include_self: bool
) -> torch.Tensor:
    return torch.scatter_reduce(a, dim, index, src, reduce, include_self=include_self)


def prim_take(a: torch.Tensor, index: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.index_select(a, dim, index)


def prim_index(a: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> torch.Tensor:
    return torch.ops.aten.index.Tensor(a, list(indices))


def prim_index_put(
    a: torch.Tensor, indices: Sequence[torch.Tensor | None], values: torch.Tensor, accumulate: bool
) -> torch.Tensor:
    return torch.ops.aten.index_put(a, list(indices), values, accumulate)


def prim_iota(
    length: int, *, start: Any, step: Any, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    exact = torch.float64 if dtype.is_floating_point or dtype.is_complex else torch.int64
    values = torch.arange(length, device=device, dtype=exact) * step + start
    return values.to(dtype)


# Random prims draw from the generator given, else the device's default one (docs/random.md).
def prim_normal(
    shape: Sequence[int], mean: float, std: float, *, device: torch.device, dtype: torch.dtype,
    generator: torch.Generator | None = None,
) -> torch.Tensor:  # fmt: skip
    return torch.empty(shape, device=device, dtype=dtype).normal_(mean, std, generator=generator)


def prim_randint(
    shape: Sequence[int], low: int, high: int, *, device: torch.device, dtype: torch.dtype,
    generator: torch.Generator | None = None,
) -> torch.Tensor:  # fmt: skip
    return torch.randint(low, high, tuple(shape), device=device, dtype=dtype, generator=generator)


def prim_randperm(
    n: int, *, device: torch.device, dtype: torch.dtype, generator: torch.Generator | None = None
) -> torch.Tensor:
    return torch.randperm(n, device=device, dtype=dtype, generator=generator)


def prim_multinomial(
    a: torch.Tensor, num_samples: int, replacement: bool, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    return torch.multinomial(a, num_samples, replacement, generator=generator)


def prim_manual_seed(seed: int, *, generator: torch.Generator | None = None) -> None:
    if generator is None:
        torch.manual_seed(seed)
    else:
        generator.manual_seed(seed)


def prim_tensor_from_sequence(data: Any, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(data, device=device, dtype=dtype)


def prim_cummax(a: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.cummax(a, dim))  # type: ignore[return-value]


def prim_cummin(a: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.cummin(a, dim))  # type: ignore[return-value]


def prim_device_put(a: torch.Tensor, device: torch.device) -> torch.Tensor:
    return a.to(device)


_MATH_SAME_SIGNATURE: dict[Symbol, Callable] = {
    prims.flip: torch.flip,
    prims.scatter: torch.scatter,
    prims.scatter_add: torch.scatter_add,
    prims.index_add: torch.index_add,
    prims.index_copy: torch.index_copy,
    prims.polygamma: torch.polygamma,
}
_MATH_ADAPTED: tuple[Callable, ...] = (
    prim_cumsum, prim_cumprod, prim_sort, prim_topk, prim_scatter_reduce, prim_take, prim_index,
    prim_index_put, prim_iota, prim_normal, prim_randint, prim_tensor_from_sequence, prim_device_put,
    prim_cummax, prim_cummin, prim_randperm, prim_multinomial, prim_manual_seed,
)  # fmt: skip


def tensor_T(a: torch.Tensor) -> torch.Tensor:  # noqa: N802 -- torch's names
    return a.T


def tensor_mT(a: torch.Tensor) -> torch.Tensor:  # noqa: N802
    return a.mT


def tensor_H(a: torch.Tensor) -> torch.Tensor:  # noqa: N802
    return a.H


def tensor_mH(a: torch.Tensor) -> torch.Tensor:  # noqa: N802
    return a.mH


def _claim_math_prims() -> None:
    # Tensor properties stand for these symbols but cannot be called: claim them with functions
    for fn in (tensor_T, tensor_mT, tensor_H, tensor_mH):
        symbol = ltorch.symbol_for(getattr(torch.Tensor, fn.__name__.removeprefix("tensor_")))
        if symbol is not None:
            executor.register_implementation(
                symbol, executor.register_operator(fn.__name__, fn=fn, like=symbol)
            )
    for name in _BINARY_MATH | set(_SPECIAL_FUNCTIONS):
        symbol = getattr(prims, name)
        torch_fn = getattr(torch.special if name in _SPECIAL_FUNCTIONS else torch, name)
        if name in _BINARY_MATH:
            torch_fn = _tensor_operands(torch_fn)
            torch_fn.__name__ = torch_fn.__qualname__ = f"prim_{name}"
            globals()[torch_fn.__name__] = torch_fn
        executor.register_implementation(symbol, _operator(torch_fn, symbol))
    for symbol, fn in _MATH_SAME_SIGNATURE.items():
        executor.register_implementation(symbol, _operator(fn, symbol))
    for fn in _MATH_ADAPTED:
        symbol = getattr(prims, fn.__name__.removeprefix("prim_"))
        executor.register_implementation(symbol, executor.register_operator(fn.__name__, fn=fn, like=symbol))


# Prims of torch.nn.functional (ops B): convolution, pooling windows, interpolation.
_NN_SAME_SIGNATURE: dict[Symbol, Callable] = {
    prims.convolution: torch.convolution,
}
_NN_ADAPTED: tuple[Callable, ...] = ()


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None, is_causal: bool,
    scale: float | None, enable_gqa: bool,
) -> torch.Tensor:  # fmt: skip
    """``ltorch.attention``: scaled_dot_product_attention without dropout."""
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
    )


def _claim_nn_prims() -> None:
    for symbol, fn in _NN_SAME_SIGNATURE.items():
        executor.register_implementation(symbol, _operator(fn, symbol))
    for fn in _NN_ADAPTED:
        symbol = getattr(prims, fn.__name__.removeprefix("prim_"))
        executor.register_implementation(symbol, executor.register_operator(fn.__name__, fn=fn, like=symbol))
    executor.register_implementation(
        ltorch.attention, executor.register_operator("attention", fn=attention, like=ltorch.attention)
    )


_claim_nn_prims()
register_torch_kernels(executor)
register_linear_cross_entropy(executor)
register_distributed(executor)
_claim_math_prims()
_claim_torch_language()
_claim_prims()
register_executor(executor)
