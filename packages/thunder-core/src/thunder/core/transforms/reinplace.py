"""Reinplacing: an input's update computed out of place and copied back runs in place instead.

Functionalization (``core/inplace.py``) turns ``cache.index_copy_(2, pos, k)`` into
``t = ltorch.index_copy(cache, 2, pos, k)`` and, once ``copy_backs.py`` has placed it,
``inplace.copy_(cache, t)`` right after the last read of the old value. For a KV cache that is two
kernels over the whole cache and a cache-sized temporary where eager writes one position. When

- ``t`` is made by a symbol with an in-place form (``RULES``: indexed updates, slice writes,
  elementwise ops), whose ``self`` operand is ``cache``
  (or, for a chain of updates, the previous link, itself reinplaced: ``t2 = index_copy(t1, ...)``),
- nothing after that symbol reads the old value of ``cache`` through any alias (the copy-backs'
  alias analysis, ``alias_roots``), nor, along a chain, a link's value after the next link,
- its other operands do not alias what it writes, dtype and shape equal the input's, the input does
  not require grad, no fusion executor claims the symbol (``fused_by``: a fusion keeps it
  functional, as it fuses it with its neighbours), and no random or side-effecting symbol other than
  copy-backs lies between the first link and the copy-back,

the links become the in-place ops (``torch.Tensor.index_copy_(cache, 2, pos, k)``, run by the torch
executor) whose outputs stand for ``t`` from there on, and the copy-back goes. Everything that read
``t`` reads the input's memory, which holds ``t``'s value until the next link writes it, and nothing
reads ``t`` after that.

Only traces without autograd are reinplaced (the pipeline runs it on those): a forward saving
``t`` for its backward would see the next call's write.

The in-place symbols carry the ``side_effect`` tag (DCE keeps them, fusion regions are ordered around
them as around copy-backs) and ``writes_input`` (CUDA graphs capture their input at the caller's
tensor, as for a copy-back).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from thunder.core.executor import Executor
from thunder.core.inplace import copy_symbol
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace
from thunder.core.transforms.claim_executors import fused_by
from thunder.core.transforms.copy_backs import BARRIERS, alias_roots

__all__ = ["reinplace", "RULES", "inplace_symbol", "WRITES_INPUT"]

# The tag of a symbol that writes its first argument in place (a real input's memory, when it is one).
WRITES_INPUT = "writes_input"

# functional symbol id -> its in-place form, as printed: a ``torch.Tensor`` method, or a function of
# ``core/inplace.py``. Both take the functional symbol's arguments (the torch language mirrors torch's
# signatures), the first being the tensor written.
RULES: dict[str, str] = {
    "ltorch.index_copy": "torch.Tensor.index_copy_",
    "ltorch.index_put": "torch.Tensor.index_put_",
    "prims.index_put": "inplace.index_put_",  # ``keys[:, :, pos] = k``: None for the dims taken whole
    "ltorch.index_add": "torch.Tensor.index_add_",
    "ltorch.index_fill": "torch.Tensor.index_fill_",
    "ltorch.scatter": "torch.Tensor.scatter_",
    "ltorch.scatter_add": "torch.Tensor.scatter_add_",
    "ltorch.masked_fill": "torch.Tensor.masked_fill_",
    "inplace.write_slice": "inplace.write_slice_",  # ``x[..., a:b] = v``, and other writes through slices
}
# Elementwise updates (an optimizer's state: ``exp_avg.lerp_(grad, 0.1)``, ``step += 1``; a cache's
# length): the method of the same name. Where a fusion executor claims them they stay functional.
ELEMENTWISE = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "lerp", "addcmul",
    "addcdiv", "clamp", "clamp_min", "clamp_max", "neg", "abs", "reciprocal", "sqrt", "rsqrt", "exp", "log",
    "sigmoid", "tanh", "bitwise_and", "bitwise_or",
)  # fmt: skip
RULES.update({f"ltorch.{name}": f"torch.Tensor.{name}_" for name in ELEMENTWISE})


def _same_as_self(a: TensorProxy, *args: Any, **kwargs: Any) -> TensorProxy:
    return a.replace()


@functools.cache  # not a module-level dict: the disk cache then stores the symbol by value
def inplace_symbol(call: str) -> Symbol:
    """The in-place form ``call`` (a value of ``RULES``) as a trace symbol run by the torch executor."""
    import torch  # lazily: nothing of the pipeline imports torch through this module

    from thunder.core import inplace
    from thunder.core.executor import get_executor

    module, name = call.rsplit(".", 1)
    return Symbol(
        name=name,
        id=call,
        meta=_same_as_self,
        module=module,
        fn=getattr(torch.Tensor if module == "torch.Tensor" else inplace, name),
        executor=get_executor("torch"),
        tags=frozenset({"side_effect", WRITES_INPUT}),
    )


def reinplace(trace: Trace, executors: Sequence[Executor] = ()) -> Trace:
    """``trace`` with each copy-back that an in-place op can replace replaced (module docstring).

    Args:
        trace: a computation trace without autograd, its copy-backs placed (``place_copy_backs``).
        executors: the executors the trace will be claimed by; what a fusion executor claims stays.

    Returns:
        ``trace`` itself when nothing changed, else a new trace.

    Example::

        t0 = ltorch.index_copy(cache, 2, pos, k)         t0 = torch.Tensor.index_copy_(cache, 2, pos, k)
        inplace.copy_(cache, t0)                   ->
        t1 = ltorch.sum(t0, 2)                           t1 = ltorch.sum(t0, 2)
    """
    copy = copy_symbol()
    bound_symbols = trace.bound_symbols
    if not any(b.symbol is copy for b in bound_symbols):
        return trace
    program = _Program(trace)
    replaced: dict[int, BoundSymbol] = {}
    removed: set[int] = set()
    for index, bound_symbol in enumerate(bound_symbols):
        if bound_symbol.symbol is not copy:
            continue
        chain = program.chain(index, executors)
        if chain is None:
            continue
        for link in chain:
            original = bound_symbols[link]
            symbol = inplace_symbol(RULES[original.symbol.id])
            # a keyword given as None means its default to the functional symbol; ``add_(x, alpha=None)`` fails
            kwargs = {name: value for name, value in original.kwargs.items() if value is not None}
            replaced[link] = BoundSymbol(symbol, original.args, kwargs, original.output, (), False)
        removed.add(index)
    if not removed:
        return trace
    new = from_trace(trace, "Reinplaced (in-place ops instead of copy-backs)")
    new.name = trace.name
    new.mutations = trace.mutations
    for index, bound_symbol in enumerate(bound_symbols):
        if index not in removed:
            new.bound_symbols.append(replaced.get(index, bound_symbol))
    return new


class _Program:
    """Who makes each proxy, and where each alias root is read."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.bound_symbols = trace.bound_symbols
        self.roots = alias_roots(trace, self.bound_symbols, every_tensor=True)
        self.made_at: dict[str, int] = {}
        self.reads: dict[str, list[int]] = {}  # root -> positions reading it (through any alias)
        for index, bound_symbol in enumerate(self.bound_symbols):
            for proxy in bound_symbol.proxy_args():
                root = self.roots.get(proxy.name)
                if root is not None:
                    self.reads.setdefault(root, []).append(index)
            for proxy in bound_symbol.proxy_outputs():
                self.made_at.setdefault(proxy.name, index)
        # the alias roots of what the program returns, found once (per copy-back it was a scan of the
        # whole trace: 1.6 s of a 12-layer GPT's whole training step with its 148 updates)
        self.returned_roots = {
            self.roots.get(p.name, p.name)
            for b in self.bound_symbols
            if b.symbol is RETURN
            for p in b.proxy_args()
        }

    def chain(self, copy_index: int, executors: Sequence[Executor]) -> list[int] | None:
        """The positions of the symbols to reinplace for the copy-back at ``copy_index``, or None."""
        destination, value = self.bound_symbols[copy_index].args
        if not isinstance(destination, TensorProxy) or destination.requires_grad:
            return None
        links: list[int] = []
        while True:
            position = self.made_at.get(value.name)
            if position is None or position > copy_index:
                return None
            bound_symbol = self.bound_symbols[position]
            if not self._reinplaceable(bound_symbol, value, destination, executors):
                return None
            links.append(position)
            self_operand = bound_symbol.args[0]
            if self_operand.name == destination.name:
                break
            value = self_operand
        links.reverse()
        if not self._old_values_unread(links, destination, copy_index) or self._returned(links):
            return None
        return links if self._no_barrier_between(links[0], copy_index) else None

    def _reinplaceable(
        self,
        bound_symbol: BoundSymbol,
        value: TensorProxy,
        destination: TensorProxy,
        executors: Sequence[Executor],
    ) -> bool:
        if bound_symbol.symbol.id not in RULES or bound_symbol.output is not value or not bound_symbol.args:
            return False
        self_operand = bound_symbol.args[0]
        if not isinstance(self_operand, TensorProxy) or not isinstance(value, TensorProxy):
            return False
        if (self_operand.dtype, tuple(self_operand.shape)) != (destination.dtype, tuple(destination.shape)):
            return False
        if (value.dtype, tuple(value.shape)) != (destination.dtype, tuple(destination.shape)):
            return False
        if fused_by(bound_symbol, executors):  # a fusion executor keeps it functional, fused
            return False
        if bound_symbol.symbol.id == "ltorch.index_put" and not all(
            isinstance(index, TensorProxy) for index in bound_symbol.args[1]
        ):
            return False  # ``index_put_`` takes tensors only (the functional form also None, for ``:``)
        # the other operands must not alias the memory written: eager would read it half-written
        written = self.roots.get(self_operand.name)
        operands = tree_leaves((bound_symbol.args[1:], bound_symbol.kwargs))
        return all(self.roots.get(p.name) != written for p in operands if isinstance(p, TensorProxy))

    def _old_values_unread(self, links: list[int], destination: TensorProxy, copy_index: int) -> bool:
        """No alias of what each link overwrites is read after that link (but the copy-back itself, and
        the return of the input itself: the updated input, as ``inplace_finish.finish`` returns it)."""
        for link in links:
            base = self.bound_symbols[link].args[0]
            root = self.roots.get(base.name, base.name)
            for reader in self.reads.get(root, []):
                if reader <= link or reader == copy_index:
                    continue
                if self._returns_the_input_only(reader, destination, root):
                    continue
                return False
        return True

    def _returned(self, links: list[int]) -> bool:
        """Whether the program returns a link's value (or a view of it): a tensor of its own in eager
        (``y = x + 1; x.copy_(y); return y``), which in place would be the input's memory, changed by
        the caller's next write to the input (``inplace_finish.finish`` returns the input itself as the input)."""
        written = {
            self.roots.get(p.name, p.name) for link in links for p in self.bound_symbols[link].proxy_outputs()
        }
        return not written.isdisjoint(self.returned_roots)

    def _returns_the_input_only(self, reader: int, destination: TensorProxy, root: str) -> bool:
        bound_symbol = self.bound_symbols[reader]
        if bound_symbol.symbol is not RETURN or root != destination.name:
            return False
        return all(
            p.name == destination.name for p in bound_symbol.proxy_args() if self.roots.get(p.name) == root
        )

    def _no_barrier_between(self, first: int, copy_index: int) -> bool:
        copy = copy_symbol()
        return not any(
            b.symbol is not copy and b.symbol.tags & BARRIERS
            for b in self.bound_symbols[first + 1 : copy_index]
        )
