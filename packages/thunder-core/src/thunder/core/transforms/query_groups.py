"""One-token attention over repeated key/value heads reads them unrepeated: query heads become rows.

A decode step of a grouped-query model (Llama, Mistral, Qwen) calls
``scaled_dot_product_attention(q, repeat_kv(k), repeat_kv(v), attn_mask=mask)`` with ``q`` of shape
``[B, H, 1, D]`` and the cache's ``[B, H / g, L, D]`` heads repeated ``g`` times (an unsqueeze, an
expand and a reshape: a copy of the whole cache per layer and token). The ``g`` query heads that
share a key/value head attend to the same keys and values, each with its own single row, so they
can be the ``g`` rows of one head: ``q`` as ``[B, H / g, g, D]`` attends to the unrepeated cache,
and the output ``[B, H / g, g, D]`` read as ``[B, H, 1, D]`` is the same. Each output row is the
same sum as before (a kernel may add it up in another order).

Only where that holds without more work, and with static sizes for these tensors (a trace may
have symbolic sizes or numbers elsewhere): one query row, no causal flag (with one row, ``is_causal``
masks by position, and rows would change it), no dropout, no ``enable_gqa`` already, and a mask
that is absent or broadcast over heads and rows (``[B or 1, 1, 1, L]``). Measured on an H200 for
TinyLlama's decode attention: 14.2 us -> 12.9 us per layer (8.9 us with ``attention_masks.py``).
"""

from __future__ import annotations

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.causal_attention import sdpa_arguments, unrepeated_heads
from thunder.core.transforms.common import producers, rename_outputs

__all__ = ["fold_query_groups"]

_SDPA = "ltorch.scaled_dot_product_attention"


def fold_query_groups(trace: Trace) -> Trace:
    """``trace`` with one-row attention over repeated heads on unrepeated heads, or ``trace`` itself."""
    made_by = producers(trace.bound_symbols)
    new = from_trace(trace, "Query groups as rows (transforms/query_groups.py)")
    new.mutations = trace.mutations
    changed = False
    for bound_symbol in trace.bound_symbols:
        grouped = _grouped_operands(bound_symbol, made_by) if bound_symbol.symbol.id == _SDPA else None
        if grouped is None:
            new.bound_symbols.append(bound_symbol)
            continue
        new.bound_symbols.extend(_folded_call(new, bound_symbol, *grouped))
        changed = True
    return new if changed else trace


def _grouped_operands(
    bound_symbol: BoundSymbol, producers: dict[str, BoundSymbol]
) -> tuple[dict, TensorProxy, TensorProxy] | None:
    arguments = sdpa_arguments(bound_symbol)
    if arguments is None or arguments["is_causal"] or arguments["enable_gqa"] or arguments["dropout_p"] != 0:
        return None
    query, key, value, mask = arguments["query"], arguments["key"], arguments["value"], arguments["attn_mask"]
    if (
        not all(isinstance(t, TensorProxy) and t.ndim == 4 for t in (query, key, value))
        or query.shape[2] != 1
    ):
        return None
    if mask is not None and not (
        isinstance(mask, TensorProxy) and mask.ndim == 4 and mask.shape[1:3] == (1, 1)
    ):
        return None
    if not _static(query, key, value, mask):
        return None  # a symbolic size: comparing it here would need a guard the prologue lacks
    key_source, value_source = unrepeated_heads(key, producers), unrepeated_heads(value, producers)
    if key_source is None or value_source is None or key_source.shape[1] != value_source.shape[1]:
        return None
    if query.shape[1] % key_source.shape[1]:
        return None
    return arguments, key_source, value_source


def _static(*tensors: TensorProxy | None) -> bool:
    return all(t is None or all(type(size) is int for size in t.shape) for t in tensors)


def _folded_call(
    new: Trace, bound_symbol: BoundSymbol, arguments: dict, key: TensorProxy, value: TensorProxy
) -> list:
    from thunder.torch.attention import scaled_dot_product_attention
    from thunder.torch.shape import reshape

    query = arguments["query"]
    batch, heads, _, width = query.shape
    kv_heads = key.shape[1]
    with tracectx(new), new.subscope() as scope:
        rows = reshape(query, (batch, kv_heads, heads // kv_heads, width))
        out = scaled_dot_product_attention(
            rows, key, value, attn_mask=arguments["attn_mask"], dropout_p=0.0, is_causal=False,
            scale=arguments["scale"],
        )  # fmt: skip
        out = reshape(out, (batch, heads, 1, value.shape[-1]))
    recorded = [b.replace(grad_enabled=bound_symbol.grad_enabled) for b in scope]
    return rename_outputs(recorded, out, bound_symbol.output)
