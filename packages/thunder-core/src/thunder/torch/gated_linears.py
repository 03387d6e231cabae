"""``gated_linears``: a gated MLP's first half, ``silu(linear(x, gate)) * linear(x, up)``, as one symbol.

``gated_linears(x, wg, wu, bg, bu)`` is ``silu(g) * u`` for ``(g, u) = linears(x, (wg, wu), (bg, bu))``,
eager's ops one for one (Llama, Mistral, Qwen: ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``), so an
executor without a kernel for the whole runs exactly them. In a decode step an executor that claims
it computes a gate row and its up row in one program of one matrix-vector launch and writes only
the product (``thunder/executors/triton/gemv.py``'s ``gated_gemv``): the product's own kernel and the
round trip of both rows through memory disappear. The transform that makes it
(``core/transforms/fold_gated_linears.py``) runs only when an executor in the list claims it.
"""

from __future__ import annotations

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch.activations import silu
from thunder.torch.grouped_linear import linears

__all__ = ["gated_linears"]


def _gated_linears(
    x: TensorProxy,
    gate_weight: TensorProxy,
    up_weight: TensorProxy,
    gate_bias: TensorProxy | None = None,
    up_bias: TensorProxy | None = None,
) -> TensorProxy:
    gate, up = linears(x, (gate_weight, up_weight), (gate_bias, up_bias))
    return ew.mul(silu(gate), up)


gated_linears = make_composite("gated_linears", _gated_linears)
