"""Special functions: ``torch.special`` and its ``torch`` spellings (lgamma, digamma, erfinv, i0, ...)."""

from __future__ import annotations

import math
from typing import Any

import torch
from thunder.core import dtypes, prims
from thunder.core.promotion import PromotionKind, elementwise_dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch.elementwise import apply_elementwise
from thunder.torch.registry import alias, torchsymbol
from thunder.torch.utils import broadcast, check_some_tensor, to_dtype

ELEMENTWISE = frozenset({"elementwise"})
DEFAULT, INT_TO_FLOAT = PromotionKind.DEFAULT, PromotionKind.INT_TO_FLOAT


def _real_only(name: str, *args: Any) -> None:
    if any(isinstance(a, TensorProxy) and a.dtype.is_complex for a in args):
        raise NotImplementedError(f"thunder does not support {name} of complex tensors yet")


def _torch_fns(name: str, special_name: str | None) -> tuple[Any, ...]:
    """The torch callables an op is spelled as: ``torch.special.<name>`` (first if it is the only
    one printable), ``torch.<name>`` and ``torch.Tensor.<name>``."""
    fns = [getattr(torch, name, None), getattr(torch.Tensor, name, None)]
    if special_name is not None:
        fns.append(getattr(torch.special, special_name))
    return tuple(f for f in fns if f is not None)


def _special(
    name: str, prim: Symbol, arity: int, kind: PromotionKind, special_name: str | None = None
) -> Symbol:
    def op(*args: Any) -> Any:
        _real_only(name, *args)
        return apply_elementwise(prim, *args, kind=kind)

    op.__name__ = name
    fns = _torch_fns(name, special_name)
    return torchsymbol(*fns, method=name if hasattr(torch.Tensor, name) else (), name=name, tags=ELEMENTWISE)(
        op
    )


lgamma = _special("lgamma", prims.lgamma, 1, INT_TO_FLOAT, "gammaln")
digamma = _special("digamma", prims.digamma, 1, INT_TO_FLOAT, "digamma")
erfinv = _special("erfinv", prims.erfinv, 1, INT_TO_FLOAT, "erfinv")
i0 = _special("i0", prims.i0, 1, INT_TO_FLOAT, "i0")
i0e = _special("i0e", prims.i0e, 1, INT_TO_FLOAT, "i0e")
i1 = _special("i1", prims.i1, 1, INT_TO_FLOAT, "i1")
i1e = _special("i1e", prims.i1e, 1, INT_TO_FLOAT, "i1e")
ndtri = _special("ndtri", prims.ndtri, 1, INT_TO_FLOAT, "ndtri")
log_ndtr = _special("log_ndtr", prims.log_ndtr, 1, INT_TO_FLOAT, "log_ndtr")
erfcx = _special("erfcx", prims.erfcx, 1, INT_TO_FLOAT, "erfcx")
igamma = _special("igamma", prims.igamma, 2, DEFAULT, "gammainc")
igammac = _special("igammac", prims.igammac, 2, DEFAULT, "gammaincc")
zeta = _special("zeta", prims.zeta, 2, INT_TO_FLOAT, "zeta")
for _name in prims.SPECIAL_UNARY_NO_GRAD:
    globals()[_name] = _special(_name, getattr(prims, _name), 1, INT_TO_FLOAT, _name)
for _name in prims.SPECIAL_BINARY_NO_GRAD:  # the orthogonal polynomials p(x, n)
    globals()[_name] = _special(_name, getattr(prims, _name), 2, DEFAULT, _name)
# The names the two loops above bind through globals(), declared for the type checker, which cannot
# see them (thunder.torch imports them).
airy_ai: Symbol
bessel_j0: Symbol
bessel_j1: Symbol
bessel_y0: Symbol
bessel_y1: Symbol
modified_bessel_i0: Symbol
modified_bessel_i1: Symbol
modified_bessel_k0: Symbol
modified_bessel_k1: Symbol
scaled_modified_bessel_k0: Symbol
scaled_modified_bessel_k1: Symbol
spherical_bessel_j0: Symbol
chebyshev_polynomial_t: Symbol
chebyshev_polynomial_u: Symbol
chebyshev_polynomial_v: Symbol
chebyshev_polynomial_w: Symbol
shifted_chebyshev_polynomial_t: Symbol
shifted_chebyshev_polynomial_u: Symbol
shifted_chebyshev_polynomial_v: Symbol
shifted_chebyshev_polynomial_w: Symbol
hermite_polynomial_h: Symbol
hermite_polynomial_he: Symbol
laguerre_polynomial_l: Symbol
legendre_polynomial_p: Symbol
alias(torch.special.psi, digamma)


