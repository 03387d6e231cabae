"""The primitives: the leaves every torch-language symbol decomposes into.

Prims are deliberately strict so that executors have little to handle: elementwise prims take
tensors of one shape and one dtype (or Python numbers), shapes are explicit, and reductions name
their dimensions. The torch language does broadcasting and type promotion before calling them.
Each prim is its meta plus a line that makes it; families are built by factories.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from numbers import Number
from typing import Any

from thunder.core import devices, dtypes
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol, make_prim
from thunder.core.symbolic_shapes import NUMBERS

ELEMENTWISE = frozenset({"elementwise"})
REDUCTION = frozenset({"reduction"})
SHAPE = frozenset({"shape"})
VIEW = frozenset({"shape", "view"})  # run as a view of the input (reshape: where the layout allows)
RANDOM = frozenset({"random"})


def _check(condition: bool, message: Callable[[], str]) -> None:
    """Raise eager's error for invalid shapes, dtypes or devices: a ``RuntimeError``, as ATen's checks do."""
    if not condition:
        raise RuntimeError(message())


def _type_names(args: Sequence[Any]) -> str:
    return f"({', '.join(type(a).__name__ for a in args)})"


def _elementwise_inputs(name: str, args: Sequence[Any]) -> TensorProxy | None:
    """The first tensor among ``args`` after checking they agree on shape, dtype and device."""
    tensors = [a for a in args if isinstance(a, TensorProxy)]
    for a in args:
        _check(
            isinstance(a, (TensorProxy, *NUMBERS)), lambda: f"prims.{name} got {a!r}, not a tensor or number"
        )
    if not tensors:
        return None
    first = tensors[0]
    for other in tensors[1:]:
        _check(
            other.shape == first.shape, lambda: f"prims.{name}: shapes {first.shape} and {other.shape} differ"
        )
        _check(
            other.dtype is first.dtype, lambda: f"prims.{name}: dtypes {first.dtype} and {other.dtype} differ"
        )
        _check(other.device == first.device, lambda: f"prims.{name}: devices differ")
    return first


def _elementwise_meta(name: str, output_dtype: dtypes.dtype | None) -> Callable:
    def meta(*args: Any) -> TensorProxy:
        first = _elementwise_inputs(name, args)
        if first is None:  # ``torch.add(2, 3)``: eager rejects the argument types
            raise TypeError(f"{name}(): expected at least one Tensor argument, got {_type_names(args)}")
        requires_grad = any(isinstance(a, TensorProxy) and a.requires_grad for a in args)
        return first.replace(dtype=output_dtype or first.dtype, requires_grad=requires_grad)

    return meta


def _elementwise(name: str, output_dtype: dtypes.dtype | None = None) -> Symbol:
    return make_prim(name, _elementwise_meta(name, output_dtype), tags=ELEMENTWISE)


# elementwise unary
abs = _elementwise("abs")  # noqa: A001 -- the op's name
neg = _elementwise("neg")
exp = _elementwise("exp")
exp2 = _elementwise("exp2")
expm1 = _elementwise("expm1")
log = _elementwise("log")
log1p = _elementwise("log1p")
log2 = _elementwise("log2")
sin = _elementwise("sin")
cos = _elementwise("cos")
tan = _elementwise("tan")
tanh = _elementwise("tanh")
sinh = _elementwise("sinh")
cosh = _elementwise("cosh")
asin = _elementwise("asin")
acos = _elementwise("acos")
atan = _elementwise("atan")
sqrt = _elementwise("sqrt")
rsqrt = _elementwise("rsqrt")
reciprocal = _elementwise("reciprocal")
erf = _elementwise("erf")
erfc = _elementwise("erfc")
sign = _elementwise("sign")
floor = _elementwise("floor")
ceil = _elementwise("ceil")
round = _elementwise("round")  # noqa: A001
trunc = _elementwise("trunc")
sigmoid = _elementwise("sigmoid")
bitwise_not = _elementwise("bitwise_not")
isfinite = _elementwise("isfinite", dtypes.bool8)
isnan = _elementwise("isnan", dtypes.bool8)


# Gradients of the unary prims: each a function of the cotangent g, the input a and the output.
_UNARY_VJPS: dict[Symbol, Callable[[Any, Any, Any], Any]] = {
    abs: lambda g, a, out: mul(g, sign(a)),
    neg: lambda g, a, out: neg(g),
    exp: lambda g, a, out: mul(g, out),
    exp2: lambda g, a, out: mul(g, mul(out, math.log(2.0))),
    expm1: lambda g, a, out: mul(g, add(out, 1.0)),
    log: lambda g, a, out: div(g, a),
    log1p: lambda g, a, out: div(g, add(a, 1.0)),
    log2: lambda g, a, out: div(g, mul(a, math.log(2.0))),
    sin: lambda g, a, out: mul(g, cos(a)),
    cos: lambda g, a, out: neg(mul(g, sin(a))),
    tan: lambda g, a, out: mul(g, add(mul(out, out), 1.0)),
    tanh: lambda g, a, out: mul(g, sub(1.0, mul(out, out))),
    sinh: lambda g, a, out: mul(g, cosh(a)),
    cosh: lambda g, a, out: mul(g, sinh(a)),
    asin: lambda g, a, out: mul(g, rsqrt(sub(1.0, mul(a, a)))),
    acos: lambda g, a, out: neg(mul(g, rsqrt(sub(1.0, mul(a, a))))),
    atan: lambda g, a, out: div(g, add(mul(a, a), 1.0)),
    sqrt: lambda g, a, out: div(g, mul(out, 2.0)),
    rsqrt: lambda g, a, out: mul(g, mul(div(out, a), -0.5)),
    reciprocal: lambda g, a, out: neg(mul(g, mul(out, out))),
    erf: lambda g, a, out: mul(g, mul(exp(neg(mul(a, a))), 2.0 / math.sqrt(math.pi))),
    erfc: lambda g, a, out: mul(g, mul(exp(neg(mul(a, a))), -2.0 / math.sqrt(math.pi))),
    sigmoid: lambda g, a, out: mul(g, mul(out, sub(1.0, out))),
}


def _unary_vjp(rule: Callable[[Any, Any, Any], Any]) -> Callable:
    def vjp(g: Any, a: Any, *, out: Any) -> Any:
        return (None if g is None else rule(g, a, out),)

    return vjp


for _symbol, _rule in _UNARY_VJPS.items():
    register_vjp(_symbol)(_unary_vjp(_rule))

# Piecewise-constant prims have a zero gradient (None); predicates and bitwise ops have none.
for _symbol in (sign, floor, ceil, round, trunc, bitwise_not, isfinite, isnan):
    register_vjp(_symbol)(lambda g, a, *, out: (None,))

# elementwise binary (add, sub, mul and div typed: the gradient rules above use them before they are made)
add: Symbol = _elementwise("add")
sub: Symbol = _elementwise("sub")
mul: Symbol = _elementwise("mul")
div: Symbol = _elementwise("div")  # true division for floats, truncation for integers (C semantics)
pow = _elementwise("pow")  # noqa: A001
remainder = _elementwise("remainder")
fmod = _elementwise("fmod")
maximum = _elementwise("maximum")
minimum = _elementwise("minimum")
atan2 = _elementwise("atan2")
bitwise_and = _elementwise("bitwise_and")
bitwise_or = _elementwise("bitwise_or")
bitwise_xor = _elementwise("bitwise_xor")
eq = _elementwise("eq", dtypes.bool8)
ne = _elementwise("ne", dtypes.bool8)
lt = _elementwise("lt", dtypes.bool8)
le = _elementwise("le", dtypes.bool8)
gt = _elementwise("gt", dtypes.bool8)
ge = _elementwise("ge", dtypes.bool8)


def _tensor_or_none(x: Any, grad: Callable[[], Any]) -> Any:
    """The gradient for ``x`` if it is a tensor (numbers get none)."""
    return grad() if isinstance(x, TensorProxy) else None


def _binary_vjp(
    grad_a: Callable[[Any, Any, Any, Any], Any], grad_b: Callable[[Any, Any, Any, Any], Any]
) -> Callable:
    def vjp(g: Any, a: Any, b: Any, *, out: Any) -> tuple:
        if g is None:
            return (None, None)
        return (
            _tensor_or_none(a, lambda: grad_a(g, a, b, out)),
            _tensor_or_none(b, lambda: grad_b(g, a, b, out)),
        )

    return vjp


def _max_min_vjp(loses: Symbol) -> Callable:
    # Like eager, a tie splits the gradient evenly between the two inputs, and only an input that
    # loses gets none: against a NaN (no comparison holds) both get all of it, as in eager.
    def share(g: Any, mine: Any, other: Any) -> Any:
        return where(loses(mine, other), 0.0, where(eq(mine, other), mul(g, 0.5), g))

    return _binary_vjp(lambda g, a, b, out: share(g, a, b), lambda g, a, b, out: share(g, b, a))


def _pow_grad_exponent(g: Any, a: Any, b: Any, out: Any) -> Any:
    log_a = log(a) if isinstance(a, TensorProxy) else math.log(a) if a > 0 else math.nan
    # d(a**b)/db = a**b * log(a); where a == 0 and b > 0 eager gives 0, not nan.
    product = mul(g, mul(out, log_a))
    if isinstance(a, TensorProxy):
        return where(eq(a, 0.0), 0.0, product)
    return mul(g, 0.0) if a == 0 else product


def _pow_grad_base(g: Any, a: Any, b: Any, out: Any) -> Any:
    if isinstance(b, Number):
        if b == 2:  # a ** 1 is a, exactly: one kernel fewer in every RMSNorm's backward
            return mul(g, mul(a, 2.0))
        # typeshed's numbers.Number declares no arithmetic; the Python numbers that reach here all have it
        return mul(g, mul(pow(a, b - 1.0), b)) if b != 0 else mul(g, 0.0)  # type: ignore[operator]
    return mul(g, where(eq(b, 0.0), 0.0, mul(b, pow(a, sub(b, 1.0)))))


def _atan2_denominator(a: Any, b: Any) -> Any:
    return add(mul(a, a), mul(b, b))


register_vjp(add)(_binary_vjp(lambda g, a, b, out: g, lambda g, a, b, out: g))
register_vjp(sub)(_binary_vjp(lambda g, a, b, out: g, lambda g, a, b, out: neg(g)))
register_vjp(mul)(_binary_vjp(lambda g, a, b, out: mul(g, b), lambda g, a, b, out: mul(g, a)))
register_vjp(div)(
    _binary_vjp(lambda g, a, b, out: div(g, b), lambda g, a, b, out: neg(div(mul(g, a), mul(b, b))))
)
register_vjp(pow)(_binary_vjp(_pow_grad_base, _pow_grad_exponent))
register_vjp(remainder)(
    _binary_vjp(lambda g, a, b, out: g, lambda g, a, b, out: neg(mul(g, floor(div(a, b)))))
)
register_vjp(fmod)(_binary_vjp(lambda g, a, b, out: g, lambda g, a, b, out: neg(mul(g, trunc(div(a, b))))))
register_vjp(maximum)(_max_min_vjp(lt))
register_vjp(minimum)(_max_min_vjp(gt))
register_vjp(atan2)(
    _binary_vjp(
        lambda g, a, b, out: div(mul(g, b), _atan2_denominator(a, b)),
        lambda g, a, b, out: neg(div(mul(g, a), _atan2_denominator(a, b))),
    )
)
for _symbol in (bitwise_and, bitwise_or, bitwise_xor, eq, ne, lt, le, gt, ge):
    register_vjp(_symbol)(lambda g, a, b, *, out: (None, None))


def _where_meta(pred: Any, a: Any, b: Any) -> TensorProxy:
    _check(
        isinstance(pred, TensorProxy) and pred.dtype is dtypes.bool8,
        lambda: "prims.where needs a bool tensor",
    )
    values = [x for x in (a, b) if isinstance(x, TensorProxy)]
    _elementwise_inputs("where", [pred, *[v.replace(dtype=dtypes.bool8) for v in values]])
    dtype = values[0].dtype if values else dtypes.to_dtype(type(a))
    requires_grad = any(v.requires_grad for v in values)
    return pred.replace(dtype=dtype, requires_grad=requires_grad)


where = make_prim("where", _where_meta, tags=ELEMENTWISE)


@register_vjp(where)
def _where_vjp(g: Any, pred: Any, a: Any, b: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    grad_a = where(pred, g, 0.0) if isinstance(a, TensorProxy) else None
    grad_b = where(pred, 0.0, g) if isinstance(b, TensorProxy) else None
    return (None, grad_a, grad_b)


def _convert_element_type_meta(a: TensorProxy, dtype: Any) -> TensorProxy:
    dtype = dtypes.to_dtype(dtype)
    return a.replace(
        dtype=dtype, requires_grad=a.requires_grad and (dtype.is_floating_point or dtype.is_complex)
    )


convert_element_type = make_prim("convert_element_type", _convert_element_type_meta, tags=ELEMENTWISE)


@register_vjp(convert_element_type)
def _convert_element_type_vjp(g: Any, a: Any, dtype: Any, *, out: Any) -> tuple:
    return (None if g is None else convert_element_type(g, a.dtype), None)


# creation and randomness
def _full_meta(shape: Sequence[int], fill_value: Number, *, device: Any, dtype: Any) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


full = make_prim("full", _full_meta)


def _uniform_meta(
    shape: Sequence[int], minval: float, maxval: float, *, device: Any, dtype: Any, generator: Any = None
) -> TensorProxy:
    """Draws from ``generator`` (a ``torch.Generator``), or the device's default generator when None."""
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


