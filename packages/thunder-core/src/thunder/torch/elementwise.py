"""Elementwise torch ops: each is broadcasting, type promotion and one prim."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import PromotionKind, elementwise_dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import broadcast, check_tensor_argument, to_dtype

DEFAULT, INT_TO_FLOAT, ALWAYS_BOOL = (
    PromotionKind.DEFAULT,
    PromotionKind.INT_TO_FLOAT,
    PromotionKind.ALWAYS_BOOL,
)
ELEMENTWISE = frozenset({"elementwise"})


def apply_elementwise(prim: Symbol, *args: Any, kind: PromotionKind) -> Any:
    computation_dtype, result_dtype = elementwise_dtypes(*args, kind=kind)
    inputs = [to_dtype(a, computation_dtype) for a in broadcast(*args)]
    return to_dtype(prim(*inputs), result_dtype)


def _unary(prim: Symbol, kind: PromotionKind = DEFAULT) -> Callable[[Any], Any]:
    def op(input: Any) -> Any:
        return apply_elementwise(prim, input, kind=kind)

    op.__name__ = prim.name
    return op


def _binary(prim: Symbol, kind: PromotionKind = DEFAULT) -> Callable[[Any, Any], Any]:
    def op(input: Any, other: Any) -> Any:
        return apply_elementwise(prim, input, other, kind=kind)

    op.__name__ = prim.name
    return op


def _register(name: str, op: Callable, *, torch_fns: tuple = (), methods: tuple[str, ...] = ()) -> Symbol:
    fns = torch_fns or tuple(f for f in (getattr(torch, name, None), getattr(torch.Tensor, name, None)) if f)
    return torchsymbol(*fns, method=methods or name, name=name, tags=ELEMENTWISE)(op)


# One line per op: the torch name, the prim, the promotion kind.
neg = _register("neg", _unary(prims.neg, DEFAULT))
exp = _register("exp", _unary(prims.exp, INT_TO_FLOAT))
exp2 = _register("exp2", _unary(prims.exp2, INT_TO_FLOAT))
expm1 = _register("expm1", _unary(prims.expm1, INT_TO_FLOAT))
log = _register("log", _unary(prims.log, INT_TO_FLOAT))
log1p = _register("log1p", _unary(prims.log1p, INT_TO_FLOAT))
log2 = _register("log2", _unary(prims.log2, INT_TO_FLOAT))
sin = _register("sin", _unary(prims.sin, INT_TO_FLOAT))
cos = _register("cos", _unary(prims.cos, INT_TO_FLOAT))
tan = _register("tan", _unary(prims.tan, INT_TO_FLOAT))
tanh = _register("tanh", _unary(prims.tanh, INT_TO_FLOAT))
sinh = _register("sinh", _unary(prims.sinh, INT_TO_FLOAT))
cosh = _register("cosh", _unary(prims.cosh, INT_TO_FLOAT))
asin = _register("asin", _unary(prims.asin, INT_TO_FLOAT))
acos = _register("acos", _unary(prims.acos, INT_TO_FLOAT))
atan = _register("atan", _unary(prims.atan, INT_TO_FLOAT))
sqrt = _register("sqrt", _unary(prims.sqrt, INT_TO_FLOAT))
rsqrt = _register("rsqrt", _unary(prims.rsqrt, INT_TO_FLOAT))
reciprocal = _register("reciprocal", _unary(prims.reciprocal, INT_TO_FLOAT))
erf = _register("erf", _unary(prims.erf, INT_TO_FLOAT))
erfc = _register("erfc", _unary(prims.erfc, INT_TO_FLOAT))
sigmoid = _register("sigmoid", _unary(prims.sigmoid, INT_TO_FLOAT))
sign = _register("sign", _unary(prims.sign, DEFAULT))
floor = _register("floor", _unary(prims.floor, DEFAULT))
ceil = _register("ceil", _unary(prims.ceil, DEFAULT))
trunc = _register("trunc", _unary(prims.trunc, DEFAULT))
bitwise_not = _register("bitwise_not", _unary(prims.bitwise_not, DEFAULT))
isfinite = _register("isfinite", _unary(prims.isfinite, ALWAYS_BOOL))
isnan = _register("isnan", _unary(prims.isnan, ALWAYS_BOOL))

mul = _register(
    "mul",
    _binary(prims.mul, DEFAULT),
    torch_fns=(torch.mul, torch.Tensor.mul, torch.multiply, torch.Tensor.multiply),
    methods=("mul", "multiply"),
)
true_divide = _register("true_divide", _binary(prims.div, INT_TO_FLOAT))
remainder = _register("remainder", _binary(prims.remainder, DEFAULT))
fmod = _register("fmod", _binary(prims.fmod, DEFAULT))
maximum = _register("maximum", _binary(prims.maximum, DEFAULT))
minimum = _register("minimum", _binary(prims.minimum, DEFAULT))
atan2 = _register("atan2", _binary(prims.atan2, INT_TO_FLOAT))
bitwise_and = _register("bitwise_and", _binary(prims.bitwise_and, DEFAULT))
bitwise_or = _register("bitwise_or", _binary(prims.bitwise_or, DEFAULT))
bitwise_xor = _register("bitwise_xor", _binary(prims.bitwise_xor, DEFAULT))
eq = _register("eq", _binary(prims.eq, ALWAYS_BOOL))
ne = _register("ne", _binary(prims.ne, ALWAYS_BOOL))
lt = _register("lt", _binary(prims.lt, ALWAYS_BOOL))
le = _register("le", _binary(prims.le, ALWAYS_BOOL))
gt = _register("gt", _binary(prims.gt, ALWAYS_BOOL))
ge = _register("ge", _binary(prims.ge, ALWAYS_BOOL))

acosh = _register(
    "acosh", _unary(prims.acosh, INT_TO_FLOAT), torch_fns=(torch.acosh, torch.Tensor.acosh, torch.arccosh)
)
asinh = _register(
    "asinh", _unary(prims.asinh, INT_TO_FLOAT), torch_fns=(torch.asinh, torch.Tensor.asinh, torch.arcsinh)
)
atanh = _register(
    "atanh", _unary(prims.atanh, INT_TO_FLOAT), torch_fns=(torch.atanh, torch.Tensor.atanh, torch.arctanh)
)
log10 = _register("log10", _unary(prims.log10, INT_TO_FLOAT))
signbit = _register("signbit", _unary(prims.signbit, ALWAYS_BOOL))
copysign = _register("copysign", _binary(prims.copysign, INT_TO_FLOAT))
hypot = _register("hypot", _binary(prims.hypot, DEFAULT))
nextafter = _register("nextafter", _binary(prims.nextafter, DEFAULT))
fmax = _register("fmax", _binary(prims.fmax, DEFAULT))
fmin = _register("fmin", _binary(prims.fmin, DEFAULT))
gcd = _register("gcd", _binary(prims.gcd, DEFAULT))
lcm = _register("lcm", _binary(prims.lcm, DEFAULT))
bitwise_left_shift = _register("bitwise_left_shift", _binary(prims.bitwise_left_shift, DEFAULT))
bitwise_right_shift = _register("bitwise_right_shift", _binary(prims.bitwise_right_shift, DEFAULT))


@torchsymbol(torch.pow, torch.Tensor.pow, method="pow", tags=ELEMENTWISE)
def pow(input: Any, exponent: Any) -> Any:  # noqa: A001 -- torch's name
    return apply_elementwise(prims.pow, input, exponent, kind=DEFAULT)


@torchsymbol(torch.abs, torch.Tensor.abs, method="abs", tags=ELEMENTWISE)
def abs(input: Any) -> Any:  # noqa: A001
    return apply_elementwise(prims.abs, input, kind=PromotionKind.COMPLEX_TO_FLOAT)


@torchsymbol(torch.positive, torch.Tensor.positive, method="positive", tags=ELEMENTWISE)
def positive(input: Any) -> Any:
    return input


@torchsymbol(torch.add, torch.Tensor.add, method="add", tags=ELEMENTWISE)
def add(input: Any, other: Any, *, alpha: Any = None) -> Any:
    if alpha is not None:
        other = other * alpha
    return apply_elementwise(prims.add, input, other, kind=DEFAULT)


@torchsymbol(torch.sub, torch.subtract, torch.Tensor.sub, method="sub", tags=ELEMENTWISE, name="sub")
def sub(input: Any, other: Any, *, alpha: Any = None) -> Any:
    if alpha is not None:
        other = other * alpha
    return apply_elementwise(prims.sub, input, other, kind=DEFAULT)


@torchsymbol(
    torch.div, torch.divide, torch.Tensor.div, torch.Tensor.divide, method=("div", "divide"), tags=ELEMENTWISE
)
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return apply_elementwise(prims.div, input, other, kind=INT_TO_FLOAT)
    if rounding_mode == "trunc":
        return _trunc_divide(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    raise ValueError(
        f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}"
    )


def _trunc_divide(a: Any, b: Any) -> Any:
    computation_dtype, result_dtype = elementwise_dtypes(a, b, kind=DEFAULT)
    a, b = (to_dtype(x, computation_dtype) for x in broadcast(a, b))
    quotient = prims.div(a, b)  # truncates for integers
    if not computation_dtype.is_floating_point:
        return to_dtype(quotient, result_dtype)
    # PyTorch rounds the quotient to the result dtype (bfloat16, float16) before truncating it
    rounded = to_dtype(to_dtype(quotient, result_dtype), computation_dtype)
    return to_dtype(prims.trunc(rounded), result_dtype)


@torchsymbol(torch.floor_divide, torch.Tensor.floor_divide, method="floor_divide", tags=ELEMENTWISE)
def floor_divide(input: Any, other: Any) -> Any:
    computation_dtype, result_dtype = elementwise_dtypes(input, other, kind=DEFAULT)
    input, other = (to_dtype(x, computation_dtype) for x in broadcast(input, other))
    if computation_dtype.is_floating_point:
        return to_dtype(prims.floor(prims.div(input, other)), result_dtype)
    # Integer floor division is exact once the (floor-mode) remainder is taken off.
    return to_dtype(prims.div(prims.sub(input, prims.remainder(input, other)), other), result_dtype)


@torchsymbol(torch.round, torch.Tensor.round, method="round", tags=ELEMENTWISE)
def round(input: Any, *, decimals: int = 0) -> Any:  # noqa: A001 -- torch's name
    if decimals == 0:
        return apply_elementwise(prims.round, input, kind=DEFAULT)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"round with decimals is not implemented for {input.dtype.name}")
    # as PyTorch's kernel: scale by a power of ten, round half to even, scale back
    computation_dtype, result_dtype = elementwise_dtypes(input, kind=DEFAULT)
    x = to_dtype(input, computation_dtype)
    scale = 10.0 ** (decimals if decimals > 0 else -decimals)  # the builtin abs is shadowed here
    if decimals > 0:
        rounded = prims.div(prims.round(prims.mul(x, scale)), scale)
    else:
        rounded = prims.mul(prims.round(prims.div(x, scale)), scale)
    return to_dtype(rounded, result_dtype)


@torchsymbol(torch.where, tags=ELEMENTWISE)
def where(condition: Any, input: Any, other: Any) -> Any:
    _, result_dtype = elementwise_dtypes(input, other, kind=DEFAULT)
    condition, input, other = broadcast(condition, input, other)
    return prims.where(
        to_dtype(condition, dtypes.bool8), to_dtype(input, result_dtype), to_dtype(other, result_dtype)
    )


@torchsymbol(torch.Tensor.where, method="where", name="tensor_where", tags=ELEMENTWISE)
def tensor_where(a: Any, condition: Any, other: Any) -> Any:
    """``a.where(condition, other)``: the tensor is where's *second* argument."""
    return where(condition, a, other)


