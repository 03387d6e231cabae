"""Eager's memory layout of a trace's tensors, where eager's answer depends on it.

Traces carry no strides: thunder computes every tensor dense and contiguous. Three constructs
answer differently by the layout eager would have: ``x.view(shape)`` fails where the strides do not
allow the view, ``x.contiguous()`` copies a tensor that is not contiguous (a new tensor, which a write
does not share with ``x``), and ``x.reshape(shape)`` copies instead of viewing. ``x.t().view(-1)``
returned a reshape where eager raises, and ``y = x.t().contiguous(); y.add_(1)`` wrote into ``x``.

A tensor's eager layout is its view chain (``core/inplace.py``: the view prims from the tensor they
view) replayed on a meta tensor of its root's layout. A root a non-view op made has the layout eager's
op gives on meta tensors of its operands' layouts (elementwise ops keep a permuted operand's layout);
contiguous operands make a contiguous result except for the ops of ``_MAKES_ITS_OWN_LAYOUT``. A root
that is an input has the strides it had when traced (``PrologueBuilder.input_strides``), and the
prologue checks on every call that eager answers for that call's input as it did for the traced one
(``layouts.guard``; for a tensor an op made of inputs, their strides): another answer is a cache miss,
a compile for that layout, which raises eager's error where eager raises (``x.view(-1)`` of a
transposed input). A trace no prologue is being built for (a transform's) assumes a contiguous input,
and its computation checks that on every call (``layouts.check``, raising).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from thunder.core import devices, dtypes
from thunder.core.inplace import is_view_symbol, replay_views, torch_step, view_chains
from thunder.core.prologue import GuardFailure, builder_of
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import BoundSymbol, Symbol, made_on_first_use
from thunder.core.trace import Trace, get_tracectx

__all__ = ["view_allowed", "is_contiguous", "reshape_views", "guard", "check"]


class _Chains:
    """For each top-level tensor of a trace that is a view: its root and PyTorch view steps; for each
    tensor an op made: that op (``made``), and once asked, its eager layout (``layouts``)."""

    def __init__(self) -> None:
        self.scanned = 0
        self.chains: dict[str, tuple[TensorProxy, tuple]] = {}
        self.made: dict[str, BoundSymbol] = {}
        self.layouts: dict[str, _Layout] = {}
        self.guarded: set[str] = set()  # inputs whose strides the prologue checks

    def of(self, trace: Trace, proxy: TensorProxy) -> tuple[TensorProxy, tuple]:
        for bound_symbol in trace.bound_symbols[self.scanned :]:
            self._note(trace, bound_symbol)
        self.scanned = len(trace.bound_symbols)
        return self._chain(trace, proxy)

    def _chain(self, trace: Trace, proxy: TensorProxy) -> tuple[TensorProxy, tuple]:
        return self._chain_of(trace, _held_name(trace, proxy), proxy)

    def _chain_of(self, trace: Trace, name: str, proxy: TensorProxy) -> tuple[TensorProxy, tuple]:
        """The chain of the held tensor ``name`` (whose value is ``proxy``, or which ``proxy`` is)."""
        roots = trace.mutations.roots if trace.mutations is not None else {}
        held = roots[name].proxy if name in roots else proxy  # an updated input is still that input
        return self.chains.get(name, (held, ()))

    def _note(self, trace: Trace, bound_symbol: BoundSymbol) -> None:
        if not is_view_symbol(bound_symbol.symbol) or not bound_symbol.args:
            for output in bound_symbol.proxy_outputs():
                if isinstance(output, TensorProxy):
                    self.made.setdefault(output.name, bound_symbol)
            return
        source = bound_symbol.args[0]
        if not isinstance(source, TensorProxy):
            return
        # a view of an updated tensor views the tensor the user's code holds, not the write-backs that
        # made its value (``x.t()`` after a write through ``x[0]`` is a transpose of the layout of ``x``)
        sources = trace.mutations.view_sources if trace.mutations is not None else {}
        for name, chain in view_chains(bound_symbol, source).items():
            more = tuple(torch_step(step) for step in chain)
            if name != source.name and all(step is not None for step in more):
                held = sources.get(name)  # the tensor the user's code took the view of
                root, steps = (
                    self._chain(trace, source) if held is None else self._chain_of(trace, held.name, held)
                )
                self.chains[name] = (root, steps + more)


_chains: weakref.WeakKeyDictionary[Trace, _Chains] = weakref.WeakKeyDictionary()


def _held_name(trace: Trace, proxy: TensorProxy) -> str:
    """The name of the tensor the user's code holds whose value ``proxy`` is (now, or before a later
    update): after an in-place update a value is made by write-backs (``core/inplace.py``: a transpose
    of a slice write, for a write through ``y.t()[::2]``), whose chain is not the layout of the tensor
    it stands for."""
    mutations = trace.mutations
    if mutations is None:
        return proxy.name
    held = mutations.user_call.get(id(proxy))
    if held is not None:  # asked about an argument of the call being recorded: the tensor passed
        return held.name
    for name, alias in mutations.aliases.items():
        if alias.value is proxy and alias.generation == mutations.roots[alias.root].generation:
            return name
    if proxy.name in mutations.aliases:  # a tensor the user's code holds (``a.copy_(b)`` made it a's value)
        return proxy.name
    return mutations.holders.get(proxy.name, proxy.name)


def _hinted(value: Any) -> Any:
    """``value`` with each symbolic size replaced by the size it had when traced (its hint), unguarded."""
    if isinstance(value, (tuple, list)):
        return type(value)(_hinted(item) for item in value)
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise _Unknown
        return int(hint)
    return value


class _Unknown(Exception):
    pass


class _Layout:
    """Eager's layout of a tensor (a meta tensor of its strides), and the inputs it follows: those whose
    layout, at another call, may give it another one (the prologue then checks theirs)."""

    __slots__ = ("tensor", "follows")

    def __init__(self, tensor: torch.Tensor, follows: frozenset[str]) -> None:
        self.tensor, self.follows = tensor, follows


def _eager_tensor(
    trace: Trace, proxy: TensorProxy
) -> tuple[torch.Tensor, TensorProxy, tuple, frozenset] | None:
    """A meta tensor with eager's layout of ``proxy``, its root and steps, and the inputs whose layout
    it follows. The root has the strides of the input it is (as traced), or the layout eager's op that
    made it gives (``_made_layout``). Symbolic sizes take the sizes of the traced call: a view of an
    input is checked with the real ones on every call; an intermediate's may differ where another size
    makes a dim 1 (not modelled)."""
    chains = _chains.get(trace)
    if chains is None:
        chains = _chains[trace] = _Chains()
    root, steps = chains.of(trace, proxy)
    try:
        layout = _root_layout(trace, chains, root)
        return replay_views(layout.tensor, _hinted(steps)), root, steps, layout.follows
    except Exception:  # noqa: BLE001 -- a size without a hint, a step PyTorch replays otherwise: unknown
        return None


def _root_layout(trace: Trace, chains: _Chains, root: TensorProxy) -> _Layout:
    """The layout of a tensor no view made: an input's as traced, else eager's op's on its operands'
    layouts, computed for each op once, operands first (no recursion: a chain may be long)."""
    pending, expanded = [root], set()
    while pending:
        proxy = pending[-1]
        if proxy.name in chains.layouts:
            pending.pop()
            continue
        made = chains.made.get(proxy.name)
        operands = _tensor_operands(made) if made is not None else []
        roots = {r.name: r for r in (chains.of(trace, operand)[0] for operand in operands)}
        missing = [r for name, r in roots.items() if name not in chains.layouts and name != proxy.name]
        if missing and proxy.name not in expanded:
            expanded.add(proxy.name)
            pending.extend(missing)
            continue
        if missing or proxy.name in roots:  # its own operand (an update in place): its layout stays unknown
            chains.layouts[proxy.name] = _Layout(_contiguous_meta(proxy), frozenset())
        else:
            chains.layouts[proxy.name] = _layout_of(trace, chains, proxy, made, operands)
        pending.pop()
    return chains.layouts[root.name]


def _contiguous_meta(proxy: TensorProxy) -> torch.Tensor:
    return torch.empty(_hinted(tuple(proxy.shape)), dtype=proxy.dtype.torch_dtype, device="meta")


def _layout_of(
    trace: Trace, chains: _Chains, proxy: TensorProxy, made: BoundSymbol | None, operands: list
) -> _Layout:
    if made is None:  # an input, or a tensor from outside the trace
        builder = builder_of(trace)
        strides = builder.input_strides.get(proxy.name) if builder is not None else None
        if strides is None or not any(proxy is p for p in trace.args):
            return _Layout(_contiguous_meta(proxy), frozenset())
        shape, dtype = _hinted(tuple(proxy.shape)), proxy.dtype.torch_dtype
        return _Layout(
            torch.empty_strided(shape, strides, dtype=dtype, device="meta"), frozenset({proxy.name})
        )
    maybe_metas = {operand.name: _eager_tensor(trace, operand) for operand in operands}
    metas = {name: meta for name, meta in maybe_metas.items() if meta is not None}
    if len(metas) != len(maybe_metas):
        return _Layout(_contiguous_meta(proxy), frozenset())
    follows: set[str] = set()
    passes = _passes_layout(made.symbol)
    for _, _, _, operand_follows in metas.values():
        # an input contiguous when traced is followed only through ops known to pass a layout on; one
        # that was not, through any op (its layout may have made this one)
        follows |= {name for name in operand_follows if passes or not _traced_contiguous(trace, name)}
    tensor = _run_on_meta(made, proxy, {name: meta[0] for name, meta in metas.items()})
    return _Layout(tensor if tensor is not None else _contiguous_meta(proxy), frozenset(follows))


def _traced_contiguous(trace: Trace, name: str) -> bool:
    builder = builder_of(trace)
    proxy = next(p for p in trace.args if getattr(p, "name", None) == name)
    assert isinstance(proxy, TensorProxy)  # only tensor inputs are followed (_layout_of)
    strides = builder.input_strides.get(name) if builder is not None else None
    meta = torch.empty_strided(_hinted(tuple(proxy.shape)), strides, device="meta") if strides else None
    return meta is None or meta.is_contiguous()


def _tensor_operands(bound_symbol: BoundSymbol) -> list[TensorProxy]:
    seen: dict[str, TensorProxy] = {}
    for leaf in tree_leaves((bound_symbol.args, bound_symbol.kwargs)):
        if isinstance(leaf, TensorProxy):
            seen.setdefault(leaf.name, leaf)
    return list(seen.values())


# Ops that are not elementwise yet give their result the layout of their input (eager's
# ``preserve_format``, TensorIterator): an input's layout reaches a later view through them.
_LAYOUT_PASSING = frozenset({
    "clone", "to", "type_as", "type", "float", "double", "half", "bfloat16", "bool", "int", "long", "short",
    "char", "byte", "cfloat", "cdouble", "relu", "gelu", "sigmoid", "glu", "normalize", "where", "fill",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
    "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
    "native_dropout", "index_put", "sort", "flip", "fliplr", "flipud", "diff", "expand_copy", "prelu",
    "nan_to_num", "masked_scatter", "index_fill", "index_copy", "scatter_reduce",
})  # fmt: skip


def _passes_layout(symbol: Symbol) -> bool:
    return "elementwise" in symbol.tags or (symbol.module == "ltorch" and symbol.name in _LAYOUT_PASSING)


# Ops (besides views) whose result eager may lay out otherwise than contiguous from contiguous operands
# (a memory_format argument, a transpose inside); ``test_layouts_of_ops.py`` finds them in the OpInfo
# database: an op missing here would be taken as contiguous.
_MAKES_ITS_OWN_LAYOUT = frozenset({
    "to", "type", "type_as", "float", "double", "half", "bfloat16", "bool", "int", "long", "short", "char",
    "byte", "cfloat", "cdouble", "clone", "contiguous", "quantile", "nanquantile", "rot90", "einsum",
    "new_empty_strided", "empty_strided", "empty_permuted", "empty_like", "zeros_like", "ones_like",
    "full_like", "rand_like", "randn_like", "randint_like", "meshgrid", "broadcast_tensors", "broadcast_to",
})  # fmt: skip


def _makes_its_own_layout(made: BoundSymbol) -> bool:
    return made.symbol.name in _MAKES_ITS_OWN_LAYOUT or "memory_format" in made.kwargs


_torch_functions: dict[int, list] | None = None


def _torch_functions_of(symbol: Symbol) -> list:
    global _torch_functions
    if _torch_functions is None:
        from thunder.torch.registry import torch_callables  # the torch language registers its symbols

        _torch_functions = {}
        for function, registered in torch_callables().items():
            _torch_functions.setdefault(id(registered), []).append(function)
    return _torch_functions.get(id(symbol), [])


def _run_on_meta(
    made: BoundSymbol, proxy: TensorProxy, metas: dict[str, torch.Tensor]
) -> torch.Tensor | None:
    """The tensor eager's op gives for ``proxy`` on meta tensors of its operands' layouts; None where
    thunder cannot tell (no torch function, no meta kernel): then contiguous, eager's usual layout."""
    symbol = made.symbol
    if symbol.module != "ltorch" or symbol.name.endswith("_"):  # in place: it keeps its input's layout
        return None
    outputs = [p for p in made.proxy_outputs() if isinstance(p, TensorProxy)]
    if all(meta.is_contiguous() for meta in metas.values()) and not _makes_its_own_layout(made):
        return None  # contiguous operands make a contiguous result (no meta kernel run: they cost)
    known = _known_without_running(made, proxy, list(metas.values()))
    if known is not None:
        return known
    args, kwargs = tree_map(lambda leaf: _on_meta(leaf, metas), (made.args, made.kwargs))
    for function in _torch_functions_of(symbol):
        try:
            result = function(*args, **kwargs)
        except TypeError:
            continue  # another signature: the next torch function of this symbol
        except Exception:  # noqa: BLE001 -- no meta kernel, or arguments thunder spells otherwise
            return None
        results = [leaf for leaf in tree_leaves(result) if isinstance(leaf, torch.Tensor)]
        if len(results) != len(outputs):
            return None
        tensor = results[outputs.index(next(p for p in outputs if p.name == proxy.name))]
        same = tuple(tensor.shape) == tuple(_hinted(tuple(proxy.shape))) and tensor.device.type == "meta"
        return tensor if same else None
    return None


