"""Prims for more elementwise math: special functions, shifts, gcd/lcm; each with its gradient rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from thunder.core import dtypes
from thunder.core.gradients import register_vjp
from thunder.core.prims.core import (
    _binary_vjp,
    _elementwise,
    _unary_vjp,
    _zero_gradient,
    add,
    bitwise_or,
    div,
    eq,
    exp,
    gt,
    isnan,
    log,
    lt,
    mul,
    neg,
    reciprocal,
    rsqrt,
    sign,
    sub,
    where,
)
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol


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
