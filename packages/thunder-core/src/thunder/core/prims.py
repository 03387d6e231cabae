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


def _convert_element_type_meta(a: TensorProxy, dtype: Any) -> TensorProxy:
    dtype = dtypes.to_dtype(dtype)
    return a.replace(
        dtype=dtype, requires_grad=a.requires_grad and (dtype.is_floating_point or dtype.is_complex)
    )


convert_element_type = make_prim("convert_element_type", _convert_element_type_meta, tags=ELEMENTWISE)


# creation and randomness
def _full_meta(shape: Sequence[int], fill_value: Number, *, device: Any, dtype: Any) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


full = make_prim("full", _full_meta)


def _uniform_meta(
    shape: Sequence[int], minval: float, maxval: float, *, device: Any, dtype: Any
) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=dtype, device=devices.to_device(device))


uniform = make_prim("uniform", _uniform_meta, tags=RANDOM)


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


def _reshape_meta(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    shape = tuple(shape)
    _check(a.numel() == math.prod(shape), lambda: f"cannot reshape {a.shape} to {shape}")
    return a.replace(shape=shape)


reshape = make_prim("reshape", _reshape_meta, tags=SHAPE)


def _transpose_meta(a: TensorProxy, permutation: Sequence[int]) -> TensorProxy:
    _check(
        sorted(permutation) == list(range(a.ndim)),
        lambda: f"{permutation} is not a permutation of {a.ndim} dims",
    )
    return a.replace(shape=tuple(a.shape[d] for d in permutation))


transpose = make_prim("transpose", _transpose_meta, tags=SHAPE)


def _slice_meta(
    a: TensorProxy, start: Sequence[int], end: Sequence[int], strides: Sequence[int]
) -> TensorProxy:
    shape = tuple(builtins.max(0, (e - s + st - 1) // st) for s, e, st in zip(start, end, strides))
    return a.replace(shape=shape)


slice_prim = make_prim("slice_prim", _slice_meta, tags=SHAPE)


def _cat_meta(tensors: Sequence[TensorProxy], dim: int) -> TensorProxy:
    first = tensors[0]
    size = builtins.sum(t.shape[dim] for t in tensors)
    shape = first.shape[:dim] + (size,) + first.shape[dim + 1 :]
    return first.replace(shape=shape, requires_grad=any(t.requires_grad for t in tensors))


cat = make_prim("cat", _cat_meta, tags=SHAPE)


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


def _var_meta(a: TensorProxy, dims: Sequence[int], *, correction: float) -> TensorProxy:
    real = (
        dtypes.float64 if a.dtype is dtypes.complex128 else dtypes.float32 if a.dtype.is_complex else a.dtype
    )
    return a.replace(shape=_reduced_shape(a, dims), dtype=real)


var = make_prim("var", _var_meta, tags=REDUCTION)


def _arg_reduction_meta(a: TensorProxy, dim: int | None) -> TensorProxy:
    shape = () if dim is None else _reduced_shape(a, (dim,))
    return a.replace(shape=shape, dtype=dtypes.int64, requires_grad=False)


argmax = make_prim("argmax", _arg_reduction_meta, tags=REDUCTION)
argmin = make_prim("argmin", _arg_reduction_meta, tags=REDUCTION)


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


def _linear_meta(a: TensorProxy, w: TensorProxy, bias: TensorProxy | None) -> TensorProxy:
    _check(
        a.shape[-1] == w.shape[-1], lambda: f"linear: input {a.shape} and weight {w.shape} differ in features"
    )
    _check(a.dtype is w.dtype, lambda: f"linear: input is {a.dtype} and weight is {w.dtype}")
    requires_grad = a.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad)
    return a.replace(shape=a.shape[:-1] + w.shape[:1], requires_grad=requires_grad)


linear = make_prim("linear", _linear_meta)


def _take_along_axis_meta(a: TensorProxy, index: TensorProxy, dim: int) -> TensorProxy:
    _check(index.ndim == a.ndim, lambda: "take_along_axis needs an index with as many dims as the input")
    return a.replace(shape=index.shape)


take_along_axis = make_prim("take_along_axis", _take_along_axis_meta)
