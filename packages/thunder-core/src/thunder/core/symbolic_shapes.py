"""Symbolic tensor sizes: one compiled program for every length of a dimension that changes.

thunder's traces are specialized to their inputs' shapes. A decode loop whose KV cache grows by one
each step, or a prefill called with prompts of several lengths, would compile once per length. This
module makes such sizes *symbolic*, the way torch.compile's "automatic dynamic" does:

- **Which dims.** The first compile of a jitted function is static. A jitted function remembers the
  shape each tensor input had (keyed by where the input came from: ``args[0]``,
  ``kwargs['past_key_values'].layers[0].keys``). When a later compile sees the same input with the
  same number of dims but other sizes, those dims are marked dynamic from then on (``DynamicDims``).
  ``thunder.jit(fn, dynamic=True)`` marks every dim of every non-parameter input from the first
  compile; ``dynamic=False`` never marks any. A dynamic dim of size 0 or 1 stays specialized (as in
  torch): broadcasting and squeezing treat those sizes differently.
- **Which ints.** The same rule for a Python ``int`` the program reads from outside the call (an
  argument, an attribute, a global: what ``interpreter/guards.py`` loads): once two compiles read
  different values at one place, later compiles trace it as a symbol of the same ShapeEnv
  (``DynamicDims.is_symbolic_int``, ``PrologueBuilder.add_symbolic_int``), fetched by the prologue,
  checked to be an ``int`` and ``>= 2``. 0, 1, negative ints, bools and enums stay constants.
- **The machinery is torch's own** (``torch.fx.experimental.symbolic_shapes.ShapeEnv``): a dynamic
  dim of an input is a ``torch.SymInt`` in the proxy's shape. Arithmetic on it gives other SymInts
  (``s0 + 1``) without recording anything; every Python decision on one (``bool`` of a comparison,
  ``int()``, ``__index__``, ``range``) is answered with the traced value *and recorded as a guard*
  in the ShapeEnv (``Eq(s0, 5)``, ``s0 + 1 <= s1``; an equality of two symbols replaces one by the
  other). SymInts cannot be hashed. So a meta function, decomposition or user branch that reads a
  size either computes symbolically or specializes, and what it specialized on is checked.
- **The prologue** reads each symbol from its tensor (``s0 = t_input_ids.shape[1]``), checks the
  tensor's other dims, dtype and device as before, and then, when the whole compile is done (the
  transforms and executors may add guards too), every guard of the ShapeEnv, every replacement
  (``s2 == s0 + 1``) and ``s >= 2`` for every symbol (``prologue.add_size_guards``). It passes the symbols to the
  computation as ``int`` inputs.
- **The computation** prints a symbolic size as the expression over those inputs
  (``torch.reshape(t0, (1, s0 + 1, 4, 8))``), so the printed trace runs as it reads.
- **What does not take part.** Fusion executors are not handed a trace with symbolic sizes (a
  fusion definition is built for one shape): ``claim_executors`` leaves them out and the trace's
  header says so. Training is static: a program that needs autograd is traced again without
  symbols (the backward would need the symbols as saved inputs; not built yet). Any error while
  compiling with symbols compiles the call statically instead; both fallbacks are recorded in
  ``compile_stats(fn).dynamic_fallbacks``.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import threading
from collections.abc import Iterator
from typing import Any

import torch

from thunder.core.proxies import NumberProxy, Proxy

__all__ = [
    "NUMBERS",
    "as_float",
    "DimProxy",
    "DynamicDims",
    "dynamic_dims",
    "current_dynamic_dims",
    "Tracing",
    "is_symbolic",
    "has_symbolic_sizes",
    "has_symbolic_arguments",
    "expression",
    "guard_lines",
    "ShapeSymbols",
]


# A number as an elementwise operand: Python's, a number proxy, or a symbolic size (torch.SymInt & co.)
NUMBERS = (numbers.Number, torch.SymInt, torch.SymFloat, torch.SymBool)


class DimProxy(NumberProxy):
    """A computation input standing for one symbolic size; its ``value`` is the size traced with.

    Never used by traced code itself (which sees the ``torch.SymInt``); it only names the input.
    """

    __slots__ = ()

    def __init__(self, value: int):
        Proxy.__init__(self, None, prefix="s")
        self.value = value
        self.roots = (self,)
        self.on_specialize = None

    def specialize(self) -> int:  # a DimProxy is never an operand: its SymInt is
        return int(self.value)


def is_symbolic(x: Any) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) and x.node.maybe_as_int() is None


def as_float(x: Any) -> Any:
    """``float(x)``, which for a symbolic size is a symbolic float (``float(s0)``), not a guard."""
    return torch.sym_float(x) if type(x) is torch.SymInt else float(x)


def has_symbolic_arguments(bound_symbol: Any) -> bool:
    """Whether a bound symbol reads a symbolic size: a SymInt argument, or a tensor with a symbolic dim."""
    from thunder.core.proxies import TensorProxy
    from thunder.core.pytree import tree_flatten

    values, _ = tree_flatten((bound_symbol.args, bound_symbol.kwargs))
    return any(
        is_symbolic(v) or (isinstance(v, TensorProxy) and any(type(s) is torch.SymInt for s in v.shape))
        for v in values
    )


def has_symbolic_sizes(trace: Any) -> bool:
    return any(isinstance(arg, DimProxy) for arg in trace.args)


class DynamicDims:
    """Which dims of which inputs a jitted function compiles as symbolic (automatic dynamic).

    ``mode``: ``None`` (automatic: a dim is dynamic once two compiles saw it with different sizes),
    ``True`` (every dim of every input but parameters), ``False`` (none).
    """

    def __init__(self, mode: bool | None = None):
        self.mode = mode
        self.seen: dict[str, tuple[int, ...]] = {}
        self.marked: dict[str, set[int]] = {}
        self.seen_ints: dict[str, int] = {}  # Python ints the program read, by where it read them
        self.marked_ints: set[str] = set()
        self._lock = threading.Lock()

    def dims(self, key: str, tensor: torch.Tensor) -> tuple[int, ...]:
        """The dims of ``tensor`` (read from ``key``) to trace as symbols; records its shape."""
        shape = tuple(tensor.shape)
        if self.mode is False:
            return ()
        with self._lock:
            before = self.seen.get(key)
            self.seen[key] = shape
            marked = self.marked.setdefault(key, set())
            if self.mode is True and not isinstance(tensor, torch.nn.Parameter):
                marked.update(range(len(shape)))
            elif before is not None and len(before) == len(shape):
                marked.update(d for d, (a, b) in enumerate(zip(before, shape)) if a != b)
            return tuple(d for d in sorted(marked) if d < len(shape) and shape[d] >= 2)

    def is_symbolic_int(self, key: str, value: int) -> bool:
        """Whether the Python int ``value`` (read from ``key``) is traced as a symbol; records it.

        The rule of the dims, for a number: symbolic once two compiles read other values there, and
        only from 2 on (0, 1 and negative values stay constants, checked by value). ``dynamic=True``
        does not make every int symbolic: only those that changed.
        """
        if self.mode is False:
            return False
        with self._lock:
            before = self.seen_ints.get(key)
            self.seen_ints[key] = value
            if before is not None and before != value:
                self.marked_ints.add(key)
            return value >= 2 and key in self.marked_ints


_state = threading.local()


class Tracing:
    """One trace under a ``DynamicDims`` policy; ``made_symbols``: whether some size became a symbol."""

    def __init__(self, policy: DynamicDims | None):
        self.policy = policy
        self.made_symbols = False


@contextlib.contextmanager
def dynamic_dims(policy: DynamicDims | None) -> Iterator[Tracing]:
    """While tracing: the policy ``PrologueBuilder.add_tensor`` asks which dims are symbolic.

    A jitted function called while another is traced gets its own (compiles are nested there).
    """
    before = getattr(_state, "tracing", None)
    _state.tracing = tracing = Tracing(policy)
    try:
        yield tracing
    finally:
        _state.tracing = before


def current_dynamic_dims() -> DynamicDims | None:
    tracing = getattr(_state, "tracing", None)
    return tracing.policy if tracing is not None else None


def _note_symbols_made() -> None:
    tracing = getattr(_state, "tracing", None)
    if tracing is not None:
        tracing.made_symbols = True


class ShapeSymbols:
    """The ShapeEnv of one compile and the names its symbols have in the traces."""

    def __init__(self) -> None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        # no duck sizing: two inputs of equal size are two symbols until the program equates them
        self.env = ShapeEnv(duck_shape=False)
        self.names: dict[Any, str] = {}  # sympy symbol -> the DimProxy's name
        self.proxies: list[DimProxy] = []
        # read by ``expression``, which finds a SymInt's ShapeEnv through its node
        self.env.thunder_printer = _printer(self.names)  # type: ignore[attr-defined]
        _note_symbols_made()
        _specialize_text_of_sizes()

    def size(self, value: int, where: str, proxy: DimProxy) -> torch.SymInt:
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        source = _size_source(where)
        symbol = self.env.create_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
        self.names[symbol] = proxy.name
        self.proxies.append(proxy)
        node = self.env.create_symintnode(symbol, hint=value, source=source)
        # Only values from 2 on are made symbolic (DynamicDims), so the symbol is free: torch returns a
        # plain int only for a constant (the 0 and 1 it specializes).
        assert isinstance(node, torch.SymInt)
        return node


def _specialize_text_of_sizes() -> None:
    """Text of one of our symbolic sizes is its traced value, guarded, however the text is made.

    torch prints a SymInt as its symbol (``s0``) and records no guard, so ``str(x.shape)``,
    ``"{}".format(n)``, ``",".join(map(str, x.shape))``, ``print(n)`` or an f-string of a tuple of
    sizes would give text that eager never gives, baked into every later call. Those conversions
    happen inside native code (``tuple.__repr__``, ``str.format``), out of the interpreter's reach,
    so the types' own ``__repr__`` and ``__format__`` answer with ``int(n)`` (``float``, ``bool``),
    which records ``Eq(s0, 5)``: a size turned into text specializes, as any decision on it does.
    Only sizes of a thunder ShapeEnv (``thunder_printer``) while a compile traces are concerned;
    any other SymInt (torch.compile's) prints as torch prints it.
    """
    for symbolic_type, concrete in ((torch.SymInt, int), (torch.SymFloat, float), (torch.SymBool, bool)):
        if "_thunder_original_text" in vars(symbolic_type):
            continue
        original = (symbolic_type.__repr__, symbolic_type.__format__)

        def text(self: Any, concrete: type = concrete, original: tuple = original) -> str:
            if _specializes_as_text(self):
                return repr(concrete(self))
            return original[0](self)

        def formatted(self: Any, spec: str, concrete: type = concrete, original: tuple = original) -> str:
            if _specializes_as_text(self):
                return format(concrete(self), spec)
            return original[1](self, spec)

        symbolic_type._thunder_original_text = original  # type: ignore[union-attr]  # our marker on torch's class
        symbolic_type.__repr__ = text  # type: ignore[method-assign]
        symbolic_type.__format__ = formatted  # type: ignore[method-assign]


def _specializes_as_text(x: Any) -> bool:
    node = getattr(x, "node", None)
    return (
        getattr(_state, "tracing", None) is not None
        and getattr(getattr(node, "shape_env", None), "thunder_printer", None) is not None
        and is_symbolic(x)
    )


@functools.cache
def _size_source_class() -> type:
    """A ShapeEnv wants a ``torch._guards.Source`` per symbol (for its messages): a minimal one, since
    ``torch._dynamo.source`` imports all of dynamo (seconds)."""
    import dataclasses
    import inspect

    from torch._guards import GuardSource, Source

    def where(self: Any) -> str:
        return self.where

    def constant(self: Any) -> GuardSource:
        return GuardSource.CONSTANT

    # torch 2.13 reads ``name`` and ``guard_source`` as properties, earlier versions call them
    attribute = not callable(inspect.getattr_static(Source, "name")) or isinstance(
        inspect.getattr_static(Source, "name"), functools.cached_property
    )
    wrap = property if attribute else (lambda f: f)
    namespace = {"__annotations__": {"where": str}, "name": wrap(where), "guard_source": wrap(constant)}
    return dataclasses.dataclass(frozen=True)(type("SizeSource", (Source,), namespace))


def _size_source(where: str) -> Any:
    return _size_source_class()(where)


def _printer(names: dict[Any, str]) -> Any:
    from torch.utils._sympy.printers import PythonPrinter

    class Printer(PythonPrinter):
        def _print_Symbol(self, symbol: Any) -> str:
            return names.get(symbol, symbol.name)

        def _print_ToFloat(self, expr: Any) -> str:
            return f"float({self._print(expr.args[0])})"

    return Printer()


def expression(x: Any) -> str:
    """A SymInt (SymFloat, SymBool) as Python over the traces' size inputs: ``s0 + 1``."""
    node = x.node
    constant = node.maybe_as_int() if isinstance(x, torch.SymInt) else None
    if constant is not None:
        return repr(int(constant))
    printer = getattr(node.shape_env, "thunder_printer", None) or _printer({})
    return printer.doprint(node.expr)


def guard_lines(symbols: ShapeSymbols) -> list[str]:
    """The conditions the prologue checks once every size input is read, as Python expressions.

    The ShapeEnv's guards and replacements are printed over the original symbols (each is an input
    read from its tensor), so none relies on another having been simplified away.
    """
    import sympy

    env, printer = symbols.env, _printer(symbols.names)
    conditions: dict[str, None] = {}
    for symbol in symbols.names:
        conditions[printer.doprint(sympy.Ge(symbol, 2))] = None  # 0 and 1 are never symbolic
    for symbol, replacement in env.replacements.items():
        if symbol in symbols.names:
            conditions[printer.doprint(sympy.Eq(symbol, replacement))] = None
    for guard in env.guards:
        if guard.expr is not sympy.true:
            conditions[printer.doprint(guard.expr)] = None
    for asserts in env.deferred_runtime_asserts.values():  # torch._check on a size it could not decide
        for runtime_assert in asserts:
            conditions[printer.doprint(runtime_assert.expr)] = None
    return list(conditions)