@torchsymbol(torch.polygamma, torch.special.polygamma, tags=ELEMENTWISE)
def polygamma(n: int, input: TensorProxy) -> TensorProxy:
    _real_only("polygamma", input)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    computation_dtype, result_dtype = elementwise_dtypes(input, kind=INT_TO_FLOAT)
    return to_dtype(prims.polygamma(n, to_dtype(input, computation_dtype)), result_dtype)


@torchsymbol(torch.Tensor.polygamma, method="polygamma", name="tensor_polygamma", tags=ELEMENTWISE)
def tensor_polygamma(a: TensorProxy, n: int) -> TensorProxy:
    """``a.polygamma(n)``: the tensor comes first, unlike ``torch.polygamma(n, a)``."""
    return polygamma(n, a)


@torchsymbol(
    torch.mvlgamma, torch.Tensor.mvlgamma, torch.special.multigammaln, method="mvlgamma", tags=ELEMENTWISE
)
def mvlgamma(input: TensorProxy, p: int) -> TensorProxy:
    _real_only("mvlgamma", input)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    computation_dtype, result_dtype = elementwise_dtypes(input, kind=INT_TO_FLOAT)
    x = to_dtype(input, computation_dtype)
    total = prims.lgamma(x)
    for j in range(1, p):
        total = prims.add(total, prims.lgamma(prims.sub(x, j / 2)))
    total = prims.add(total, p * (p - 1) / 4 * math.log(math.pi))
    # Eager raises when an element is at most (p - 1) / 2, which a trace cannot check: NaN there.
    total = prims.where(prims.gt(x, (p - 1) / 2), total, math.nan)
    return to_dtype(total, result_dtype)


def _float_inputs(*args: Any) -> tuple[list[Any], dtypes.dtype, dtypes.dtype]:
    computation_dtype, result_dtype = elementwise_dtypes(*args, kind=INT_TO_FLOAT)
    return [to_dtype(a, computation_dtype) for a in broadcast(*args)], computation_dtype, result_dtype


def _x_log(name: str, log_prim: Symbol) -> Any:
    def op(input: Any, other: Any) -> Any:
        check_some_tensor(name, input, other)
        _real_only(name, input, other)
        (x, y), _, result_dtype = _float_inputs(input, other)
        like = x if isinstance(x, TensorProxy) else y
        x, y = (v if isinstance(v, TensorProxy) else prims.full(like.shape, v, device=like.device, dtype=like.dtype)
                for v in (x, y))  # fmt: skip
        result = prims.where(prims.eq(x, 0.0), 0.0, prims.mul(x, log_prim(y)))
        return to_dtype(prims.where(prims.isnan(y), math.nan, result), result_dtype)

    op.__name__ = name
    return op


xlogy = torchsymbol(torch.xlogy, torch.Tensor.xlogy, torch.special.xlogy, method="xlogy", tags=ELEMENTWISE)(
    _x_log("xlogy", prims.log)
)
xlog1py = torchsymbol(torch.special.xlog1py, name="xlog1py", tags=ELEMENTWISE)(_x_log("xlog1py", prims.log1p))


@torchsymbol(torch.special.entr, tags=ELEMENTWISE)
def entr(input: TensorProxy) -> TensorProxy:
    _real_only("entr", input)
    (x,), _, result_dtype = _float_inputs(input)
    positive = prims.neg(prims.mul(x, prims.log(x)))
    result = prims.where(prims.gt(x, 0.0), positive, prims.where(prims.eq(x, 0.0), 0.0, -math.inf))
    return to_dtype(prims.where(prims.isnan(x), x, result), result_dtype)


@torchsymbol(torch.logit, torch.Tensor.logit, torch.special.logit, method="logit", tags=ELEMENTWISE)
def logit(input: TensorProxy, eps: float | None = None) -> TensorProxy:
    _real_only("logit", input)
    (x,), _, result_dtype = _float_inputs(input)
    if eps is not None:
        x = prims.where(prims.lt(x, eps), eps, prims.where(prims.gt(x, 1.0 - eps), 1.0 - eps, x))
    return to_dtype(prims.log(prims.div(x, prims.sub(1.0, x))), result_dtype)


@torchsymbol(torch.sinc, torch.Tensor.sinc, torch.special.sinc, method="sinc", tags=ELEMENTWISE)
def sinc(input: TensorProxy) -> TensorProxy:
    _real_only("sinc", input)
    (x,), _, result_dtype = _float_inputs(input)
    scaled = prims.mul(x, math.pi)
    return to_dtype(prims.where(prims.eq(x, 0.0), 1.0, prims.div(prims.sin(scaled), scaled)), result_dtype)


@torchsymbol(torch.special.ndtr, tags=ELEMENTWISE)
def ndtr(input: TensorProxy) -> TensorProxy:
    _real_only("ndtr", input)
    (x,), _, result_dtype = _float_inputs(input)
    return to_dtype(prims.mul(prims.erfc(prims.mul(x, -math.sqrt(0.5))), 0.5), result_dtype)
