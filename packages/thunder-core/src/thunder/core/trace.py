"""Traces: flat programs of bound symbols that print as Python functions.

A trace owns the names of its proxies, a list of bound symbols and the signature of the function
it prints as. Transforms never edit a trace in place: they build a new one with ``from_trace`` and
set its ``header`` to say what made it, so that every step of a compile stays printable.
"""

from __future__ import annotations

import keyword
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thunder.core.proxies import Proxy
    from thunder.core.symbol import BoundSymbol

__all__ = ["Trace", "from_trace", "get_tracectx", "tracectx", "safe_identifier"]

_local = threading.local()

RESERVED_NAMES = frozenset(
    {"torch", "prims", "ltorch", "dtypes", "devices", "operator", "thunder", "args", "kwargs"}
    | {"fallback", "inplace", "layouts", "dist"}
)


def get_tracectx() -> Trace | None:
    """The trace that symbols called now record into, if any."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def tracectx(trace: Trace) -> Iterator[Trace]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(trace)
    try:
        yield trace
    finally:
        stack.pop()


class Trace:
    """A program under construction or finished: its signature, bound symbols and names."""

    def __init__(self, name: str = "computation"):
        self.name = name
        self.args: list[Proxy] = []
        self.bound_symbols: list[BoundSymbol] = []
        self.header = ""
        self.decorators: list[str] = []
        # Names the printed program imports are never given to proxies.
        self.names: set[str] = set(RESERVED_NAMES)
        self._name_counter = 0
        self._scopes: list[list[BoundSymbol]] = [self.bound_symbols]
        # Called with a real torch.Tensor met while tracing; returns its proxy (set by the frontend).
        self.tensor_adopter: Callable[[Any], Proxy] | None = None
        self.constants: dict[str, Any] = {}  # Python objects the printed program refers to by name
        self.signature: str | None = None  # the parameter list when it is not ``trace.args``
        # The function takes one list holding ``trace.args`` and empties it (codegen.py): the caller
        # then holds no reference, so each input is freed at its last use (the backward's saved tensors).
        self.takes_argument_list = False
        # thunder.core.inplace.Mutations once the traced program mutates a tensor in place
        self.mutations: Any = None
        # .grad inside the traced program (transforms/inline_backward.py): input name -> GradState, the
        # ids of the bound symbols a backward went through, and the frontend's fetch of an input's
        # .grad as the call found it (a prologue input, or None checked by the prologue)
        self.input_gradients: dict[str, Any] = {}
        self.backward_freed: set[int] = set()
        self.grad_fetcher: Callable[[Any], Any] | None = None
        # names of proxies made by ops that may run as soon as their inputs exist (an optimizer's
        # update of one parameter, interpreter/optimizers.py): transforms/early_updates.py moves them
        self.early_outputs: set[str] = set()
        # per ``loss.backward()`` the program ran, the names made before it (transforms/program_remat.py)
        self.backward_boundaries: list[frozenset[str]] = []
        # values of tensors that require grad, overwritten by writes autograd does not see (under
        # no_grad, through detach): value name -> the tensor's; a backward that reads one raises, as
        # eager's does (core/inplace.py)
        self.overwritten: dict[str, str] = {}
        self._python_callable: Callable | None = None

    # names
    def make_name(self, prefix: str = "t") -> str:
        while True:
            name = f"{prefix}{self._name_counter}"
            self._name_counter += 1
            if name not in self.names:
                self.names.add(name)
                return name

    def add_name(self, name: str) -> str:
        """Reserve ``name``, or a variant of it if it is taken; returns the reserved name.

        Names come from users (parameters, buffers, keyword arguments) and are pasted into generated
        source, so they are first made a plain ASCII identifier (see ``safe_identifier``).
        """
        name = safe_identifier(name)
        candidate, suffix = name, 0
        while candidate in self.names or _CONSTANT_NAME.fullmatch(candidate):
            suffix += 1
            candidate = f"{name}_{suffix}"
        self.names.add(candidate)
        return candidate

    # recording
    def record(self, bound_symbol: BoundSymbol) -> None:
        self._scopes[-1].append(bound_symbol)

    @contextmanager
    def subscope(self) -> Iterator[list[BoundSymbol]]:
        """Bound symbols recorded inside go to the returned list instead of the current scope."""
        scope: list[BoundSymbol] = []
        self._scopes.append(scope)
        try:
            yield scope
        finally:
            self._scopes.pop()

    @property
    def depth(self) -> int:
        """How many decompositions deep what is recorded now goes (0: the trace itself)."""
        return len(self._scopes) - 1

    @property
    def at_top_level(self) -> bool:
        """Whether what is recorded now goes to the trace itself, not into a decomposition."""
        return len(self._scopes) == 1

    @property
    def output(self) -> Any:
        from thunder.core.symbol import RETURN

        for bound_symbol in reversed(self.bound_symbols):
            if bound_symbol.symbol is RETURN:
                return bound_symbol.args[0]
        return None

    # printing and running
    def python(self) -> str:
        from thunder.core.codegen import trace_to_python

        return trace_to_python(self)

    def python_callable(self) -> Callable:
        """The trace compiled into a Python function (compiled once, then reused)."""
        if self._python_callable is None:
            from thunder.core.codegen import compile_trace

            self._python_callable = compile_trace(self)
        return self._python_callable

    def __str__(self) -> str:
        return self.python()

    def __repr__(self) -> str:
        return f"<Trace {self.name}: {len(self.bound_symbols)} bound symbols>"


# Names codegen and prologues give the Python objects they bind (``_constant3``): never a proxy's.
_CONSTANT_NAME = re.compile(r"_constant[0-9]+")


def safe_identifier(name: str) -> str:
    """``name`` as an ASCII Python identifier that is not a keyword: other characters become ``_``.

    ASCII only, because Python reads identifiers in source NFKC-normalized (``"ﬁ"`` is ``fi``,
    fullwidth ``"ｔorch"`` is ``torch``): two different names could become one variable.
    """
    name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)
    if not name or name[0].isdigit() or keyword.iskeyword(name) or keyword.issoftkeyword(name):
        name = f"_{name}"
    return name


def from_trace(trace: Trace, header: str = "") -> Trace:
    """A new, empty trace with the signature and the names of ``trace``: transforms start here."""
    new = Trace(trace.name)
    new.args = list(trace.args)
    new.names = set(trace.names)
    new._name_counter = trace._name_counter
    new.decorators = list(trace.decorators)
    new.header = header
    new.signature = trace.signature
    new.takes_argument_list = trace.takes_argument_list
    new.constants = dict(trace.constants)
    new.early_outputs = trace.early_outputs
    new.backward_boundaries = trace.backward_boundaries
    new.overwritten = trace.overwritten
    return new
