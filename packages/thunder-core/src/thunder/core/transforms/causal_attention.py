"""Attention with a mask that is causal by construction runs as ``is_causal=True``, on grouped heads.

Libraries build attention masks differently when a compiler traces them. transformers, seeing
``torch.compiler.is_compiling()`` (thunder answers True, as torch.compile does), never drops its
causal mask: every layer calls ``scaled_dot_product_attention(q, k, v, attn_mask=mask)`` with a
``[B, 1, S, S]`` boolean mask built from ``arange`` comparisons, and with the key and value heads
repeated for grouped-query attention (``repeat_kv``: an unsqueeze, an expand and a reshape). Eager
calls it with ``is_causal=True`` and ``enable_gqa=True`` instead, and PyTorch runs cuDNN's or flash
attention. With the mask, thunder ran the attention's math and its gradient in float32 (HF Llama's
training step on an H100: 2.4x eager's time).

This transform finds masks that no input of the program reaches: their value depends only on what
the cache entry is specialized to (shapes and constants), so it is computed once, here, with torch.
A boolean mask equal to the lower triangle of a square attention is replaced by ``is_causal=True``;
then key and value heads repeated per group are read unrepeated, with ``enable_gqa=True``. The mask
and the repeats, no longer read, are removed by dead-code elimination. Anything else is left as it
was.
"""

from __future__ import annotations

import inspect

import torch

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.symbolic_shapes import has_symbolic_arguments
from thunder.core.trace import Trace, from_trace, tracectx
from thunder.core.transforms.claim_executors import operator_callable
from thunder.core.transforms.common import rename_outputs

__all__ = ["use_causal_attention", "sdpa_arguments", "unrepeated_heads"]

_SDPA = "ltorch.scaled_dot_product_attention"
_MASK_SLICE_LIMIT = 64  # symbols computing a mask; a longer computation is left alone
_UNSQUEEZES = frozenset(
    {"ltorch.unsqueeze", "ltorch.reshape", "ltorch.view", "ltorch.getitem", "prims.reshape"}
)
_EXPANDS = frozenset({"ltorch.expand", "prims.broadcast_in_dim"})
_RESHAPES = frozenset({"ltorch.reshape", "ltorch.view", "prims.reshape"})


def use_causal_attention(trace: Trace) -> Trace:
    """``trace`` with constant causal masks of attention replaced by ``is_causal=True``.

    Returns ``trace`` itself when nothing changed.
    """
    producers: dict[str, BoundSymbol] = {}
    replaced: dict[int, list[BoundSymbol]] = {}
    new = from_trace(trace, "Causal attention (transforms/causal_attention.py)")
    new.mutations = trace.mutations
    for bound_symbol in trace.bound_symbols:
        if bound_symbol.symbol.id == _SDPA:
            arguments = _bind(bound_symbol)
            if arguments is not None and _is_constant_causal_mask(arguments, producers, trace):
                replaced[id(bound_symbol)] = _causal_call(new, bound_symbol, arguments, producers)
        inputs = {p.name for p in bound_symbol.proxy_args()}
        for proxy in bound_symbol.proxy_outputs():
            if proxy.name not in inputs:  # an identity (``.to`` of the same dtype) produces nothing
                producers[proxy.name] = bound_symbol
    if not replaced:
        return trace
    for bound_symbol in trace.bound_symbols:
        new.bound_symbols.extend(replaced.get(id(bound_symbol), [bound_symbol]))
    return new


