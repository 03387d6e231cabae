"""Gradient rules for the torch language's arithmetic on real floating-point tensors.

Without them autograd differentiates the decomposition: for half precision that is convert to
float32, the prim, convert back, and the same conversions again in the backward, four kernels
where eager runs one. With them ``add``/``sub``/``mul``/``div``/``neg`` stay single calls that the
torch executor runs as ``torch.add`` and so on, in the forward and in the backward, as eager does.
Calls with complex or integer tensors keep differentiating their decompositions.
"""

from __future__ import annotations

from typing import Any

from thunder.core import prims
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy
from thunder.torch import elementwise as ew
from thunder.torch import reductions
from thunder.torch.utils import to_dtype


def _real_floating(*args: Any, **kwargs: Any) -> bool:
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, TensorProxy)]
    return bool(tensors) and all(t.dtype.is_floating_point and not t.dtype.is_complex for t in tensors)


def _gradient_for(g: Any, like: Any) -> TensorProxy | None:
    """``g`` summed over the dims ``like`` was broadcast along, in ``like``'s dtype (None for numbers)."""
    if not isinstance(like, TensorProxy) or g is None:
        return None
    if g.shape != like.shape:
        leading = g.ndim - like.ndim
        dims = list(range(leading)) + [
            leading + d for d, size in enumerate(like.shape) if size == 1 and g.shape[leading + d] != 1
        ]
        if dims:
            g = reductions.sum(g, dims)
        g = prims.reshape(g, like.shape)
    return to_dtype(g, like.dtype)


def _scaled(g: Any, alpha: Any) -> Any:
    return g if alpha is None or alpha == 1 else ew.mul(g, alpha)


@register_vjp(ew.add, applies=_real_floating)
def _add_vjp(g: Any, a: Any, b: Any, *, out: TensorProxy, alpha: Any = None) -> tuple:
    return _gradient_for(g, a), _gradient_for(_scaled(g, alpha), b)


@register_vjp(ew.sub, applies=_real_floating)
def _sub_vjp(g: Any, a: Any, b: Any, *, out: TensorProxy, alpha: Any = None) -> tuple:
    minus = None if not isinstance(b, TensorProxy) or g is None else ew.neg(_scaled(g, alpha))
    return _gradient_for(g, a), _gradient_for(minus, b)


@register_vjp(ew.mul, applies=_real_floating)
def _mul_vjp(g: Any, a: Any, b: Any, *, out: TensorProxy) -> tuple:
    grad_a = ew.mul(g, b) if isinstance(a, TensorProxy) else None
    grad_b = ew.mul(g, a) if isinstance(b, TensorProxy) else None
    return _gradient_for(grad_a, a), _gradient_for(grad_b, b)


def _true_division(*args: Any, rounding_mode: Any = None, **kwargs: Any) -> bool:
    return rounding_mode is None and _real_floating(*args, **kwargs)


@register_vjp(ew.div, applies=_true_division)
def _div_vjp(g: Any, a: Any, b: Any, *, out: TensorProxy, rounding_mode: Any = None) -> tuple:
    grad_a = ew.true_divide(g, b) if isinstance(a, TensorProxy) else None
    grad_b = ew.neg(ew.true_divide(ew.mul(g, out), b)) if isinstance(b, TensorProxy) else None
    return _gradient_for(grad_a, a), _gradient_for(grad_b, b)


register_vjp(ew.true_divide, applies=_real_floating)(lambda g, a, b, *, out: _div_vjp(g, a, b, out=out))


@register_vjp(ew.neg, applies=_real_floating)
def _neg_vjp(g: Any, a: TensorProxy, *, out: TensorProxy) -> tuple:
    return (ew.neg(g),)
