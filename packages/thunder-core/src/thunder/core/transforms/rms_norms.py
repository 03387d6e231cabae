"""Hugging Face's RMS norm, written op for op, becomes one ``ltorch.rms_norm_with_rstd`` before autograd.

Llama, Mistral, Qwen and most Hugging Face decoders write their norm in Python (``x.float()``,
``pow(2)``, ``mean``, ``+ eps``, ``rsqrt``, two multiplications, ``.to(x.dtype)``; the matcher is
``rms_norm_pattern.py``). Differentiated op by op, its backward is some forty ops, which a fusion
executor compiles into one inner-outer persistent kernel: 1.9 to 3.2 s of nvFuser's compile for each
of the three such kernels of a 4-layer Llama's training step (H200), about half of a warm process's
first step. As one symbol it has one backward, ``ltorch.rms_norm_backward``, that the torch executor
runs as PyTorch's fused RMS-norm kernel on CUDA (no compile at all) and that elsewhere decomposes
into the math.

The forward computes what the user's ops compute: ``rms_norm_with_rstd(x, (d,), weight, eps,
"llama")`` decomposes into the same ops in the same order and dtypes, and also returns the
reciprocal root mean square the backward reads. Only the backward rounds differently where PyTorch's
kernel runs it: it computes ``grad * weight`` in float32, where eager's autograd rounds that product
to the input's dtype first.

Only norms whose intermediate values nothing else reads (identity conversions aside; else the
symbol would compute the norm a second time), with Llama's weighting; Gemma's ``1 + weight`` stays
op for op. Run only where the trace is differentiated (the symbol exists for its backward): before
the autograd split, and on the program so far at an inlined ``loss.backward()``
(``inline_backward.py``); inference keeps the ops for ``fold_rms_norms.py``.
"""

from __future__ import annotations

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.common import producers, readers, rename_outputs
from thunder.core.transforms.rms_norm_pattern import RmsNorm, match_rms_norm, removable_ops

__all__ = ["rms_norms_as_symbols"]

_LAST_OPS = frozenset({"ltorch.mul"})  # what makes a Llama-style norm's row


def rms_norms_as_symbols(trace: Trace) -> Trace:
    """``trace`` with each Llama-style RMS norm's row made by one ``rms_norm_with_rstd``, or ``trace``
    itself. The norm's other ops stay, unread: dead-code elimination drops them, and a program that
    reads one later (after an inlined ``loss.backward()``, where this runs on the program so far)
    still finds it."""
    made = producers(trace.bound_symbols)
    read_by = readers(trace.bound_symbols)
    new = from_trace(trace, "RMS norms as one symbol (transforms/rms_norms.py)")
    new.mutations = trace.mutations
    changed = False
    for bound_symbol in trace.bound_symbols:
        norm = _norm_made_by(bound_symbol, made, read_by)
        if norm is None:
            new.bound_symbols.append(bound_symbol)
            continue
        new.bound_symbols.extend(_as_symbol(new, norm, bound_symbol))
        changed = True
    return new if changed else trace


def _norm_made_by(
    bound_symbol: BoundSymbol, made: dict[str, BoundSymbol], read_by: dict[str, list[BoundSymbol]]
) -> RmsNorm | None:
    """The Llama-style norm whose row ``bound_symbol`` makes, when nothing else reads its intermediate
    values (else the symbol would compute the norm a second time) and its ops share one grad mode."""
    row = bound_symbol.output
    if bound_symbol.symbol.id not in _LAST_OPS or not isinstance(row, TensorProxy):
        return None
    norm = match_rms_norm(row, made)
    if norm is None or norm.style != "llama" or len({b.grad_enabled for b in norm.ops}) != 1:
        return None
    return norm if removable_ops(norm, row.name, read_by) is not None else None


def _as_symbol(new: Trace, norm: RmsNorm, last: BoundSymbol) -> list[BoundSymbol]:
    """The ``rms_norm_with_rstd`` bound symbol computing ``last``'s row, recorded in ``new``, in
    ``last``'s grad mode (the norm's ops are in one: ``x`` to the row, no ``no_grad`` between)."""
    from thunder.torch.normalization import rms_norm_with_rstd

    with tracectx(new), new.subscope() as scope:
        row, _ = rms_norm_with_rstd(norm.x, tuple(norm.weight.shape), norm.weight, norm.eps, "llama")
    made = [b.replace(grad_enabled=last.grad_enabled) for b in scope]
    return rename_outputs(made, row, last.output)