def _bind(bound_symbol: BoundSymbol) -> dict | None:
    decomposition = bound_symbol.symbol.decomposition
    if decomposition is None:
        return None
    try:
        bound = inspect.signature(decomposition).bind(*bound_symbol.args, **bound_symbol.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _is_constant_causal_mask(arguments: dict, producers: dict[str, BoundSymbol], trace: Trace) -> bool:
    mask, query, key = arguments["attn_mask"], arguments["query"], arguments["key"]
    if not isinstance(mask, TensorProxy) or mask.dtype is not dtypes.bool8 or arguments["is_causal"]:
        return False
    if (
        query.ndim < 2
        or query.shape[-2] != key.shape[-2]
        or mask.shape[-2:] != (query.shape[-2], key.shape[-2])
    ):
        return False
    value = _constant_value(mask, producers, trace)
    if value is None:
        return False
    size = query.shape[-2]
    causal = torch.ones(size, size, dtype=torch.bool, device=value.device).tril()
    return torch.equal(value, causal.expand(value.shape))


def _constant_value(
    proxy: TensorProxy, producers: dict[str, BoundSymbol], trace: Trace
) -> torch.Tensor | None:
    """The value of ``proxy`` when no input of the program reaches it (computed now, with torch)."""
    computation: list[BoundSymbol] = []
    pending, seen = [proxy.name], {proxy.name}
    while pending:
        producer = producers.get(pending.pop())
        if producer is None:
            return None  # an input of the program (a tensor, or a number under symbolic values)
        if "random" in producer.symbol.tags or len(computation) == _MASK_SLICE_LIMIT:
            return None
        if has_symbolic_arguments(
            producer
        ):  # computed from a symbolic size: no constant (symbolic_shapes.py)
            return None
        computation.append(producer)
        for read in producer.proxy_args():
            if read.name not in seen:
                seen.add(read.name)
                pending.append(read.name)
    order = {id(b): i for i, b in enumerate(trace.bound_symbols)}
    computation = sorted(set(computation), key=lambda b: order[id(b)])
    return operator_callable("constant_mask", (), computation, proxy)()


def _causal_call(
    new: Trace, bound_symbol: BoundSymbol, arguments: dict, producers: dict[str, BoundSymbol]
) -> list[BoundSymbol]:
    """``scaled_dot_product_attention`` without the mask, causal, on unrepeated heads if it can."""
    from thunder.torch.attention import scaled_dot_product_attention

    query, key, value = arguments["query"], arguments["key"], arguments["value"]
    grouped_key, grouped_value = _unrepeated(key, producers), _unrepeated(value, producers)
    enable_gqa = arguments["enable_gqa"]
    if (
        grouped_key is not None
        and grouped_value is not None
        and grouped_key.shape[-3] == grouped_value.shape[-3]
    ):
        key, value, enable_gqa = grouped_key, grouped_value, True
    with tracectx(new), new.subscope() as scope:
        out = scaled_dot_product_attention(
            query,
            key,
            value,
            dropout_p=arguments["dropout_p"],
            is_causal=True,
            scale=arguments["scale"],
            enable_gqa=enable_gqa,
        )  # keywords, as torch's signature wants them (the trace prints this call)
    recorded = [b.replace(grad_enabled=bound_symbol.grad_enabled) for b in scope]
    return rename_outputs(recorded, out, bound_symbol.output)


def _unrepeated(repeated: TensorProxy, producers: dict[str, BoundSymbol]) -> TensorProxy | None:
    """``t`` when ``repeated`` is ``t``'s heads repeated per group (``[B, H, S, D]`` from ``[B, H / g, S, D]``
    by an unsqueeze at dim -4, an expand of it and a reshape), else None."""
    if repeated.ndim != 4:
        return None
    reshape = producers.get(repeated.name)
    if reshape is None or reshape.symbol.id not in _RESHAPES:
        return None
    expanded = _only_tensor(reshape)
    expand = producers.get(expanded.name) if expanded is not None else None
    if expanded is None or expand is None or expand.symbol.id not in _EXPANDS or expanded.ndim != 5:
        return None
    batch, kv_heads, groups, length, width = expanded.shape
    if repeated.shape != (batch, kv_heads * groups, length, width):
        return None
    unsqueezed = _only_tensor(expand)
    unsqueeze = producers.get(unsqueezed.name) if unsqueezed is not None else None
    if unsqueezed is None or unsqueeze is None or unsqueezed.shape != (batch, kv_heads, 1, length, width):
        return None
    source = _only_tensor(unsqueeze)
    if (
        unsqueeze.symbol.id not in _UNSQUEEZES
        or source is None
        or source.shape != (batch, kv_heads, length, width)
    ):
        return None
    if unsqueeze.symbol.id == "ltorch.getitem" and not _only_inserts_dims(unsqueeze.args[1]):
        return None
    return source


def _only_inserts_dims(index: object) -> bool:
    """An index of full slices, ``None`` and ``...`` only: it inserts dims and selects nothing."""
    items = index if isinstance(index, tuple) else (index,)
    full = slice(None, None, None)
    return all(item is None or item is Ellipsis or item == full for item in items)


def _only_tensor(bound_symbol: BoundSymbol) -> TensorProxy | None:
    tensors = [p for p in bound_symbol.proxy_args() if isinstance(p, TensorProxy)]
    return tensors[0] if len(tensors) == 1 else None


# for the other attention rewrites (query_groups.py, attention_masks.py)
sdpa_arguments = _bind
unrepeated_heads = _unrepeated