@torchsymbol(
    torch.clamp, torch.clip, torch.Tensor.clamp, torch.Tensor.clip, method=("clamp", "clip"), tags=ELEMENTWISE
)
def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 -- torch's parameter names
    check_tensor_argument("clamp", input)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if input.dtype.is_complex:
        raise RuntimeError("clamp is not supported for complex types")
    computation_dtype, result_dtype = elementwise_dtypes(input, min, max, kind=DEFAULT)
    result = to_dtype(input, computation_dtype)
    if min is not None:
        result = _clamp_bound(result, to_dtype(min, computation_dtype), lower=True)
    if max is not None:
        result = _clamp_bound(result, to_dtype(max, computation_dtype), lower=False)
    return to_dtype(result, result_dtype)


def _clamp_bound(a: Any, bound: Any, lower: bool) -> Any:
    """One side of clamp; NaN in the input or the bound gives NaN, as in torch.clamp."""
    if isinstance(bound, TensorProxy):
        a, bound = broadcast(a, bound)
        return (prims.maximum if lower else prims.minimum)(a, bound)
    if isinstance(bound, float) and math.isnan(bound):
        return prims.where(prims.eq(a, a), bound, a) if a.dtype.is_floating_point else a
    outside = prims.lt(a, bound) if lower else prims.gt(a, bound)
    return prims.where(outside, bound, a)


@torchsymbol(torch.clamp_min, torch.Tensor.clamp_min, method="clamp_min", tags=ELEMENTWISE)
def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002
    check_tensor_argument("clamp_min", input)
    return clamp(input, min, None)


@torchsymbol(torch.clamp_max, torch.Tensor.clamp_max, method="clamp_max", tags=ELEMENTWISE)
def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002
    check_tensor_argument("clamp_max", input)
    return clamp(input, None, max)