uniform = make_prim("uniform", _uniform_meta, tags=RANDOM)

register_vjp(full, uniform)(lambda g, *args, out, **kwargs: (None,) * len(args))


# shapes
def _broadcast_in_dim_meta(
    a: TensorProxy, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> TensorProxy:
    shape = tuple(shape)
    _check(len(broadcast_dimensions) == a.ndim, lambda: "broadcast_in_dim needs one target dim per input dim")
    for size, dim in zip(a.shape, broadcast_dimensions):
        _check(size in (1, shape[dim]), lambda: f"cannot broadcast {a.shape} to {shape}")
    return a.replace(shape=shape)


broadcast_in_dim = make_prim("broadcast_in_dim", _broadcast_in_dim_meta, tags=VIEW)


def sum_to_shape(g: TensorProxy, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> TensorProxy:
    """Undo ``broadcast_in_dim(a, g.shape, broadcast_dimensions)`` for a gradient: sum what was expanded."""
    kept = set(broadcast_dimensions)
    summed = [d for d in range(g.ndim) if d not in kept]
    summed += [d for size, d in zip(shape, broadcast_dimensions) if size == 1 and g.shape[d] != 1]
    reduced = sum(g, sorted(summed)) if summed else g
    return reshape(reduced, tuple(shape)) if reduced.shape != tuple(shape) else reduced


@register_vjp(broadcast_in_dim)
def _broadcast_in_dim_vjp(g: Any, a: Any, shape: Any, broadcast_dimensions: Any, *, out: Any) -> tuple:
    return (None if g is None else sum_to_shape(g, a.shape, broadcast_dimensions), None, None)


def _reshape_meta(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    shape = tuple(shape)
    _check(a.numel() == math.prod(shape), lambda: f"cannot reshape {a.shape} to {shape}")
    return a.replace(shape=shape)


reshape = make_prim("reshape", _reshape_meta, tags=VIEW)

register_vjp(reshape)(lambda g, a, shape, *, out: (None if g is None else reshape(g, a.shape), None))


def _copy_meta(a: TensorProxy) -> TensorProxy:
    return a.replace()


# A new tensor with the same values: ``clone`` must not hand back its input, which the caller may
# then write into (traces are functional, but their outputs are real tensors).
copy = make_prim("copy", _copy_meta)

register_vjp(copy)(lambda g, a, *, out: (g,))


def _transpose_meta(a: TensorProxy, permutation: Sequence[int]) -> TensorProxy:
    _check(
        sorted(permutation) == list(range(a.ndim)),
        lambda: f"{permutation} is not a permutation of {a.ndim} dims",
    )
    return a.replace(shape=tuple(a.shape[d] for d in permutation))


transpose = make_prim("transpose", _transpose_meta, tags=VIEW)


@register_vjp(transpose)
def _transpose_vjp(g: Any, a: Any, permutation: Sequence[int], *, out: Any) -> tuple:
    if g is None:
        return (None, None)
    inverse = [0] * len(permutation)
    for position, d in enumerate(permutation):
        inverse[d] = position
    return (transpose(g, tuple(inverse)), None)


def _slice_meta(
    a: TensorProxy, start: Sequence[int], end: Sequence[int], strides: Sequence[int]
) -> TensorProxy:
    shape = tuple(builtins.max(0, (e - s + st - 1) // st) for s, e, st in zip(start, end, strides))
    return a.replace(shape=shape)


slice_prim = make_prim("slice_prim", _slice_meta, tags=VIEW)


def _pad_meta(
    a: TensorProxy, padding_value: Number, padding_config: Sequence[tuple[int, int, int]]
) -> TensorProxy:
    """Pads each dim with (low, high, interior) elements of ``padding_value``; all non-negative."""
    _check(len(padding_config) == a.ndim, lambda: "pad needs one (low, high, interior) triple per dim")
    shape = []
    for size, (low, high, interior) in zip(a.shape, padding_config):
        _check(builtins.min(low, high, interior) >= 0, lambda: "pad takes non-negative padding only")
        shape.append(low + high + size + builtins.max(size - 1, 0) * interior)
    return a.replace(shape=tuple(shape))


pad = make_prim("pad", _pad_meta, tags=SHAPE)


@register_vjp(pad)
def _pad_vjp(g: Any, a: Any, padding_value: Any, padding_config: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    start = [low for low, _, _ in padding_config]
    end = [
        low + builtins.max(size - 1, 0) * (interior + 1) + (size > 0)
        for size, (low, _, interior) in zip(a.shape, padding_config)
    ]
    strides = [interior + 1 for _, _, interior in padding_config]
    return (slice_prim(g, start, end, strides), None, None)


@register_vjp(slice_prim)
def _slice_vjp(g: Any, a: Any, start: Any, end: Any, strides: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    config = []
    for size, low, length, stride in zip(a.shape, start, out.shape, strides):
        used = low + builtins.max(length - 1, 0) * stride + (length > 0)
        config.append((low, size - used, stride - 1 if length > 1 else 0))
    return (pad(g, 0.0 if g.dtype.is_floating_point else 0, config), None, None, None)


def _cat_meta(tensors: Sequence[TensorProxy], dim: int) -> TensorProxy:
    first = tensors[0]
    size = builtins.sum(t.shape[dim] for t in tensors)
    shape = first.shape[:dim] + (size,) + first.shape[dim + 1 :]
    return first.replace(shape=shape, requires_grad=any(t.requires_grad for t in tensors))


cat = make_prim("cat", _cat_meta, tags=SHAPE)


@register_vjp(cat)
def _cat_vjp(g: Any, tensors: Sequence[TensorProxy], dim: int, *, out: Any) -> tuple:
    if g is None:
        return (None, None)
    grads, offset = [], 0
    for t in tensors:
        start = [0] * g.ndim
        end = list(g.shape)
        start[dim], end[dim] = offset, offset + t.shape[dim]
        grads.append(slice_prim(g, start, end, [1] * g.ndim))
        offset += t.shape[dim]
    return (grads, None)


# reductions
def _reduced_shape(a: TensorProxy, dims: Sequence[int]) -> tuple[int, ...]:
    for d in dims:
        _check(0 <= d < a.ndim, lambda: f"dim {d} is out of range for a {a.ndim}-d tensor")
    return tuple(size for d, size in enumerate(a.shape) if d not in dims)


def _reduction_meta(a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    return a.replace(shape=_reduced_shape(a, dims))


sum = make_prim("sum", _reduction_meta, tags=REDUCTION)  # noqa: A001
prod = make_prim("prod", _reduction_meta, tags=REDUCTION)
amax = make_prim("amax", _reduction_meta, tags=REDUCTION)
amin = make_prim("amin", _reduction_meta, tags=REDUCTION)


def _unreduce(g: TensorProxy, a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    """A reduction's result broadcast back to the shape of its input."""
    kept = [d for d in range(a.ndim) if d not in dims]
    return broadcast_in_dim(g, a.shape, kept)


@register_vjp(sum)
def _sum_vjp(g: Any, a: Any, dims: Any, *, out: Any) -> tuple:
    return (None if g is None else _unreduce(g, a, dims), None)


def _extremum_vjp(g: Any, a: Any, dims: Any, *, out: Any) -> tuple:
    # Like eager, the gradient is shared evenly between the elements that attain the extremum.
    if g is None:
        return (None, None)
    hits = eq(a, _unreduce(out, a, dims))
    count = sum(convert_element_type(hits, g.dtype), dims)
    return (where(hits, _unreduce(div(g, count), a, dims), 0.0), None)


register_vjp(amax, amin)(_extremum_vjp)


@register_vjp(prod)
def _prod_vjp(g: Any, a: Any, dims: Any, *, out: Any) -> tuple:
    # The gradient of an element is the product of the others: out / a, except at zeros. A zero's
    # gradient is the product of the non-zeros when it is the only zero of its group, else zero.
    if g is None:
        return (None, None)
    is_zero = eq(a, 0.0)
    nonzero_product = prod(where(is_zero, 1.0, a), dims)
    zero_count = sum(convert_element_type(is_zero, a.dtype), dims)
    at_zero = where(eq(zero_count, 1.0), nonzero_product, 0.0)
    others = where(is_zero, _unreduce(at_zero, a, dims), div(_unreduce(out, a, dims), where(is_zero, 1.0, a)))
    return (mul(_unreduce(g, a, dims), others), None)


def _var_meta(a: TensorProxy, dims: Sequence[int], *, correction: float) -> TensorProxy:
    real = (
        dtypes.float64 if a.dtype is dtypes.complex128 else dtypes.float32 if a.dtype.is_complex else a.dtype
    )
    return a.replace(shape=_reduced_shape(a, dims), dtype=real)


var = make_prim("var", _var_meta, tags=REDUCTION)


@register_vjp(var)
def _var_vjp(g: Any, a: Any, dims: Any, *, correction: float, out: Any) -> tuple:
    if g is None:
        return (None, None)
    n = math.prod(a.shape[d] for d in dims)
    mean = _unreduce(div(sum(a, dims), float(n)), a, dims)
    scale = 2.0 / (n - correction) if n - correction > 0 else math.nan
    return (mul(mul(_unreduce(g, a, dims), sub(a, mean)), scale), None)


def _arg_reduction_meta(a: TensorProxy, dim: int | None) -> TensorProxy:
    shape = () if dim is None else _reduced_shape(a, (dim,))
    return a.replace(shape=shape, dtype=dtypes.int64, requires_grad=False)


argmax = make_prim("argmax", _arg_reduction_meta, tags=REDUCTION)
argmin = make_prim("argmin", _arg_reduction_meta, tags=REDUCTION)

register_vjp(argmax, argmin)(lambda g, a, dim, *, out: (None, None))


# matrix products and indexing
def _sizes(shape: Sequence[int]) -> str:
    """``2x3``, as eager's matmul messages write a shape."""
    return "x".join(str(size) for size in shape)


def _matmul_meta(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    _check(
        a.ndim >= 1 and b.ndim >= 1,
        lambda: f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D",
    )
    _check(
        a.dtype is b.dtype,
        lambda: f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}",
    )
    a_shape = (1,) + a.shape if a.ndim == 1 else a.shape
    b_shape = b.shape + (1,) if b.ndim == 1 else b.shape
    _check(
        a_shape[-1] == b_shape[-2],
        lambda: f"mat1 and mat2 shapes cannot be multiplied ({_sizes(a.shape)} and {_sizes(b.shape)})",
    )
    from thunder.core.promotion import broadcast_shapes

    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    shape = batch + a_shape[-2:-1] * (a.ndim > 1) + b_shape[-1:] * (b.ndim > 1)
    return a.replace(shape=shape, requires_grad=a.requires_grad or b.requires_grad)


matmul = make_prim("matmul", _matmul_meta)


def _matrix_transpose(a: TensorProxy) -> TensorProxy:
    order = list(range(a.ndim))
    order[-2], order[-1] = order[-1], order[-2]
    return transpose(a, tuple(order))


def _sum_to_batch(x: TensorProxy, shape: tuple[int, ...]) -> TensorProxy:
    """Sum the batch dims that matmul broadcast, so that ``x`` gets ``shape``."""
    extra = x.ndim - len(shape)
    dims = list(range(extra)) + [
        extra + d for d, size in enumerate(shape[:-2]) if size == 1 and x.shape[extra + d] != 1
    ]
    reduced = sum(x, dims) if dims else x
    return reshape(reduced, shape) if reduced.shape != shape else reduced


@register_vjp(matmul)
def _matmul_vjp(g: Any, a: Any, b: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None)
    if a.ndim == 1 and b.ndim == 1:
        return (mul(broadcast_in_dim(g, a.shape, ()), b), mul(broadcast_in_dim(g, b.shape, ()), a))
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    g2 = reshape(g, out.shape[:-1] + (1,) + out.shape[-1:]) if a.ndim == 1 else g
    g2 = reshape(g2, g2.shape + (1,)) if b.ndim == 1 else g2
    grad_a = _sum_to_batch(matmul(g2, _matrix_transpose(b2)), a2.shape)
    grad_b = _sum_to_batch(matmul(_matrix_transpose(a2), g2), b2.shape)
    return (reshape(grad_a, a.shape), reshape(grad_b, b.shape))


def _linear_meta(a: TensorProxy, w: TensorProxy, bias: TensorProxy | None) -> TensorProxy:
    _check(
        a.shape[-1] == w.shape[-1], lambda: f"linear: input {a.shape} and weight {w.shape} differ in features"
    )
    _check(a.dtype is w.dtype, lambda: f"linear: input is {a.dtype} and weight is {w.dtype}")
    requires_grad = a.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad)
    return a.replace(shape=a.shape[:-1] + w.shape[:1], requires_grad=requires_grad)


linear = make_prim("linear", _linear_meta)


@register_vjp(linear)
def _linear_vjp(g: Any, a: Any, w: Any, bias: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    grad_a = matmul(g, w)
    rows = math.prod(a.shape[:-1])
    g2 = reshape(g, (rows, w.shape[0]))
    grad_w = matmul(transpose(g2, (1, 0)), reshape(a, (rows, a.shape[-1])))
    grad_bias = sum(g, list(range(g.ndim - 1))) if bias is not None else None
    if grad_bias is not None and grad_bias.shape != bias.shape:
        grad_bias = reshape(grad_bias, bias.shape)
    return (grad_a, grad_w, grad_bias)


def _take_along_axis_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    _check(index.ndim == a.ndim, lambda: "take_along_axis needs an index with as many dims as the input")
    return a.replace(shape=index.shape)


take_along_axis = make_prim("take_along_axis", _take_along_axis_meta)


def _zero_gradient(g: Any, *args: Any, out: Any, **kwargs: Any) -> tuple:
    return (None,) * len(args)


def _dim_meta_check(name: str, a: TensorProxy, dim: int) -> None:
    _check(
        0 <= dim < builtins.max(a.ndim, 1), lambda: f"prims.{name}: dim {dim} out of range for {a.ndim} dims"
    )
