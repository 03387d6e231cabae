"""Symbols (operations) and bound symbols (one call of an operation, recorded in a trace).

A ``Symbol`` is either a leaf (a prim or an executor's operator: its ``meta`` computes output
proxies from input proxies) or a composite (a torch-language function: its ``decomposition`` is
traced, and the symbols it calls become the bound symbol's ``subsymbols``). Decomposing a symbol
that no executor claims is therefore just replacing it by its subsymbols.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.trace import get_tracectx

__all__ = ["Symbol", "BoundSymbol", "RETURN", "DEL", "make_prim", "make_composite", "made_on_first_use"]


def made_on_first_use(getter: Callable[[], Symbol]) -> Callable[[], Symbol]:
    """A function that makes one symbol on its first call (what it needs may not exist at import time:
    the torch executor) and returns that same one after. The disk cache refers to such a symbol
    through its getter (``core/disk_cache.py``): a module global holding it would be None in a new
    process until something asked for it, and a loaded program would hold None for the symbol."""
    cached = functools.cache(getter)
    cached.makes_symbol = True  # type: ignore[attr-defined]
    return cached


@dataclass(frozen=True, eq=False)
class Symbol:
    """An operation that can appear in a trace.

    ``module`` is what the printed call is prefixed with (``prims``, ``ltorch``,
    ``torch.nn.functional``); ``fn`` is the callable that runs when an execution trace calls an
    executor's operator; ``tags`` name the families it belongs to (``elementwise``, ``reduction``).
    """

    name: str
    id: str
    meta: Callable | None = None
    decomposition: Callable | None = None
    module: str | None = None
    fn: Callable | None = None
    executor: Any = None
    printer: Callable[[BoundSymbol], list[str]] | None = None
    tags: frozenset[str] = frozenset()

    @property
    def is_leaf(self) -> bool:
        return self.decomposition is None

    @property
    def call_name(self) -> str:
        return f"{self.module}.{self.name}" if self.module else self.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        trace = get_tracectx()
        if trace is None:
            raise RuntimeError(f"{self.id} records into a trace and can only be called while tracing")
        if trace.tensor_adopter is not None:  # the frontend traces the user's program
            if _autocast_enabled():
                raise _autocast_error(self)
            args, kwargs = tree_map(_adopter(trace.tensor_adopter, self.name), (args, kwargs))
        if not accepts_number_proxies(self):  # shapes, dims, flags: the values themselves, guarded
            args, kwargs = specialize_numbers((args, kwargs))
        user_arguments = (args, kwargs)
        mutations = trace.mutations
        if mutations is not None:  # in-place ops happened: read the current values (core/inplace.py)
            args, kwargs = mutations.resolve(user_arguments)
        outer_call = mutations.user_call if mutations is not None else None
        if mutations is not None and trace.at_top_level:  # which tensor the user passed (layouts)
            mutations.user_call = _user_tensors(user_arguments, (args, kwargs))
        try:
            if self.is_leaf:
                assert self.meta is not None, f"{self.id} has neither a meta nor a decomposition"
                output = self.meta(*args, **kwargs)
                subsymbols: tuple[BoundSymbol, ...] = ()
            else:
                assert self.decomposition is not None
                with trace.subscope() as scope:
                    output = self.decomposition(*args, **kwargs)
                subsymbols = tuple(scope)
        finally:
            if mutations is not None and outer_call is not None:
                mutations.user_call = outer_call
        # Recorded under torch.no_grad() in the user's code: autograd treats the outputs as constants.
        grad_enabled = torch.is_grad_enabled()
        _as_eager_requires_grad(self, args, output, grad_enabled)
        bound_symbol = BoundSymbol(self, args, kwargs, output, subsymbols, grad_enabled)
        trace.record(bound_symbol)
        returns_an_input = (
            any(a is output for a in args)
            if isinstance(output, TensorProxy)
            else isinstance(output, (tuple, list)) and any(o is a for o in output for a in args)
        )
        if trace.mutations is not None or returns_an_input:
            from thunder.core.inplace import note_aliasing  # views, and ops that return an input

            output = note_aliasing(trace, bound_symbol, user_arguments)
        return output

    def __repr__(self) -> str:
        return f"<Symbol {self.id}>"


def _user_tensors(user_arguments: Any, resolved: Any) -> dict[int, Any]:
    """The tensor proxies the user's code passed, by the id of the current value each resolved to."""
    from thunder.core.pytree import tree_leaves

    return {
        id(value): held
        for held, value in zip(tree_leaves(user_arguments), tree_leaves(resolved))
        if isinstance(held, TensorProxy) and isinstance(value, TensorProxy)
    }


_autocast_enabled = getattr(torch._C, "_is_any_autocast_enabled", None) or (
    lambda: torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
)


def _autocast_error(symbol: Symbol) -> NotImplementedError:
    """torch.autocast changes the dtypes torch's kernels compute in; the trace does not model it, and
    would run in the types it was traced with (or, called under autocast, in autocast's types where
    the trace had dropped a ``.float()`` it found redundant): an answer eager never gives."""
    return NotImplementedError(
        f"{symbol.id} called under torch.autocast: thunder does not support autocast (its mixed-precision "
        "casts would be missing from the trace). Cast explicitly (x.to(torch.bfloat16)), or call the jitted "
        "function outside torch.autocast, or compile with torch.compile(fn, backend=thunder.dynamo.ThunderCompiler()), "
        "which leaves autocast regions to PyTorch"
    )


def accepts_number_proxies(symbol: Symbol) -> bool:
    from thunder.core import python_ops

    return python_ops.accepts_number_proxies(symbol)


def specialize_numbers(x: Any) -> Any:
    from thunder.core import python_ops

    return python_ops.specialize_numbers(x)


