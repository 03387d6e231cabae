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

ELEMENTWISE = frozenset({"elementwise"})
REDUCTION = frozenset({"reduction"})
SHAPE = frozenset({"shape"})
RANDOM = frozenset({"random"})


def _check(condition: bool, message: Callable[[], str]) -> None:
    if not condition:
        raise ValueError(message())


def _elementwise_inputs(name: str, args: Sequence[Any]) -> TensorProxy | None:
    """The first tensor among ``args`` after checking they agree on shape, dtype and device."""
    tensors = [a for a in args if isinstance(a, TensorProxy)]
    for a in args:
        _check(
            isinstance(a, (TensorProxy, Number)), lambda: f"prims.{name} got {a!r}, not a tensor or number"
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
        _check(first is not None, lambda: f"prims.{name} needs at least one tensor input, got {args}")
        assert first is not None
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

# elementwise binary
add = _elementwise("add")
sub = _elementwise("sub")
mul = _elementwise("mul")
div = _elementwise("div")  # true division for floats, truncation for integers (C semantics)
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


def _max_min_vjp(wins: Symbol) -> Callable:
    # Like eager, a tie splits the gradient evenly between the two inputs.
    def share(g: Any, mine: Any, other: Any) -> Any:
        return where(wins(mine, other), g, where(eq(mine, other), mul(g, 0.5), 0.0))

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
        return mul(g, mul(pow(a, b - 1.0), b)) if b != 0 else mul(g, 0.0)
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
register_vjp(maximum)(_max_min_vjp(gt))
register_vjp(minimum)(_max_min_vjp(lt))
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
    shape: Sequence[int], minval: float, maxval: float, *, device: Any, dtype: Any
) -> TensorProxy:
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


broadcast_in_dim = make_prim("broadcast_in_dim", _broadcast_in_dim_meta, tags=SHAPE)


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


reshape = make_prim("reshape", _reshape_meta, tags=SHAPE)

register_vjp(reshape)(lambda g, a, shape, *, out: (None if g is None else reshape(g, a.shape), None))


def _transpose_meta(a: TensorProxy, permutation: Sequence[int]) -> TensorProxy:
    _check(
        sorted(permutation) == list(range(a.ndim)),
        lambda: f"{permutation} is not a permutation of {a.ndim} dims",
    )
    return a.replace(shape=tuple(a.shape[d] for d in permutation))


transpose = make_prim("transpose", _transpose_meta, tags=SHAPE)


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