# Ops whose meta kernel gives a contiguous result whatever its operands' layouts.
_CONTIGUOUS_RESULT = frozenset({"scaled_dot_product_attention"})
# Elementwise ops whose result is not laid out by TensorIterator: their input itself for real tensors
# (``positive``, ``conj``, ...), or a contiguous result; their meta kernels answer. ``test_layouts.py``
# compares every elementwise op with eager.
_NOT_TENSOR_ITERATOR = frozenset({
    "conj", "conj_physical", "positive", "real", "resolve_conj", "resolve_neg", "logsigmoid", "rrelu",
})  # fmt: skip


def _known_without_running(
    made: BoundSymbol, proxy: TensorProxy, operands: list[torch.Tensor]
) -> torch.Tensor | None:
    """The layout eager's op gives, where it follows from a rule and not from running the op on meta
    tensors. The first Python meta kernel a process runs imports torch's meta registrations (with
    ``torch._dynamo``: 1 to 2.5 s of CPU); GPT-2's and Llama's compiles asked only these: attention on
    transposed heads, the rotary's elementwise ops and ``cat`` on them. ``test_layouts.py`` checks each
    rule against the meta kernel.

    - attention: contiguous;
    - an elementwise op: TensorIterator's layout (``elementwise_strides``);
    - ``cat`` of operands none of which is laid out channels-last: contiguous (ATen's cat takes a
      channels-last format only where its operands suggest one).
    """
    shape, dtype = _hinted(tuple(proxy.shape)), proxy.dtype.torch_dtype
    name = made.symbol.name
    if name in _CONTIGUOUS_RESULT:
        return torch.empty(shape, dtype=dtype, device="meta")
    if "elementwise" in made.symbol.tags and operands and name not in _NOT_TENSOR_ITERATOR:
        return torch.empty_strided(shape, elementwise_strides(operands, shape), dtype=dtype, device="meta")
    if name == "cat" and not any(_channels_last_like(t) for t in operands):
        return torch.empty(shape, dtype=dtype, device="meta")
    return None


