"""``rms_norm_linears``: an RMS norm of one input and the linear maps that read its result, as one symbol.

``rms_norm_linears(x, g, eps, (w0, w1), (b0, b1))`` is ``linears(rms_norm(x), (w0, w1), (b0, b1))``
with the norm written as Hugging Face writes it (``style``, below), op for op, so an executor without
a kernel for the whole runs exactly eager's ops. In a decode step the norm's one row feeds only the
projections after it (q/k/v; gate/up; the head); an executor that claims the symbol computes the
norm inside its matrix-vector kernel (``thunder/executors/triton/gemv.py``) and the norm's own
kernel and the normalized row's round trip through memory disappear. The transform that makes it
(``core/transforms/fold_rms_norms.py``) runs only when an executor in the list claims it.

Styles, with ``r = x.float() * rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)``:

- ``"llama"`` (Llama, Mistral, Qwen, Phi-3): ``g * r.to(x.dtype)``;
- ``"gemma"`` (Gemma 1-3): ``(r * (1.0 + g.float())).to(x.dtype)``.

With ``addend``, the norm reads ``x + addend`` (a residual connection's sum), which comes last in
the result: a kernel that adds the rows itself saves the add's kernel too.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_composite
from thunder.torch import elementwise as ew
from thunder.torch import reductions
from thunder.torch.grouped_linear import linears
from thunder.torch.utils import to_dtype

__all__ = ["rms_norm_linears", "RMS_NORM_STYLES"]

RMS_NORM_STYLES = ("llama", "gemma")


def rms_normalized(x: TensorProxy, norm_weight: TensorProxy, eps: float, style: str) -> TensorProxy:
    """The norm of ``rms_norm_linears``, as Hugging Face's ``style`` computes it."""
    if style not in RMS_NORM_STYLES:
        raise ValueError(f"rms_norm_linears' style is one of {RMS_NORM_STYLES}, got {style!r}")
    h = to_dtype(x, dtypes.float32)
    variance = reductions.mean(ew.pow(h, 2), -1, keepdim=True)
    h = ew.mul(h, ew.rsqrt(ew.add(variance, eps)))
    if style == "gemma":
        return to_dtype(ew.mul(h, ew.add(1.0, to_dtype(norm_weight, dtypes.float32))), x.dtype)
    return ew.mul(norm_weight, to_dtype(h, x.dtype))


def _rms_norm_linears(
    x: TensorProxy,
    norm_weight: TensorProxy,
    eps: float,
    weights: Sequence[TensorProxy],
    biases: Sequence[TensorProxy | None],
    style: str = "llama",
    addend: TensorProxy | None = None,
) -> tuple[TensorProxy, ...]:
    if addend is None:
        return linears(rms_normalized(x, norm_weight, eps, style), weights, biases)
    total = ew.add(x, addend)
    return (*linears(rms_normalized(total, norm_weight, eps, style), weights, biases), total)


rms_norm_linears = make_composite("rms_norm_linears", _rms_norm_linears)