slice_prim = make_prim("slice_prim", _slice_meta, tags=SHAPE)


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
def _matmul_meta(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    _check(a.dtype is b.dtype, lambda: f"matmul of {a.dtype} and {b.dtype}")
    _check(a.ndim >= 1 and b.ndim >= 1, lambda: "matmul needs tensors of at least one dimension")
    a_shape = (1,) + a.shape if a.ndim == 1 else a.shape
    b_shape = b.shape + (1,) if b.ndim == 1 else b.shape
    _check(
        a_shape[-1] == b_shape[-2], lambda: f"matmul of shapes {a.shape} and {b.shape}: inner sizes differ"
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


# elementwise prims: more math, special functions and shifts (ops A)
def _not_differentiable(name: str) -> Callable:
    """The rule of a prim that eager cannot differentiate either: an error once a gradient reaches it."""

    def vjp(g: Any, *args: Any, out: Any, **kwargs: Any) -> tuple:
        if g is not None and any(isinstance(a, TensorProxy) and a.requires_grad for a in args):
            raise NotImplementedError(
                f"the derivative of prims.{name} is not implemented (nor is it in PyTorch)"
            )
        return (None,) * len(args)

    return vjp


def _zero_gradient(g: Any, *args: Any, out: Any, **kwargs: Any) -> tuple:
    return (None,) * len(args)


acosh = _elementwise("acosh")
asinh = _elementwise("asinh")
atanh = _elementwise("atanh")
log10 = _elementwise("log10")
lgamma = _elementwise("lgamma")
digamma = _elementwise("digamma")
erfinv = _elementwise("erfinv")
i0 = _elementwise("i0")
i0e = _elementwise("i0e")
i1 = _elementwise("i1")
i1e = _elementwise("i1e")
ndtri = _elementwise("ndtri")
log_ndtr = _elementwise("log_ndtr")
erfcx = _elementwise("erfcx")
signbit = _elementwise("signbit", dtypes.bool8)
polygamma = _elementwise("polygamma")  # polygamma(n, a), n a Python int
_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)

_MORE_UNARY_VJPS: dict[Symbol, Callable[[Any, Any, Any], Any]] = {
    acosh: lambda g, a, out: mul(g, rsqrt(sub(mul(a, a), 1.0))),
    asinh: lambda g, a, out: mul(g, rsqrt(add(mul(a, a), 1.0))),
    atanh: lambda g, a, out: div(g, sub(1.0, mul(a, a))),
    log10: lambda g, a, out: div(g, mul(a, math.log(10.0))),
    lgamma: lambda g, a, out: mul(g, digamma(a)),
    digamma: lambda g, a, out: mul(g, polygamma(1, a)),
    erfinv: lambda g, a, out: mul(g, mul(exp(mul(out, out)), _SQRT_PI / 2)),
    i0: lambda g, a, out: mul(g, i1(a)),
    i0e: lambda g, a, out: mul(g, sub(i1e(a), mul(sign(a), out))),
    # d/dx i1(x) = i0(x) - i1(x)/x, which is 1/2 at 0
    i1: lambda g, a, out: mul(g, where(eq(a, 0.0), 0.5, sub(i0(a), div(out, a)))),
    i1e: lambda g, a, out: mul(g, where(eq(a, 0.0), 0.5, sub(i0e(a), mul(out, add(sign(a), reciprocal(a)))))),
    ndtri: lambda g, a, out: mul(g, mul(exp(mul(mul(out, out), 0.5)), _SQRT_2PI)),
    log_ndtr: lambda g, a, out: mul(g, div(exp(sub(mul(mul(a, a), -0.5), out)), _SQRT_2PI)),
    erfcx: lambda g, a, out: mul(g, sub(mul(mul(a, out), 2.0), 2.0 / _SQRT_PI)),
}
for _symbol, _rule in _MORE_UNARY_VJPS.items():
    register_vjp(_symbol)(_unary_vjp(_rule))
register_vjp(signbit)(_zero_gradient)


@register_vjp(polygamma)
def _polygamma_vjp(g: Any, n: Any, a: Any, *, out: Any) -> tuple:
    return (None, None if g is None else mul(g, polygamma(n + 1, a)))


# Special functions PyTorch does not differentiate either.
SPECIAL_UNARY_NO_GRAD = (
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai",
)  # fmt: skip
SPECIAL_BINARY_NO_GRAD = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
)  # fmt: skip
for _name in SPECIAL_UNARY_NO_GRAD + SPECIAL_BINARY_NO_GRAD:
    globals()[_name] = _symbol = _elementwise(_name)
    register_vjp(_symbol)(_not_differentiable(_name))
bitwise_left_shift = _elementwise("bitwise_left_shift")
bitwise_right_shift = _elementwise("bitwise_right_shift")
gcd = _elementwise("gcd")
lcm = _elementwise("lcm")
register_vjp(bitwise_left_shift, bitwise_right_shift, gcd, lcm)(_zero_gradient)

nextafter = _elementwise("nextafter")
# as eager: the step to the next float counts as no change
register_vjp(nextafter)(_binary_vjp(lambda g, a, b, out: g, lambda g, a, b, out: None))
copysign = _elementwise("copysign")
hypot = _elementwise("hypot")
igamma = _elementwise("igamma")
igammac = _elementwise("igammac")
zeta = _elementwise("zeta")
fmax = _elementwise("fmax")
fmin = _elementwise("fmin")

register_vjp(copysign)(
    _binary_vjp(lambda g, a, b, out: where(eq(a, 0.0), 0.0, mul(g, div(out, a))), lambda g, a, b, out: None)
)
register_vjp(hypot)(
    _binary_vjp(lambda g, a, b, out: mul(g, div(a, out)), lambda g, a, b, out: mul(g, div(b, out)))
)