def elementwise_strides(operands: list[torch.Tensor], shape: tuple) -> tuple:
    """The strides eager gives the result of an elementwise op of ``operands`` broadcast to ``shape``:
    TensorIterator orders the dims by the operands' strides (the first operand that tells two dims
    apart decides; a broadcast dim tells nothing; equal strides put the smaller dim inner) and lays the
    result out densely in that order. On real tensors this matched eager's results in 20,000 random
    cases of one to three operands (permuted, sliced, broadcast), where the Python meta kernels
    differed in 3 of 3,000 (size-1 dims beside broadcast ones)."""
    ndim = len(shape)
    rows = []  # per operand, per dim of the result: its stride there, 0 where it is broadcast
    for tensor in operands:
        pad = ndim - tensor.dim()
        rows.append([
            0 if d < pad or (tensor.shape[d - pad] == 1 and shape[d] != 1) else tensor.stride(d - pad)
            for d in range(ndim)
        ])  # fmt: skip

    def order(dim0: int, dim1: int) -> int:  # 1: dim1 is inner to dim0; -1: dim0 is inner
        for row in rows:
            if row[dim0] == 0 or row[dim1] == 0:
                continue
            if row[dim0] != row[dim1]:
                return -1 if row[dim0] < row[dim1] else 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    inner_first = list(range(ndim))[::-1]
    for i in range(1, ndim):  # insertion sort, as TensorIterator's reorder_dimensions
        moved = i
        for j in range(i - 1, -1, -1):
            comparison = order(inner_first[j], inner_first[moved])
            if comparison > 0:
                inner_first[j], inner_first[moved] = inner_first[moved], inner_first[j]
                moved = j
            elif comparison < 0:
                break
    strides, step = [0] * ndim, 1
    for d in inner_first:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def _channels_last_like(tensor: torch.Tensor) -> bool:
    """Whether PyTorch may suggest a channels-last format for it: a 4-D or 5-D tensor whose channel dim
    (1) has the smallest stride among its dims of size above 1."""
    if tensor.dim() not in (4, 5):
        return False
    strides = [stride for stride, size in zip(tensor.stride(), tensor.shape) if size != 1]
    return tensor.shape[1] == 1 or tensor.stride(1) <= min(strides, default=0)


