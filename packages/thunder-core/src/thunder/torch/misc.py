"""Smaller ops built from the families: clone, fill, trace, diff, cummax/cummin, isin, index_reduce,
trapezoid rules, and the transposing properties (T, mT, H, mH)."""

from __future__ import annotations

from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.torch.elementwise import add, eq, mul, sub, true_divide
from thunder.torch.reductions import any as any_
from thunder.torch.reductions import sum as sum_
from thunder.torch.registry import alias, torchsymbol
from thunder.torch.shape import T, cat, mT, reshape
from thunder.torch.utils import canonical_dim, expand_to, structseq, to_dtype
from thunder.torch.views import _slice_dim, diagonal, narrow


@torchsymbol(torch.clone, torch.Tensor.clone, method="clone")
def clone(input: TensorProxy, *, memory_format: Any = None) -> TensorProxy:
    """A copy: a new tensor (never the input itself, which the caller could then write into)."""
    return prims.copy(input)


@torchsymbol(torch.fill, method="fill")
def fill(input: TensorProxy, value: Any) -> TensorProxy:
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        return prims.broadcast_in_dim(to_dtype(value, input.dtype), input.shape, ())
    return prims.full(input.shape, to_dtype(value, input.dtype), device=input.device, dtype=input.dtype)


@torchsymbol(torch.trace, torch.Tensor.trace, method="trace")
def trace(input: TensorProxy) -> TensorProxy:
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return sum_(diagonal(input))


@torchsymbol(torch.diff, torch.Tensor.diff, method="diff")
def diff(
    input: TensorProxy, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
) -> TensorProxy:
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = canonical_dim(dim, input.ndim)
    if n == 0:
        return input
    edge = input.shape[:d] + (1,) + input.shape[d + 1 :]

    def as_part(x: Any) -> TensorProxy:
        if not isinstance(x, TensorProxy):
            return prims.full(edge, x, device=input.device, dtype=input.dtype)
        return expand_to(x, edge) if x.ndim == 0 else x

    parts = [as_part(x) if x is not input else input for x in (prepend, input, append) if x is not None]
    if len(parts) > 1:
        input = cat(parts, d)
    for _ in range(n):
        length = input.shape[d]
        if length == 0:
            break
        later, earlier = _slice_dim(input, d, 1, length), _slice_dim(input, d, 0, length - 1)
        input = prims.bitwise_xor(later, earlier) if input.dtype is dtypes.bool8 else sub(later, earlier)
    return input


def _running(prim: Any, a: TensorProxy, dim: int) -> tuple[TensorProxy, TensorProxy]:
    d = canonical_dim(dim, a.ndim)
    if a.dtype.is_complex:
        raise RuntimeError(f"{prim.name} does not support complex input")
    return structseq(prim.name, *prim(a, d))


@torchsymbol(torch.cummax, torch.Tensor.cummax, method="cummax")
def cummax(input: TensorProxy, dim: int) -> tuple[TensorProxy, TensorProxy]:
    return _running(prims.cummax, input, dim)


@torchsymbol(torch.cummin, torch.Tensor.cummin, method="cummin")
def cummin(input: TensorProxy, dim: int) -> tuple[TensorProxy, TensorProxy]:
    return _running(prims.cummin, input, dim)


@torchsymbol(torch.isin)
def isin(
    elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
) -> TensorProxy:
    """Each element compared with every test element: memory grows with the product of their sizes."""
    if not isinstance(elements, TensorProxy):
        elements = prims.full((), elements, device=test_elements.device, dtype=test_elements.dtype)
    if not isinstance(test_elements, TensorProxy):
        test_elements = prims.full((1,), test_elements, device=elements.device, dtype=elements.dtype)
    tests = reshape(test_elements, (test_elements.numel(),))
    pairs = eq(reshape(elements, elements.shape + (1,)), tests)
    found = any_(pairs, -1) if tests.numel() else prims.full(elements.shape, False, device=elements.device,
                                                           dtype=dtypes.bool8)  # fmt: skip
    return prims.bitwise_not(found) if invert else found