def _igamma_grad_x(g: Any, a: Any, x: Any, out: Any, sign_: float) -> Any:
    # d/dx P(a, x) = x**(a-1) * exp(-x) / Gamma(a); Q = 1 - P
    log_density = sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a))
    return mul(g, mul(exp(log_density), sign_))


def _igamma_vjp(sign_: float) -> Callable:
    def vjp(g: Any, a: Any, x: Any, *, out: Any) -> tuple:
        if g is not None and isinstance(a, TensorProxy) and a.requires_grad:
            raise NotImplementedError("the derivative of igamma/igammac with respect to a is not implemented")
        grad_x = None if g is None or not isinstance(x, TensorProxy) else _igamma_grad_x(g, a, x, out, sign_)
        return (None, grad_x)

    return vjp


register_vjp(igamma)(_igamma_vjp(1.0))
register_vjp(igammac)(_igamma_vjp(-1.0))


@register_vjp(zeta)
def _zeta_vjp(g: Any, x: Any, q: Any, *, out: Any) -> tuple:
    if g is not None and isinstance(x, TensorProxy) and x.requires_grad:
        raise NotImplementedError(
            "the derivative of zeta with respect to its first argument is not implemented"
        )
    if g is None or not isinstance(q, TensorProxy):
        return (None, None)
    shifted = add(x, 1.0) if isinstance(x, TensorProxy) else x + 1.0
    return (None, mul(g, mul(neg(x) if isinstance(x, TensorProxy) else -x, zeta(shifted, q))))


def _fmax_fmin_vjp(wins: Symbol) -> Callable:
    # The NaN-ignoring choice: the gradient goes to whichever input the output came from.
    def to_a(g: Any, a: Any, b: Any, out: Any) -> Any:
        chosen = bitwise_or(wins(a, b), bitwise_or(isnan(b), eq(a, b)))
        return where(chosen, where(eq(a, b), mul(g, 0.5), g), 0.0)

    def to_b(g: Any, a: Any, b: Any, out: Any) -> Any:
        return to_a(g, b, a, out)

    return _binary_vjp(to_a, to_b)


register_vjp(fmax)(_fmax_fmin_vjp(gt))
register_vjp(fmin)(_fmax_fmin_vjp(lt))


# scan and sort prims (ops A)
def _dim_meta_check(name: str, a: TensorProxy, dim: int) -> None:
    _check(
        0 <= dim < builtins.max(a.ndim, 1), lambda: f"prims.{name}: dim {dim} out of range for {a.ndim} dims"
    )


def _scan_meta(a: TensorProxy, dim: int) -> TensorProxy:
    _dim_meta_check("cumsum", a, dim)
    return a.replace()


cumsum = make_prim("cumsum", _scan_meta, tags=REDUCTION)
cumprod = make_prim("cumprod", _scan_meta, tags=REDUCTION)