def _on_meta(leaf: Any, metas: dict[str, torch.Tensor]) -> Any:
    if isinstance(leaf, TensorProxy):
        return metas[leaf.name]
    if isinstance(leaf, NumberProxy):
        return leaf.value
    if isinstance(leaf, dtypes.dtype):
        return dtypes.to_torch_dtype(leaf)
    if isinstance(leaf, (devices.Device, torch.device)):
        return torch.device("meta")
    return _hinted(leaf)


def _decide(proxy: TensorProxy, kind: str, shape: tuple, answer: Any) -> tuple[bool | None, bool]:
    """``answer(eager_tensor)`` where thunder knows eager's layout, else None; and whether the answer
    is checked when the computation runs (then eager's error comes from there).

    A view of an input takes the input's layout as traced, and the prologue checks that a later call's
    input gets the same answer: another answer is a cache miss, a compile for that layout. Where no
    prologue is being built (a trace a transform makes) the input is assumed contiguous and the
    computation checks it on every call (``layouts.check``: another answer raises)."""
    trace = get_tracectx()
    if trace is None or trace.depth > 1:  # inside a decomposition: thunder's own ops, not the user's
        return None, False
    modelled = _eager_tensor(trace, proxy)
    if modelled is None:
        return None, False
    tensor, root, steps, follows = modelled
    try:
        decided = answer(tensor)
    except _Unknown:
        return None, False
    if not any(root is p for p in trace.args):
        _guard_strides(trace, follows)
        return decided, False
    builder = builder_of(trace)
    arguments = (root, steps, kind, shape, decided)
    if builder is not None and root.name in builder.input_strides:
        traced = builder.input_strides[root.name]
        if builder.add_layout_guard(BoundSymbol(guard_symbol(), (*arguments, traced), {}, None, ())):
            return decided, False
    bound = BoundSymbol(check_symbol(), arguments, {}, None, (), grad_enabled=False)
    if trace.depth == 0:
        trace.record(bound)
    else:  # the user's call being recorded: the check goes before it
        trace.bound_symbols.append(bound)
    return decided, True