# Tags of symbols whose outputs never require grad in eager: ``detach``, factories reading only metadata.
_NO_GRAD_TAGS = ("stop_gradient", "reads_metadata")


def _as_eager_requires_grad(symbol: Symbol, args: tuple, output: Any, grad_enabled: bool) -> None:
    """Clear ``requires_grad`` on new outputs that do not require grad in eager (metas propagate it from
    the inputs whatever the grad mode): made under no_grad, by ``detach``, from metadata only, or by
    ``x.type_as(y)`` when only ``y`` requires grad. The program reads the flag (``if y.requires_grad``)."""
    tags = symbol.tags
    if grad_enabled and tags.isdisjoint(_NO_GRAD_TAGS):
        if "reads_metadata_of_others" not in tags:
            _clear_on_integer_outputs(args, output)
            return
        first = args[0] if args else None
        if isinstance(first, TensorProxy) and first.requires_grad:
            return
    inputs = {id(a) for a in tree_leaves(args)}
    for proxy in tree_leaves(output):
        if isinstance(proxy, TensorProxy) and proxy.requires_grad and id(proxy) not in inputs:
            proxy.requires_grad = False


def _clear_on_integer_outputs(args: tuple, output: Any) -> None:
    """An integer or bool result never requires grad in eager (``(x > 0).requires_grad`` is False), nor
    what is computed from it alone (``((x > 0) + 0.5).requires_grad``)."""
    inputs = {id(a) for a in tree_leaves(args)}
    for proxy in tree_leaves(output):
        if (
            isinstance(proxy, TensorProxy)
            and proxy.requires_grad
            and id(proxy) not in inputs
            and not (proxy.dtype.is_floating_point or proxy.dtype.is_complex)
        ):
            proxy.requires_grad = False


def _adopter(adopt: Callable[[Any], Proxy], name: str) -> Callable[[Any], Any]:
    def adopted(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return adopt(x)
        kind = type(x)
        if kind.__module__ == "numpy":
            if getattr(x, "shape", None) == () and kind.__name__ != "ndarray":
                return x.item()  # a NumPy scalar (np.int64(4)) is the Python number, as eager reads it
            raise NotImplementedError(
                f"a NumPy {kind.__name__} as an argument of {name} is not supported by thunder: its data would "
                "be a constant of the compiled program. Pass a tensor (torch.as_tensor(...)) instead"
            )
        if getattr(kind, "reads_data", False):  # float(t) of a tensor (thunder/torch/tensor_numbers.py)
            return x.reads_data()
        return x

    return adopted


@dataclass(frozen=True, eq=False)
class BoundSymbol:
    """One call of a symbol: its arguments (proxies and Python values), output and decomposition."""

    symbol: Symbol
    args: tuple
    kwargs: dict = field(default_factory=dict)
    output: Any = None
    subsymbols: tuple[BoundSymbol, ...] = ()
    grad_enabled: bool = True  # whether torch's grad mode was on when the call was recorded

    # Every pass asks each bound symbol for its proxies, several times (a GPT-2 training compile:
    # 85,000 calls, a quarter of the transforms' time): they are collected once, on first use. A
    # bound symbol never changes (``replace`` makes a new one, whose lists start empty).

    def proxy_args(self) -> list[Proxy]:
        """The proxies this call reads, in order, each once."""
        found = self.__dict__.get("_proxy_args")
        if found is None:
            found = _unique_proxies(tree_leaves((self.args, self.kwargs)))
            object.__setattr__(self, "_proxy_args", found)
        return list(found)

    def proxy_outputs(self) -> list[Proxy]:
        found = self.__dict__.get("_proxy_outputs")
        if found is None:
            found = _unique_proxies(tree_leaves(self.output))
            object.__setattr__(self, "_proxy_outputs", found)
        return list(found)

    def __getstate__(self) -> dict:
        """The fields only: a pickle (the on-disk cache's key) must not depend on what was asked before."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_proxy_args", "_proxy_outputs")}

    def replace(self, **changes: Any) -> BoundSymbol:
        return dataclasses.replace(self, **changes)


def _unique_proxies(values: list[Any]) -> list[Proxy]:
    seen: dict[str, Proxy] = {}
    for value in values:
        if isinstance(value, Proxy) and value.name not in seen:
            seen[value.name] = value
    return list(seen.values())


def make_prim(name: str, meta: Callable, *, tags: frozenset[str] = frozenset()) -> Symbol:
    """A primitive: a leaf of the torch language that every executor must be able to run."""
    return Symbol(name=name, id=f"prims.{name}", meta=meta, module="prims", tags=tags)


def make_composite(
    name: str, decomposition: Callable, *, module: str = "ltorch", tags: frozenset[str] = frozenset()
) -> Symbol:
    """A symbol defined by the symbols its decomposition calls."""
    return Symbol(name=name, id=f"{module}.{name}", decomposition=decomposition, module=module, tags=tags)


def _print_return(bound_symbol: BoundSymbol) -> list[str]:
    from thunder.core.codegen import value_to_python

    return [f"return {value_to_python(bound_symbol.args[0])}"]


def _print_del(bound_symbol: BoundSymbol) -> list[str]:
    return [f"del [{', '.join(proxy.name for proxy in bound_symbol.args)}]"]


def _return_meta(value: Any) -> None:
    return None


RETURN = Symbol(name="return", id="thunder.return", meta=_return_meta, printer=_print_return)
DEL = Symbol(name="del", id="thunder.del", meta=lambda *proxies: None, printer=_print_del)

# A proxy is never mutated; TensorProxy is re-exported here for the convenience of metas.
__all__ += ["TensorProxy"]