def _flip_meta(a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    for d in dims:
        _dim_meta_check("flip", a, d)
    return a.replace()


flip = make_prim("flip", _flip_meta, tags=SHAPE)
register_vjp(flip)(lambda g, a, dims, *, out: (None if g is None else flip(g, dims), None))


@register_vjp(cumsum)
def _cumsum_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    if g is None or a.ndim == 0:
        return (g, None)
    return (flip(cumsum(flip(g, (dim,)), dim), (dim,)), None)


@register_vjp(cumprod)
def _cumprod_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    """Exact with zeros: only the first zero along ``dim`` gets a gradient, computed without dividing."""
    if g is None or a.ndim == 0:
        return (g, None)

    def reverse_cumsum(x: Any) -> Any:
        return flip(cumsum(flip(x, (dim,)), dim), (dim,))

    is_zero = eq(a, 0.0)
    first_zero = bitwise_and(is_zero, eq(cumsum(convert_element_type(is_zero, dtypes.int64), dim), 1))
    nonzero_grad = div(reverse_cumsum(mul(g, out)), where(is_zero, 1.0, a))
    without_first_zero = cumprod(where(first_zero, 1.0, a), dim)
    first_zero_grad = reverse_cumsum(mul(g, without_first_zero))
    return (where(is_zero, where(first_zero, first_zero_grad, 0.0), nonzero_grad), None)


def _sort_meta(a: TensorProxy, dim: int, descending: bool, stable: bool) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("sort", a, dim)
    return a.replace(), a.replace(dtype=dtypes.int64, requires_grad=False)


sort = make_prim("sort", _sort_meta)


def _topk_meta(
    a: TensorProxy, k: int, dim: int, largest: bool, is_sorted: bool
) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("topk", a, dim)
    size = a.shape[dim] if a.ndim else 1
    _check(0 <= k <= size, lambda: f"prims.topk: k={k} is out of range for a dim of size {size}")
    shape = a.shape[:dim] + (k,) + a.shape[dim + 1 :] if a.ndim else ()
    return a.replace(shape=shape), a.replace(shape=shape, dtype=dtypes.int64, requires_grad=False)


topk = make_prim("topk", _topk_meta)


def _zeros_like(a: TensorProxy) -> TensorProxy:
    return full(a.shape, False if a.dtype is dtypes.bool8 else 0, device=a.device, dtype=a.dtype)


@register_vjp(sort)
def _sort_vjp(g: Any, a: Any, dim: int, descending: bool, stable: bool, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None, None, None)
    if a.ndim == 0:
        return (g_values, None, None, None)
    return (scatter_add(_zeros_like(a), dim, out[1], g_values), None, None, None)


@register_vjp(topk)
def _topk_vjp(g: Any, a: Any, k: int, dim: int, largest: bool, is_sorted: bool, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None, None, None, None)
    if a.ndim == 0:
        return (g_values, None, None, None, None)
    return (scatter_add(_zeros_like(a), dim, out[1], g_values), None, None, None, None)


# indexing prims (ops A)
def _check_index(name: str, index: TensorProxy) -> None:
    _check(
        isinstance(index, TensorProxy) and dtypes.is_integer(index.dtype),
        lambda: f"prims.{name} needs an integer index tensor, got {index!r}",
    )


def _scatter_meta(a: TensorProxy, dim: int, index: TensorProxy, src: Any) -> TensorProxy:
    _check_index("scatter", index)
    _dim_meta_check("scatter", a, dim)
    _check(
        index.ndim == a.ndim or index.numel() == 0, lambda: "prims.scatter: index and input differ in ndim"
    )
    if isinstance(src, TensorProxy):
        _check(src.dtype is a.dtype, lambda: f"prims.scatter: src is {src.dtype}, input is {a.dtype}")
        requires_grad = a.requires_grad or src.requires_grad
    else:
        requires_grad = a.requires_grad
    return a.replace(requires_grad=requires_grad)


scatter = make_prim("scatter", _scatter_meta)  # src: a tensor or a number
scatter_add = make_prim("scatter_add", _scatter_meta)


def _scatter_reduce_meta(
    a: TensorProxy, dim: int, index: TensorProxy, src: TensorProxy, reduce: str, include_self: bool
) -> TensorProxy:
    _check(reduce in ("sum", "prod", "mean", "amax", "amin"), lambda: f"unknown scatter reduction {reduce!r}")
    return _scatter_meta(a, dim, index, src)


scatter_reduce = make_prim("scatter_reduce", _scatter_reduce_meta)


def _gather_pad(g: TensorProxy, src: TensorProxy) -> TensorProxy:
    """``g`` (shaped like an index) zero-padded at the end to the shape of ``src``."""
    if g.shape == src.shape:
        return g
    config = [(0, s - i, 0) for s, i in zip(src.shape, g.shape)]
    return pad(g, 0.0 if g.dtype.is_floating_point or g.dtype.is_complex else 0, config)


def _gather(g: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    """``torch.gather``: the other dims of ``g`` are cut to the index's extent first."""
    if g.shape[:dim] + g.shape[dim + 1 :] != index.shape[:dim] + index.shape[dim + 1 :]:
        end = [i if d != dim else s for d, (i, s) in enumerate(zip(index.shape, g.shape))]
        g = slice_prim(g, [0] * g.ndim, end, [1] * g.ndim)
    return take_along_axis(g, index, dim)


def _src_grad(g: Any, dim: int, index: TensorProxy, src: Any) -> Any:
    if not isinstance(src, TensorProxy):
        return None
    if src.ndim == 0:
        return reshape(_gather(g, dim, index), ()) if g.ndim else g
    return _gather_pad(_gather(g, dim, index), src)


@register_vjp(scatter_add)
def _scatter_add_vjp(g: Any, a: Any, dim: int, index: Any, src: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (g, None, None, _src_grad(g, dim, index, src))


@register_vjp(scatter)
def _scatter_vjp(g: Any, a: Any, dim: int, index: Any, src: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (scatter(g, dim, index, 0.0), None, None, _src_grad(g, dim, index, src))


@register_vjp(scatter_reduce)
def _scatter_reduce_vjp(
    g: Any, a: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool, *, out: Any
) -> tuple:
    if g is None:
        return (None,) * 6
    if reduce == "prod":
        raise NotImplementedError("the derivative of scatter_reduce with reduce='prod' is not implemented")
    if reduce == "sum":
        grad_a = g if include_self else scatter(g, dim, index, 0.0)
        return (grad_a, None, None, _src_grad(g, dim, index, src), None, None)
    # mean and amax/amin: each contributor gets its share of the cotangent of its output element
    used = src if src.shape == index.shape else slice_prim(src, [0] * src.ndim, index.shape, [1] * src.ndim)
    indexed = scatter(full(a.shape, 0.0, device=a.device, dtype=g.dtype), dim, index, 1.0)
    not_indexed = eq(indexed, 0.0)
    if reduce == "mean":
        from_self = convert_element_type(where(not_indexed, 1.0, 1.0 if include_self else 0.0), g.dtype)
        counts = scatter_add(from_self, dim, index, full(index.shape, 1.0, device=a.device, dtype=g.dtype))
        share = div(g, counts)
        grad_a = where(not_indexed, g, share if include_self else 0.0)
        return (grad_a, None, None, _gather_pad(_gather(share, dim, index), src), None, None)
    self_wins = eq(a, out)
    if not include_self:
        self_wins = bitwise_and(self_wins, not_indexed)
    src_wins = eq(used, _gather(out, dim, index))
    counts = scatter_add(
        convert_element_type(self_wins, g.dtype), dim, index, convert_element_type(src_wins, g.dtype)
    )
    share = div(g, where(eq(counts, 0.0), 1.0, counts))
    grad_a = where(self_wins, share, 0.0)
    grad_src = where(src_wins, _gather(share, dim, index), 0.0)
    return (grad_a, None, None, _gather_pad(grad_src, src), None, None)


@register_vjp(take_along_axis)
def _take_along_axis_vjp(g: Any, a: Any, index: Any, dim: int, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    return (scatter_add(_zeros_like_grad(a, g), dim, index, g), None, None)


def _zeros_like_grad(a: TensorProxy, g: TensorProxy) -> TensorProxy:
    return full(a.shape, 0, device=a.device, dtype=g.dtype)


def _index_select_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    """``torch.index_select``: the slices of ``a`` along ``dim`` at a 1-d (or 0-d) ``index``."""
    _check_index("take", index)
    _check(index.ndim <= 1, lambda: "prims.take needs a 0-d or 1-d index")
    _dim_meta_check("take", a, dim)
    if a.ndim == 0:
        return a.replace(shape=())
    return a.replace(shape=a.shape[:dim] + (index.numel(),) + a.shape[dim + 1 :])


take = make_prim("take", _index_select_meta)


def _index_update_meta(a: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
    _check_index("index_add", index)
    _dim_meta_check("index_add", a, dim)
    _check(source.dtype is a.dtype, lambda: f"source is {source.dtype}, input is {a.dtype}")
    return a.replace(requires_grad=a.requires_grad or source.requires_grad)


index_add = make_prim("index_add", _index_update_meta)
index_copy = make_prim("index_copy", _index_update_meta)


def _source_grad(g: TensorProxy, dim: int, index: TensorProxy, source: TensorProxy) -> TensorProxy:
    selected = take(g, index, dim)
    return reshape(selected, source.shape) if selected.shape != source.shape else selected


@register_vjp(take)
def _take_vjp(g: Any, a: Any, index: Any, dim: int, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None)
    if a.ndim == 0:
        return (reshape(g, ()) if g.ndim else g, None, None)
    source = reshape(g, a.shape[:dim] + (index.numel(),) + a.shape[dim + 1 :])
    return (index_add(_zeros_like_grad(a, g), dim, reshape(index, (index.numel(),)), source), None, None)


@register_vjp(index_add)
def _index_add_vjp(g: Any, a: Any, dim: int, index: Any, source: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    return (g, None, None, _source_grad(g, dim, index, source))


@register_vjp(index_copy)
def _index_copy_vjp(g: Any, a: Any, dim: int, index: Any, source: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    cleared = index_copy(g, dim, index, full(source.shape, 0, device=g.device, dtype=g.dtype))
    return (cleared, None, None, _source_grad(g, dim, index, source))


def _meta_tensor(a: TensorProxy) -> Any:
    import torch

    return torch.empty(a.shape, dtype=a.dtype.torch_dtype, device="meta")


def _index_meta(a: TensorProxy, indices: Sequence[TensorProxy | None]) -> TensorProxy:
    """Advanced indexing (``aten.index``): one integer tensor or None per leading dim of ``a``."""
    import torch

    for index in indices:
        if index is not None:
            _check_index("index", index)
    _check(any(i is not None for i in indices), lambda: "prims.index needs at least one index tensor")
    meta_indices = [None if i is None else _meta_tensor(i) for i in indices]
    shape = torch.ops.aten.index.Tensor(_meta_tensor(a), meta_indices).shape
    return a.replace(shape=tuple(shape))


index = make_prim("index", _index_meta)


def _index_put_meta(
    a: TensorProxy, indices: Sequence[TensorProxy | None], values: TensorProxy, accumulate: bool
) -> TensorProxy:
    indexed = _index_meta(a, indices)
    _check(values.dtype is a.dtype, lambda: f"prims.index_put: values are {values.dtype}, input is {a.dtype}")
    from thunder.core.promotion import broadcast_shapes

    _check(
        broadcast_shapes(values.shape, indexed.shape) == indexed.shape,
        lambda: f"prims.index_put: values of shape {values.shape} do not broadcast to {indexed.shape}",
    )
    return a.replace(requires_grad=a.requires_grad or values.requires_grad)


index_put = make_prim("index_put", _index_put_meta)


@register_vjp(index)
def _index_vjp(g: Any, a: Any, indices: Any, *, out: Any) -> tuple:
    if g is None:
        return (None, None)
    return (index_put(_zeros_like_grad(a, g), indices, g, True), None)


@register_vjp(index_put)
def _index_put_vjp(g: Any, a: Any, indices: Any, values: Any, accumulate: bool, *, out: Any) -> tuple:
    if g is None:
        return (None, None, None, None)
    grad_a = g if accumulate else index_put(g, indices, full((), 0, device=g.device, dtype=g.dtype), False)
    selected = index(g, indices)
    if selected.shape != values.shape:
        offset = selected.ndim - values.ndim
        summed = list(range(offset)) + [
            offset + d for d, size in enumerate(values.shape) if size == 1 and selected.shape[offset + d] != 1
        ]
        selected = reshape(sum(selected, summed), values.shape)
    return (grad_a, None, selected, None)


# creation prims (ops A)
def _iota_meta(length: int, *, start: Number, step: Number, device: Any, dtype: Any) -> TensorProxy:
    """``start + step * arange(length)`` in ``dtype``."""
    _check(length >= 0, lambda: f"prims.iota: negative length {length}")
    return TensorProxy(shape=(length,), dtype=dtype, device=devices.to_device(device))


iota = make_prim("iota", _iota_meta)


def _normal_meta(shape: Sequence[int], mean: float, std: float, *, device: Any, dtype: Any) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


normal = make_prim("normal", _normal_meta, tags=RANDOM)


def _randint_meta(shape: Sequence[int], low: int, high: int, *, device: Any, dtype: Any) -> TensorProxy:
    _check(
        low < high, lambda: f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
    )
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


randint = make_prim("randint", _randint_meta, tags=RANDOM)


def _tensor_from_sequence_meta(data: Any, *, device: Any, dtype: Any) -> TensorProxy:
    """A tensor holding ``data``, nested lists of Python numbers (a constant of the program)."""
    import torch

    shape = torch.tensor(data, dtype=dtypes.to_dtype(dtype).torch_dtype, device="meta").shape
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


tensor_from_sequence = make_prim("tensor_from_sequence", _tensor_from_sequence_meta)
register_vjp(iota, normal, randint, tensor_from_sequence)(_zero_gradient)


# convolution prims (ops B: torch.nn.functional)
def _convolution_output_size(
    size: int, kernel: int, stride: int, padding: int, dilation: int, transposed: bool, output_padding: int
) -> int:
    if transposed:
        return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _convolution_meta(
    a: TensorProxy,
    weight: TensorProxy,
    bias: TensorProxy | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> TensorProxy:
    """aten.convolution over a batched input (N, C, *spatial); every per-dim argument is explicit.

    The weight is (C_out, C_in / groups, *kernel), or (C_in, C_out / groups, *kernel) when transposed.
    """
    spatial = a.ndim - 2
    _check(
        spatial >= 1 and weight.ndim == a.ndim, lambda: f"convolution of {a.shape} with weight {weight.shape}"
    )
    _check(a.dtype is weight.dtype, lambda: f"convolution: input is {a.dtype} and weight is {weight.dtype}")
    for name, values in (
        ("stride", stride),
        ("padding", padding),
        ("dilation", dilation),
        ("output_padding", output_padding),
    ):
        _check(len(values) == spatial, lambda: f"convolution: {name} needs {spatial} values, got {values}")
    _check(
        builtins.min(stride) > 0 and builtins.min(dilation) > 0,
        lambda: "convolution: stride and dilation must be positive",
    )
    _check(
        builtins.min(padding) >= 0 and builtins.min(output_padding) >= 0,
        lambda: "convolution: negative padding",
    )
    _check(groups > 0, lambda: "convolution: non-positive groups is not supported")
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    _check(
        a.shape[1] == in_channels,
        lambda: (
            f"convolution: input {a.shape} has {a.shape[1]} channels, weight {weight.shape} expects {in_channels}"
        ),
    )
    _check(
        weight.shape[0] % groups == 0,
        lambda: f"convolution: weight {weight.shape} is not divisible into {groups} groups",
    )
    if transposed:
        for op, s, d in zip(output_padding, stride, dilation):
            _check(
                op < builtins.max(s, d),
                lambda: "convolution: output padding must be smaller than either stride or dilation",
            )
    if bias is not None:
        _check(
            bias.shape == (out_channels,),
            lambda: f"convolution: bias {bias.shape} for {out_channels} output channels",
        )
        _check(bias.dtype is a.dtype, lambda: f"convolution: bias is {bias.dtype} and input is {a.dtype}")
    shape = [a.shape[0], out_channels]
    for d in range(spatial):
        size = _convolution_output_size(
            a.shape[d + 2],
            weight.shape[d + 2],
            stride[d],
            padding[d],
            dilation[d],
            transposed,
            output_padding[d],
        )
        _check(
            size > 0 or a.shape[d + 2] == 0,
            lambda: f"convolution: the output of {a.shape} with kernel {weight.shape} would be empty",
        )
        shape.append(builtins.max(size, 0))
    requires_grad = a.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    return a.replace(shape=tuple(shape), requires_grad=requires_grad)


convolution = make_prim("convolution", _convolution_meta)


@register_vjp(convolution)
def _convolution_vjp(
    g: Any, a: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
    output_padding: Any, groups: int, *, out: Any,
) -> tuple:  # fmt: skip
    if g is None:
        return (None,) * 9
    kernel = weight.shape[2:]
    if transposed:
        # a transposed convolution is the adjoint of the convolution from its output to its input;
        # with output_padding >= stride that convolution reaches past the input: cut it back
        grad_a = convolution(g, weight, None, stride, padding, dilation, False, [0] * len(kernel), groups)
        if grad_a.shape != a.shape:
            grad_a = slice_prim(grad_a, [0] * a.ndim, list(a.shape), [1] * a.ndim)
        grad_weight = _convolution_weight_grad(g, a, kernel, stride, padding, dilation, groups)
    else:
        adjoint_padding = [
            size - _convolution_output_size(o, k, s, p, d, True, 0)
            for size, o, k, s, p, d in zip(a.shape[2:], g.shape[2:], kernel, stride, padding, dilation)
        ]
        grad_a = convolution(g, weight, None, stride, padding, dilation, True, adjoint_padding, groups)
        grad_weight = _convolution_weight_grad(a, g, kernel, stride, padding, dilation, groups)
    grad_bias = None
    if bias is not None:
        grad_bias = sum(g, [0] + list(range(2, g.ndim)))
    return (grad_a, grad_weight, grad_bias, None, None, None, None, None, None)


def _convolution_weight_grad(
    a: TensorProxy, g: TensorProxy, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
    dilation: Sequence[int], groups: int,
) -> TensorProxy:  # fmt: skip
    """d(conv(a, w))/dw applied to ``g``: itself a convolution of ``a`` (batch as channels) by ``g``,
    with stride and dilation swapped, cut to the kernel's size."""
    n, channels = a.shape[0], a.shape[1]
    out_channels = g.shape[1]
    spatial = list(range(3, a.ndim + 1))
    per_group_in, per_group_out = channels // groups, out_channels // groups
    # (C_in/G, G*N, *spatial): each group's input channels see that group's N batch entries
    lhs = reshape(a, (n, groups, per_group_in, *a.shape[2:]))
    lhs = reshape(transpose(lhs, [2, 1, 0, *spatial]), (per_group_in, groups * n, *a.shape[2:]))
    # (G*C_out/G, N, *out_spatial)
    rhs = reshape(g, (n, groups, per_group_out, *g.shape[2:]))
    rhs = reshape(transpose(rhs, [1, 2, 0, *spatial]), (out_channels, n, *g.shape[2:]))
    full = convolution(lhs, rhs, None, dilation, padding, stride, False, [0] * len(kernel), groups)
    cut = full
    if tuple(full.shape[2:]) != tuple(kernel):
        cut = slice_prim(full, [0] * full.ndim, [full.shape[0], full.shape[1], *kernel], [1] * full.ndim)
    return transpose(cut, [1, 0, *range(2, full.ndim)])


def _device_put_meta(a: TensorProxy, device: Any) -> TensorProxy:
    return a.replace(device=devices.to_device(device))


device_put = make_prim("device_put", _device_put_meta)
register_vjp(device_put)(lambda g, a, device, *, out: (None if g is None else device_put(g, a.device), None))


# running extrema (ops A): values and the index each came from
def _cumulative_extremum_meta(a: TensorProxy, dim: int) -> tuple[TensorProxy, TensorProxy]:
    _dim_meta_check("cummax", a, dim)
    return a.replace(), a.replace(dtype=dtypes.int64, requires_grad=False)


cummax = make_prim("cummax", _cumulative_extremum_meta, tags=REDUCTION)
cummin = make_prim("cummin", _cumulative_extremum_meta, tags=REDUCTION)


@register_vjp(cummax, cummin)
def _cumulative_extremum_vjp(g: Any, a: Any, dim: int, *, out: Any) -> tuple:
    g_values = g[0] if g is not None else None
    if g_values is None:
        return (None, None)
    if a.ndim == 0:
        return (g_values, None)
    return (scatter_add(_zeros_like_grad(a, g_values), dim, out[1], g_values), None)