def _guard_strides(trace: Trace, follows: frozenset[str]) -> None:
    """The prologue checks that each input in ``follows`` has its traced layout: contiguous if it was,
    else the very strides (an answer about a tensor an op made from it may depend on them)."""
    builder, chains = builder_of(trace), _chains[trace]
    for name in sorted(follows - chains.guarded):
        assert builder is not None  # an input is followed only when the builder has its strides (_layout_of)
        proxy = next(p for p in trace.args if getattr(p, "name", None) == name)
        traced = builder.input_strides[name]
        arguments = (proxy, (), "strides", (), _traced_contiguous(trace, name), traced)
        if builder.add_layout_guard(BoundSymbol(guard_symbol(), arguments, {}, None, ())):
            chains.guarded.add(name)


def _viewable(tensor: torch.Tensor, shape: tuple) -> bool:
    try:
        tensor.view(_hinted(shape))
    except RuntimeError:
        return False
    return True


def view_allowed(proxy: TensorProxy, shape: tuple) -> bool:
    """False where eager's ``proxy.view(shape)`` fails."""
    decided, checked_when_run = _decide(proxy, "view", tuple(shape), lambda t: _viewable(t, tuple(shape)))
    return decided is not False or checked_when_run


def is_contiguous(proxy: TensorProxy) -> bool:
    """Whether eager's ``proxy`` is contiguous (True where the layout is not modelled)."""
    decided, _ = _decide(proxy, "contiguous", (), lambda t: t.is_contiguous())
    return decided is not False


