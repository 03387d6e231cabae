"""The reflected operators called explicitly: ``x.__radd__(2)`` is ``2 + x``, as eager computes it.

Proxies' own ``__radd__`` (``2 + x`` in user code) records the forward symbol with swapped
operands; these symbols stand for ``torch.Tensor.__radd__`` and friends when a program or
the OpInfo database calls them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.torch import elementwise as ew
from thunder.torch.nn import matmul
from thunder.torch.pointwise import rsub
from thunder.torch.registry import alias, torchsymbol

ELEMENTWISE = frozenset({"elementwise"})


def _reflected(
    dunder: str,
    forward: Callable[[Any, Any], Any],
    *,
    name: str | None = None,
    tags: frozenset[str] = ELEMENTWISE,
) -> Symbol:
    """The symbol for ``torch.Tensor.__<dunder>__``, printed as ``ltorch.<name>`` (``dunder`` by default)."""

    def op(a: TensorProxy, other: Any) -> Any:
        return forward(other, a)

    op.__name__ = op.__qualname__ = name or dunder
    return torchsymbol(getattr(torch.Tensor, f"__{dunder}__"), tags=tags)(op)


radd = _reflected("radd", ew.add)
rmul = _reflected("rmul", ew.mul)
rmod = _reflected("rmod", ew.remainder)
rpow = _reflected("rpow", ew.pow)
rfloordiv = _reflected("rfloordiv", ew.floor_divide)
rmatmul = _reflected("rmatmul", matmul, tags=frozenset())
# not ``rand``: that name is the random factory's
rbitwise_and = _reflected("rand", ew.bitwise_and, name="rbitwise_and")
rbitwise_or = _reflected("ror", ew.bitwise_or, name="rbitwise_or")
rbitwise_xor = _reflected("rxor", ew.bitwise_xor, name="rbitwise_xor")


@torchsymbol(torch.Tensor.__rdiv__, torch.Tensor.__rtruediv__, tags=ELEMENTWISE)
def rdiv(a: TensorProxy, other: Any) -> Any:
    """Eager computes ``other / a`` as ``a.reciprocal() * other``: so does this, rounding the same."""
    return ew.mul(ew.reciprocal(a), other)


alias(torch.Tensor.__rsub__, rsub)
