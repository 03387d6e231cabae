"""``linears``: several linear maps of one input, as one symbol.

``linears(x, (w0, w1), (b0, b1))`` is ``(linear(x, w0, b0), linear(x, w1, b1))``. A decode step's
query, key and value projections (and its gate and up projections) read the same activation row;
written as one symbol, an executor can run them as one kernel that streams all the weights
(``thunder/executors/triton/gemv.py``), where three launches each read one. The transform that
makes it (``core/transforms/group_linears.py``) runs only when an executor in the list claims it;
every other executor runs the decomposition, one linear per weight.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch.nn import linear

__all__ = ["linears"]


def _linears(
    x: TensorProxy, weights: Sequence[TensorProxy], biases: Sequence[TensorProxy | None]
) -> tuple[TensorProxy, ...]:
    return tuple(linear(x, weight, bias) for weight, bias in zip(weights, biases, strict=True))


linears = make_composite("linears", _linears)
