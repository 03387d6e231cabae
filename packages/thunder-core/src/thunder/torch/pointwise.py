"""Elementwise torch ops that are compositions of prims: logical ops, predicates, interpolation, ...

Each promotes its inputs as PyTorch does, computes in float32 for half-precision results (as
PyTorch's kernels do), and rounds once at the end.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import PromotionKind, elementwise_dtypes
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch.registry import alias, torchsymbol
from thunder.torch.utils import broadcast, check_tensor_argument, to_dtype

ELEMENTWISE = frozenset({"elementwise"})
DEFAULT, INT_TO_FLOAT, ALWAYS_BOOL = (
    PromotionKind.DEFAULT,
    PromotionKind.INT_TO_FLOAT,
    PromotionKind.ALWAYS_BOOL,
)


def _inputs(*args: Any, kind: PromotionKind) -> tuple[list[Any], dtypes.dtype, dtypes.dtype]:
    """``args`` broadcast and converted to the computation dtype, with that and the result dtype."""
    computation_dtype, result_dtype = elementwise_dtypes(*args, kind=kind)
    return [to_dtype(a, computation_dtype) for a in broadcast(*args)], computation_dtype, result_dtype


def _real_only(name: str, *args: Any) -> None:
    if any(isinstance(a, TensorProxy) and a.dtype.is_complex for a in args):
        raise NotImplementedError(f"thunder does not support {name} of complex tensors yet")


def _float_only(name: str, a: TensorProxy) -> None:
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"\"{name}\" is not implemented for '{a.dtype.name}'")


def _methods(*names: str) -> tuple[Any, ...]:
    return tuple(getattr(torch.Tensor, n) for n in names if hasattr(torch.Tensor, n))


# logical ops: nonzero is true
def _truth(a: Any) -> Any:
    if isinstance(a, TensorProxy):
        return a if a.dtype is dtypes.bool8 else prims.ne(a, False if a.dtype is dtypes.bool8 else 0)
    return bool(a)


@torchsymbol(torch.logical_not, torch.Tensor.logical_not, method="logical_not", tags=ELEMENTWISE)
def logical_not(input: TensorProxy) -> TensorProxy:
    return prims.bitwise_not(_truth(input))


def _logical(prim: Any, a: Any, b: Any) -> Any:
    a, b = broadcast(a, b)
    return prim(_truth(a), _truth(b))


@torchsymbol(torch.logical_and, torch.Tensor.logical_and, method="logical_and", tags=ELEMENTWISE)
def logical_and(input: Any, other: Any) -> Any:
    return _logical(prims.bitwise_and, input, other)


@torchsymbol(torch.logical_or, torch.Tensor.logical_or, method="logical_or", tags=ELEMENTWISE)
def logical_or(input: Any, other: Any) -> Any:
    return _logical(prims.bitwise_or, input, other)


@torchsymbol(torch.logical_xor, torch.Tensor.logical_xor, method="logical_xor", tags=ELEMENTWISE)
def logical_xor(input: Any, other: Any) -> Any:
    return _logical(prims.bitwise_xor, input, other)


# predicates
def _all_false(a: TensorProxy) -> TensorProxy:
    return prims.full(a.shape, False, device=a.device, dtype=dtypes.bool8)


@torchsymbol(torch.isinf, torch.Tensor.isinf, method="isinf", tags=ELEMENTWISE)
def isinf(input: TensorProxy) -> TensorProxy:
    _real_only("isinf", input)
    return prims.eq(prims.abs(input), math.inf) if input.dtype.is_floating_point else _all_false(input)


@torchsymbol(torch.isposinf, torch.Tensor.isposinf, method="isposinf", tags=ELEMENTWISE)
def isposinf(input: TensorProxy) -> TensorProxy:
    _real_only("isposinf", input)
    return prims.eq(input, math.inf) if input.dtype.is_floating_point else _all_false(input)


@torchsymbol(torch.isneginf, torch.Tensor.isneginf, method="isneginf", tags=ELEMENTWISE)
def isneginf(input: TensorProxy) -> TensorProxy:
    _real_only("isneginf", input)
    return prims.eq(input, -math.inf) if input.dtype.is_floating_point else _all_false(input)


@torchsymbol(torch.isreal, torch.Tensor.isreal, method="isreal", tags=ELEMENTWISE)
def isreal(input: TensorProxy) -> TensorProxy:
    _real_only("isreal", input)
    return prims.full(input.shape, True, device=input.device, dtype=dtypes.bool8)


@torchsymbol(torch.isclose, torch.Tensor.isclose, method="isclose", tags=ELEMENTWISE)
def isclose(
    input: TensorProxy, other: TensorProxy, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> TensorProxy:
    check_tensor_argument("isclose", input)
    check_tensor_argument("isclose", other, "other", 2)
    _real_only("isclose", input, other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype.name} did not match {other.dtype.name}")
    if rtol < 0 or atol < 0:
        raise RuntimeError("rtol and atol must be non-negative")
    input, other = broadcast(input, other)
    equal = prims.eq(input, other)
    if input.dtype is dtypes.bool8 or (rtol == 0 and atol == 0):
        return equal
    # PyTorch compares integers in the default float dtype and floats in their own (half in float32)
    compute = input.dtype if input.dtype.is_floating_point else dtypes.float32
    compute = dtypes.float32 if dtypes.is_low_precision(compute) else compute
    x, y = to_dtype(input, compute), to_dtype(other, compute)
    tolerance = prims.add(prims.mul(prims.abs(y), rtol), atol)
    close = prims.le(prims.abs(prims.sub(x, y)), tolerance)
    close = prims.bitwise_and(close, prims.bitwise_and(prims.isfinite(x), prims.isfinite(y)))
    result = prims.bitwise_or(equal, close)
    if equal_nan and input.dtype.is_floating_point:
        result = prims.bitwise_or(result, prims.bitwise_and(prims.isnan(input), prims.isnan(other)))
    return result


# arithmetic compositions
@torchsymbol(torch.square, torch.Tensor.square, method="square", tags=ELEMENTWISE)
def square(input: TensorProxy) -> TensorProxy:
    if input.dtype is dtypes.bool8:
        input = to_dtype(input, dtypes.int64)
    return ew.mul(input, input)


@torchsymbol(torch.frac, torch.Tensor.frac, method="frac", tags=ELEMENTWISE)
def frac(input: TensorProxy) -> TensorProxy:
    _float_only("frac", input)
    (x,), _, result_dtype = _inputs(input, kind=DEFAULT)
    return to_dtype(prims.sub(x, prims.trunc(x)), result_dtype)


@torchsymbol(torch.rsub, tags=ELEMENTWISE)
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Any:
    return ew.sub(other, input) if alpha == 1 else ew.sub(other, input, alpha=alpha)


def _scaled(name: str, factor: float) -> Any:
    def op(input: TensorProxy) -> TensorProxy:
        _real_only(name, input)
        (x,), _, result_dtype = _inputs(input, kind=INT_TO_FLOAT)
        return to_dtype(prims.mul(x, factor), result_dtype)

    op.__name__ = name
    return torchsymbol(getattr(torch, name), getattr(torch.Tensor, name), method=name, tags=ELEMENTWISE)(op)


deg2rad = _scaled("deg2rad", math.pi / 180)
rad2deg = _scaled("rad2deg", 180 / math.pi)


@torchsymbol(torch.sgn, torch.Tensor.sgn, method="sgn", tags=ELEMENTWISE)
def sgn(input: TensorProxy) -> TensorProxy:
    _real_only("sgn", input)
    return ew.sign(input)


@torchsymbol(torch.angle, torch.Tensor.angle, method="angle", tags=ELEMENTWISE)
def angle(input: TensorProxy) -> TensorProxy:
    _real_only("angle", input)
    (x,), _, result_dtype = _inputs(input, kind=INT_TO_FLOAT)
    result = prims.where(prims.lt(x, 0), math.pi, 0.0)
    return to_dtype(prims.where(prims.isnan(x), x, result), result_dtype)


def _real_identity(name: str, *fns: Any) -> Any:
    def op(input: TensorProxy) -> TensorProxy:
        _real_only(name, input)
        return input

    op.__name__ = name
    return torchsymbol(*fns, method=name, tags=ELEMENTWISE)(op)


conj = _real_identity("conj", torch.conj, torch.Tensor.conj)
conj_physical = _real_identity("conj_physical", torch.conj_physical, torch.Tensor.conj_physical)
resolve_conj = _real_identity("resolve_conj", torch.resolve_conj, torch.Tensor.resolve_conj)
resolve_neg = _real_identity("resolve_neg", torch.resolve_neg, torch.Tensor.resolve_neg)
real = _real_identity("real", torch.real)


@torchsymbol(torch.imag, method="imag")
def imag(input: TensorProxy) -> TensorProxy:
    _real_only("imag", input)
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


@torchsymbol(torch.nan_to_num, torch.Tensor.nan_to_num, method="nan_to_num", tags=ELEMENTWISE)
def nan_to_num(input: TensorProxy, nan: float | None = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> TensorProxy:  # fmt: skip
    _real_only("nan_to_num", input)
    if not input.dtype.is_floating_point:
        return input
    info = torch.finfo(input.dtype.torch_dtype)
    result = prims.where(prims.isnan(input), 0.0 if nan is None else nan, input)
    result = prims.where(prims.eq(input, math.inf), info.max if posinf is None else posinf, result)
    return prims.where(prims.eq(input, -math.inf), info.min if neginf is None else neginf, result)


@torchsymbol(torch.heaviside, torch.Tensor.heaviside, method="heaviside", tags=ELEMENTWISE)
def heaviside(input: TensorProxy, values: TensorProxy) -> TensorProxy:
    check_tensor_argument("heaviside", input)
    check_tensor_argument("heaviside", values, "values", 2)
    _real_only("heaviside", input, values)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    input, values = broadcast(input, values)
    one, zero = (True, False) if input.dtype is dtypes.bool8 else (1, 0)
    step = prims.where(prims.gt(input, zero), one, zero)
    return prims.where(prims.eq(input, zero), values, step)


@torchsymbol(torch.float_power, torch.Tensor.float_power, method="float_power", tags=ELEMENTWISE)
def float_power(input: Any, exponent: Any) -> Any:
    complex_ = any(
        (isinstance(x, TensorProxy) and x.dtype.is_complex) or isinstance(x, complex)
        for x in (input, exponent)
    )
    dtype = dtypes.complex128 if complex_ else dtypes.float64
    input, exponent = broadcast(to_dtype(input, dtype), to_dtype(exponent, dtype))
    return prims.pow(input, exponent)


@torchsymbol(torch.ldexp, torch.Tensor.ldexp, method="ldexp", tags=ELEMENTWISE)
def ldexp(input: Any, other: Any) -> Any:
    return ew.mul(input, ew.exp2(other) if isinstance(other, TensorProxy) else 2.0**other)


def _log_add_exp(a: Any, b: Any, base2: bool) -> Any:
    _real_only("logaddexp", a, b)
    (x, y), _, result_dtype = _inputs(a, b, kind=INT_TO_FLOAT)
    larger = prims.maximum(x, y)
    gap = prims.neg(prims.abs(prims.sub(x, y)))
    if base2:
        combined = prims.add(larger, prims.div(prims.log1p(prims.exp2(gap)), math.log(2.0)))
    else:
        combined = prims.add(larger, prims.log1p(prims.exp(gap)))
    # equal infinities: the difference is NaN, the answer is that infinity
    same_infinity = prims.bitwise_and(prims.eq(x, y), prims.eq(prims.abs(x), math.inf))
    return to_dtype(prims.where(same_infinity, x, combined), result_dtype)


@torchsymbol(torch.logaddexp, torch.Tensor.logaddexp, method="logaddexp", tags=ELEMENTWISE)
def logaddexp(input: Any, other: Any) -> Any:
    return _log_add_exp(input, other, base2=False)


@torchsymbol(torch.logaddexp2, torch.Tensor.logaddexp2, method="logaddexp2", tags=ELEMENTWISE)
def logaddexp2(input: Any, other: Any) -> Any:
    return _log_add_exp(input, other, base2=True)


# ternary
@torchsymbol(torch.lerp, torch.Tensor.lerp, method="lerp", tags=ELEMENTWISE)
def lerp(input: TensorProxy, end: TensorProxy, weight: Any) -> TensorProxy:
    _real_only("lerp", input, end, weight)
    if input.dtype is not end.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `end` but got dtype {end.dtype.name}")
    if isinstance(weight, TensorProxy) and weight.dtype is not input.dtype:
        raise RuntimeError(
            f"expected dtype {input.dtype.name} for `weight` but got dtype {weight.dtype.name}"
        )
    (s, e, w), _, result_dtype = _inputs(input, end, weight, kind=DEFAULT)
    difference = prims.sub(e, s)
    # as PyTorch's kernel: from the nearer end, for accuracy at weight 1
    low = prims.add(s, prims.mul(w, difference))
    high = prims.sub(e, prims.mul(difference, prims.sub(1.0, w) if isinstance(w, TensorProxy) else 1.0 - w))
    near_start = prims.lt(prims.abs(w), 0.5) if isinstance(w, TensorProxy) else abs(w) < 0.5
    if isinstance(near_start, bool):
        return to_dtype(low if near_start else high, result_dtype)
    return to_dtype(prims.where(near_start, low, high), result_dtype)


@torchsymbol(torch.addcmul, torch.Tensor.addcmul, method="addcmul", tags=ELEMENTWISE)
def addcmul(input: TensorProxy, tensor1: TensorProxy, tensor2: TensorProxy, *, value: Any = 1) -> TensorProxy:
    (x, t1, t2), computation_dtype, result_dtype = _inputs(input, tensor1, tensor2, kind=DEFAULT)
    if not (computation_dtype.is_floating_point or computation_dtype.is_complex) and isinstance(value, float):
        raise RuntimeError("value must be an integer for integer inputs to addcmul")
    product = prims.mul(t1, t2) if value == 1 else prims.mul(prims.mul(t1, t2), value)
    return to_dtype(prims.add(x, product), result_dtype)


@torchsymbol(torch.addcdiv, torch.Tensor.addcdiv, method="addcdiv", tags=ELEMENTWISE)
def addcdiv(input: TensorProxy, tensor1: TensorProxy, tensor2: TensorProxy, *, value: Any = 1) -> TensorProxy:
    if not (tensor1.dtype.is_floating_point or tensor1.dtype.is_complex) and not (
        tensor2.dtype.is_floating_point or tensor2.dtype.is_complex
    ):
        raise RuntimeError("Integer division with addcdiv is no longer supported")
    (x, t1, t2), _, result_dtype = _inputs(input, tensor1, tensor2, kind=DEFAULT)
    quotient = prims.div(t1, t2) if value == 1 else prims.mul(prims.div(t1, t2), value)
    return to_dtype(prims.add(x, quotient), result_dtype)


# aliases PyTorch keeps for NumPy's names
_ALIASES: dict[Any, Any] = {
    torch.arccos: ew.acos, torch.arcsin: ew.asin, torch.arctan: ew.atan, torch.arctan2: ew.atan2,
    torch.Tensor.arccos: ew.acos, torch.Tensor.arcsin: ew.asin, torch.Tensor.arctan: ew.atan,
    torch.Tensor.arctan2: ew.atan2, torch.absolute: ew.abs, torch.Tensor.absolute: ew.abs,
    torch.negative: ew.neg, torch.Tensor.negative: ew.neg, torch.fix: ew.trunc, torch.Tensor.fix: ew.trunc,
    torch.greater: ew.gt, torch.greater_equal: ew.ge, torch.less: ew.lt, torch.less_equal: ew.le,
    torch.not_equal: ew.ne, torch.Tensor.greater: ew.gt, torch.Tensor.greater_equal: ew.ge,
    torch.Tensor.less: ew.lt, torch.Tensor.less_equal: ew.le, torch.Tensor.not_equal: ew.ne,
    torch.special.expit: ew.sigmoid, torch.special.exp2: ew.exp2, torch.special.expm1: ew.expm1,
    torch.special.log1p: ew.log1p, torch.special.erf: ew.erf, torch.special.erfc: ew.erfc,
    torch.special.round: ew.round,
}  # fmt: skip
for _torch_fn, _symbol in _ALIASES.items():
    alias(
        _torch_fn,
        _symbol,
        method=_torch_fn.__name__ if isinstance(_torch_fn, type(torch.Tensor.arccos)) else (),
    )
