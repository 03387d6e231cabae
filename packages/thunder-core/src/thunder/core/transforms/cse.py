"""Common-subexpression elimination: an op computed again from the same inputs is read, not recomputed.

Programs repeat work that eager PyTorch cannot share: each layer of a Hugging Face decoder makes
its own ``torch.arange(kv_length)`` for its cache update (22 kernels per decode step of TinyLlama
where one does), models recompute the same mask or the same cast of a weight. A bound symbol whose
symbol and arguments equal an earlier one's is dropped, and its outputs are the earlier outputs.

A result the program returns (an output, or a value its epilogue stores in Python state), or a
view of one, is never the one dropped: the caller holds distinct tensors in eager, and writing one
in place must not change the other. Only symbols that compute a function of their arguments are
shared: nothing tagged ``random`` or
``side_effect`` (itself or in its decomposition: two dropouts draw different numbers), no in-place
symbol (``inplace.*``, a name ending in ``_``, ``writes_input``), and only arguments whose value the
key holds exactly: proxies (by name), numbers by type and ``repr`` (``0.0`` and ``-0.0`` differ,
``True`` and ``1`` differ), symbolic sizes by their expression, strings, ``None``, dtypes and devices
(torch's and thunder's spellings alike), slices, and tuples, lists and dicts of those. An argument of another kind (a tensor constant, an object) keeps its symbol.

Fills (``zeros``, ``zeros_like``, ``full``, ...: a tensor of one value, ``prims.full`` underneath) are
not shared either. Making one again costs a memset, and keeping each its own value keeps a program
that creates state shaped like the programs that read it: the first step of a whole training step
creates Adam's state (``exp_avg = zeros_like(p)``, ``exp_avg_sq = zeros_like(p)``, ``step = zeros(())``
per parameter); shared, every parameter's two moments were one tensor and all step counters one
value, so each update's fusion region read other inputs than the same update in later steps (which
read the state as inputs) and nvFuser compiled it anew. Unshared, the first program's regions are
the later programs' (a 4-layer GPT's step on the CPU with nvFuser's claims: 29 distinct definitions
-> 16).
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.trace import Trace, from_trace
from thunder.core.transforms.common import substitute
from thunder.core.transforms.copy_backs import alias_roots

__all__ = ["cse"]

_EFFECTS = ("random", "side_effect", "writes_input")
_NOT_SHARED = {RETURN.id, DEL.id}
_UNKEYABLE = object()


def cse(trace: Trace) -> Trace:
    """``trace`` with repeated computations read from their first result, or ``trace`` itself."""
    renames: dict[str, Proxy] = {}
    seen: dict[tuple, BoundSymbol] = {}
    kept: list[BoundSymbol] = []
    escaping = _escaping(trace)
    for bound_symbol in trace.bound_symbols:
        bound_symbol = substitute(bound_symbol, renames)
        key = _key(bound_symbol) if _shareable(bound_symbol) else None
        earlier = seen.get(key) if key is not None else None
        if earlier is not None and any(p.name in escaping for p in bound_symbol.proxy_outputs()):
            earlier = None  # the caller gets this tensor: it must be an object of its own
        if earlier is None:
            if key is not None:
                seen[key] = bound_symbol
            kept.append(bound_symbol)
            continue
        mine, theirs = tree_leaves(bound_symbol.output), tree_leaves(earlier.output)
        if len(mine) != len(theirs) or not all(
            isinstance(a, Proxy) == isinstance(b, Proxy) for a, b in zip(mine, theirs)
        ):
            kept.append(bound_symbol)
            continue
        renames.update({a.name: b for a, b in zip(mine, theirs) if isinstance(a, Proxy)})
    if len(kept) == len(trace.bound_symbols):
        return trace
    new = from_trace(trace, "Common-subexpression elimination (transforms/cse.py)")
    new.mutations = trace.mutations
    new.bound_symbols.extend(kept)
    return new


def _escaping(trace: Trace) -> set[str]:
    """The tensors the program returns (its outputs, and the values its epilogue stores in Python
    state), with every tensor a returned view is a view of: two equal results the caller receives are
    two tensors in eager (``return x + 1, x + 1``; each of Adam's per-parameter step counters starts as
    ``zeros(())``), and one written in place must not change the other."""
    bound_symbols = trace.bound_symbols
    roots = alias_roots(trace, bound_symbols, every_tensor=True)
    returned = {
        roots.get(p.name, p.name) for b in bound_symbols if b.symbol is RETURN for p in b.proxy_args()
    }
    return {name for name, root in roots.items() if root in returned} | returned


def _shareable(bound_symbol: BoundSymbol) -> bool:
    symbol = bound_symbol.symbol
    if symbol.id in _NOT_SHARED or symbol.id.startswith("inplace.") or symbol.name.endswith("_"):
        return False
    if not bound_symbol.proxy_outputs() or _is_fill(bound_symbol):
        return False
    return not _has_effects(bound_symbol)


def _is_fill(bound_symbol: BoundSymbol) -> bool:
    """A tensor of one value: ``prims.full``, or a symbol made of fills alone (``zeros_like``)."""
    if bound_symbol.symbol.id == "prims.full":
        return True
    return bool(bound_symbol.subsymbols) and all(_is_fill(sub) for sub in bound_symbol.subsymbols)


def _has_effects(bound_symbol: BoundSymbol) -> bool:
    if not bound_symbol.symbol.tags.isdisjoint(_EFFECTS):
        return True
    return any(_has_effects(sub) for sub in bound_symbol.subsymbols)


def _key(bound_symbol: BoundSymbol) -> tuple | None:
    encoded = _encode((bound_symbol.args, bound_symbol.kwargs))
    if encoded is _UNKEYABLE:
        return None
    return (bound_symbol.symbol.id, bound_symbol.grad_enabled, encoded)


def _encode(value: Any) -> Any:
    """A hashable value equal for two arguments exactly when they are the same value, or _UNKEYABLE."""
    if isinstance(value, Proxy):
        return ("proxy", value.name)
    if value is None or value is Ellipsis or isinstance(value, (bool, int, float, complex, str)):
        return (type(value).__name__, repr(value))
    if isinstance(value, (tuple, list)):
        items = tuple(_encode(v) for v in value)
        return _UNKEYABLE if any(i is _UNKEYABLE for i in items) else (type(value).__name__, items)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return _UNKEYABLE
        items = tuple((k, _encode(v)) for k, v in sorted(value.items()))
        return _UNKEYABLE if any(v is _UNKEYABLE for _, v in items) else ("dict", items)
    if isinstance(value, slice):
        return _encode(("slice", value.start, value.stop, value.step))
    return _encode_torch_value(value)


def _encode_torch_value(value: Any) -> Any:
    """A dtype or device, torch's or thunder's spelling alike (``torch.float32`` and thunder's float32
    are one key; ``torch.device("cuda")``, the current device at run time, is not ``cuda:0``)."""
    import torch

    from thunder.core import devices, dtypes

    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        # a symbolic size, by its expression (reading its value or text would add a guard)
        expr = getattr(value.node, "expr", None)
        return _UNKEYABLE if expr is None else ("symbolic", type(value).__name__, expr)
    if isinstance(value, torch.dtype):
        value = dtypes.to_dtype(value)
    if isinstance(value, dtypes.dtype):
        return ("dtype", repr(value))
    if isinstance(value, (devices.Device, torch.device)):
        return ("device", value.type, value.index)
    if isinstance(value, (torch.memory_format, torch.layout)):
        return ("torch", repr(value))
    return _UNKEYABLE