@torchsymbol(torch.index_reduce, torch.Tensor.index_reduce, method="index_reduce")
def index_reduce(input: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy, reduce: str, *,
                 include_self: bool = True) -> TensorProxy:  # fmt: skip
    """The slices of ``source`` reduced into ``a`` at ``index`` along ``dim``: a scatter_reduce."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(
            f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
        )
    if index.ndim > 1 or not dtypes.is_integer(index.dtype):
        raise IndexError("index_reduce_(): Index is supposed to be a vector of integers")
    if source.dtype is not input.dtype:
        raise RuntimeError("index_reduce_(): self and source expected to have the same dtype")
    if input.ndim == 0:
        a1, source1 = reshape(input, (1,)), reshape(source, (source.numel(),))
        return reshape(index_reduce(a1, 0, reshape(index, (index.numel(),)), source1, reduce,
                                    include_self=include_self), ())  # fmt: skip
    d = canonical_dim(dim, input.ndim)
    index = reshape(index, (index.numel(),))
    if source.ndim == 0:
        source = reshape(source, (1,))
    spread = prims.broadcast_in_dim(to_dtype(index, dtypes.int64), source.shape, (d,))
    return prims.scatter_reduce(input, d, spread, source, reduce, bool(include_self))


def _trapezoid_spacing(y: TensorProxy, x: Any, dx: Any, d: int) -> Any:
    if x is None:
        return 1.0 if dx is None else dx
    if x.ndim == 1:
        shape = (1,) * d + (x.shape[0],) + (1,) * (y.ndim - d - 1)
        x = reshape(x, shape)
    length = x.shape[d] if x.ndim else 1
    return sub(_slice_dim(x, d, 1, length), _slice_dim(x, d, 0, length - 1))


def _trapezoid_terms(y: TensorProxy, x: Any, dx: Any, dim: int) -> tuple[Any, int]:
    d = canonical_dim(dim, y.ndim)
    n = y.shape[d]
    spacing = _trapezoid_spacing(y, x, dx, d)
    if n == 0:
        return None, d
    if n == 1:
        return None, d
    pair_sums = add(_slice_dim(y, d, 1, n), _slice_dim(y, d, 0, n - 1))
    return true_divide(mul(pair_sums, spacing), 2.0), d


@torchsymbol(torch.trapezoid)
def trapezoid(y: TensorProxy, x: Any = None, *, dx: Any = None, dim: int = -1) -> TensorProxy:
    terms, d = _trapezoid_terms(y, x, dx, dim)
    if terms is None:
        shape = y.shape[:d] + y.shape[d + 1 :]
        dtype = y.dtype if y.dtype.is_floating_point else dtypes.float32
        return prims.full(shape, 0, device=y.device, dtype=dtype)
    return sum_(terms, d)


@torchsymbol(torch.trapz)
def trapz(y: TensorProxy, x: Any = None, *, dx: Any = None, dim: int = -1) -> TensorProxy:
    return trapezoid(y, x, dx=dx, dim=dim)


@torchsymbol(torch.cumulative_trapezoid)
def cumulative_trapezoid(y: TensorProxy, x: Any = None, *, dx: Any = None, dim: int = -1) -> TensorProxy:
    from thunder.torch.sorting import cumsum

    terms, d = _trapezoid_terms(y, x, dx, dim)
    if terms is None:
        shape = y.shape[:d] + (0,) + y.shape[d + 1 :]
        dtype = y.dtype if y.dtype.is_floating_point else dtypes.float32
        return prims.full(shape, 0, device=y.device, dtype=dtype)
    return cumsum(terms, d)


@torchsymbol(torch.narrow_copy, torch.Tensor.narrow_copy, method="narrow_copy")
def narrow_copy(input: TensorProxy, dim: int, start: int, length: int) -> TensorProxy:
    if input.ndim and dim >= input.ndim:  # eager's narrow_copy checks this before narrow's IndexError
        raise RuntimeError(
            f"narrow_copy(): dim {dim} is out of range for a tensor of {input.ndim} dimensions"
        )
    return narrow(input, dim, start, length)


@torchsymbol(method="H")
def H(a: TensorProxy) -> TensorProxy:  # noqa: N802 -- torch's name
    if a.dtype.is_complex:
        raise NotImplementedError("thunder does not support the conjugate transpose of complex tensors yet")
    if a.ndim not in (0, 2):
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors).")
    return T(a)


@torchsymbol(method="mH")
def mH(input: TensorProxy) -> TensorProxy:  # noqa: N802 -- torch's name
    if input.dtype.is_complex:
        raise NotImplementedError("thunder does not support the conjugate transpose of complex tensors yet")
    return mT(input)


# torch.Tensor.T and friends are properties: their OpInfos call ``x.T``; the symbols above stand for them.
for _property, _symbol in (
    (torch.Tensor.T, T),
    (torch.Tensor.mT, mT),
    (torch.Tensor.H, H),
    (torch.Tensor.mH, mH),
):
    alias(_property, _symbol)