def reshape_views(proxy: TensorProxy, shape: tuple) -> bool:
    """Whether eager's ``proxy.reshape(shape)`` is a view, not a copy (True where not modelled)."""
    decided, _ = _decide(proxy, "reshape", tuple(shape), lambda t: _viewable(t, tuple(shape)))
    return decided is not False


# ---------------------------------------------------------------------------------------------
# The check on every call


def _answer(tensor: torch.Tensor, kind: str, shape: tuple) -> bool:
    return tensor.is_contiguous() if kind == "contiguous" else _viewable(tensor, shape)


def _same_strides(x: torch.Tensor, contiguous: bool, traced: tuple) -> bool:
    return x.is_contiguous() if contiguous else tuple(x.stride()) == traced


def _guard(x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple) -> None:
    """In the prologue: eager answers for ``x``'s layout as for the one traced (``traced``: its strides,
    for the recompile reason), else another entry."""
    if kind == "strides":
        if not _same_strides(x, expected, traced):
            raise GuardFailure
        return
    try:
        actual = _answer(replay_views(x, steps), kind, shape)
    except Exception as error:  # noqa: BLE001 -- a view PyTorch refuses for this layout: not this entry
        raise GuardFailure from error
    if actual is not expected:
        raise GuardFailure


def _guard_meta(x: TensorProxy, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple) -> None:
    return None


@made_on_first_use
def guard_symbol() -> Symbol:
    """``layouts.guard(x, steps, kind, shape, expected, traced)``: the prologue's check of an input's layout."""
    return Symbol(name="guard", id="layouts.guard", meta=_guard_meta, module="layouts", fn=_guard)


guard = _guard  # what ``layouts.guard`` names in a printed prologue


def describe_guard(
    x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool, traced: tuple
) -> tuple:
    """For a recompile reason: the strides before and after, and what eager does otherwise for them."""
    before, after = f"strides {tuple(traced)}", f"strides {tuple(x.stride())}"
    if kind == "strides":
        return before, after, "the program asks eager's layout of a tensor made from it"
    construct = {"view": "view({})", "reshape": "reshape({})", "contiguous": "contiguous()"}[kind]
    construct = construct.format(list(shape))
    of = "x" + "".join(f".{step[0]}({', '.join(map(repr, step[1:]))})" for step in steps)
    verb = {"view": ("fails", "works"), "reshape": ("copies", "views"), "contiguous": ("copies", "views")}[
        kind
    ]
    does, otherwise = (verb[1], verb[0]) if expected else (verb[0], verb[1])
    consequence = f"eager's {of}.{construct} {does} for the first, {otherwise} for the second"
    return before, after, consequence


def _check(x: torch.Tensor, steps: tuple, kind: str, shape: tuple, expected: bool) -> None:
    tensor = replay_views(x, steps)
    if kind == "view":
        tensor.view(shape)  # eager's error where this call's layout does not allow the view
        return
    actual = _answer(tensor, kind, shape)
    if actual != expected:
        construct = "contiguous()" if kind == "contiguous" else f"reshape({list(shape)})"
        raise RuntimeError(
            f"thunder compiled this program for a contiguous input: {construct} of a view of it "
            f"{'copies' if (kind == 'contiguous') != expected else 'views'} in eager for that layout, and "
            f"this call's input (strides {tuple(x.stride())}) makes eager do otherwise. Pass a "
            "contiguous tensor (x.contiguous()), or compile a separate function for this layout"
        )


def _check_meta(x: TensorProxy, steps: tuple, kind: str, shape: tuple, expected: bool) -> None:
    return None


@made_on_first_use
def check_symbol() -> Symbol:
    """``layouts.check(x, steps, kind, shape, expected)``: eager's decision for the input's real layout."""
    from thunder.core.executor import get_executor

    return Symbol(
        name="check", id="layouts.check", meta=_check_meta, module="layouts", fn=_check,
        executor=get_executor("torch"), tags=frozenset({"side_effect"}),
    )  # fmt: skip


check = _check  # what ``layouts.check`` names in a printed trace
