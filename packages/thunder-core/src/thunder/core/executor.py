"""The executor protocol and the registry of executors.

An *operator executor* claims single bound symbols: for each symbol it implements it has an
operator (a symbol of its own, with the callable that runs) and a checker that says whether it can
take a given call. A *fusion executor* claims symbols too, and then turns each region of
neighbouring claimed symbols into one bound symbol (``nvFusion0``). Executors are tried in the
user's order; a symbol nobody claims is replaced by its decomposition (see
``transforms/claim_executors.py``).

Executors are found through the entry-point group ``thunder.executors`` (each entry point names an
``Executor`` object or a function returning one) and through ``register_executor``, which built-in
executors call so that a source tree without installed metadata finds them too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from thunder.core import devices, dtypes
from thunder.core.pytree import tree_map
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import get_tracectx

__all__ = [
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "register_executor",
    "get_executor",
    "get_all_executors",
    "get_default_executors",
    "resolve_executors",
    "ENTRY_POINT_GROUP",
    "to_torch_arguments",
]

ENTRY_POINT_GROUP = "thunder.executors"
log = logging.getLogger(__name__)


class Executor:
    """Abstract: something that can run some of a trace's symbols."""

    def __init__(self, name: str, *, version: str | None = None):
        self.name = name
        self.version = version

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        raise NotImplementedError

    def is_available(self) -> tuple[bool, str]:
        """Whether it can run here, and if not, why (a missing library, no GPU)."""
        return True, ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


@dataclass(frozen=True)
class Implementation:
    operator: Symbol | None
    checker: Callable[..., bool]
    execution_transform: Callable[..., Any] | None


def to_torch_value(x: Any) -> Any:
    """thunder's dtypes and devices as torch's; anything else unchanged."""
    if isinstance(x, dtypes.dtype):
        return x.torch_dtype
    if isinstance(x, devices.Device):
        return x.torch_device
    return x


def to_torch_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments as PyTorch callables take them (for executors that call PyTorch)."""
    return tree_map(to_torch_value, args), tree_map(to_torch_value, kwargs)


def _always(*args: Any, **kwargs: Any) -> bool:
    return True


class OperatorExecutor(Executor):
    """Claims bound symbols one at a time and runs each through one of its operators."""

    def __init__(self, name: str, *, version: str | None = None):
        super().__init__(name, version=version)
        self.implementations: dict[str, Implementation] = {}
        self.operators: dict[str, Symbol] = {}

    def register_operator(
        self,
        name: str,
        *,
        fn: Callable,
        like: Symbol | None = None,
        meta: Callable | None = None,
        module: str | None = None,
    ) -> Symbol:
        """An operator: a leaf symbol printed as ``module.name`` (or ``name``) that calls ``fn`` when run.

        ``like`` reuses the output rules of an existing symbol; ``meta`` gives them explicitly.
        """
        if meta is None:
            if like is None:
                raise ValueError(f"operator {name!r} needs a meta or a symbol it is like")
            meta = like.meta if like.is_leaf else _meta_from_decomposition(like)
        operator = Symbol(name=name, id=f"{self.name}.{name}", meta=meta, module=module, fn=fn, executor=self)
        self.operators[name] = operator
        return operator

    def register_implementation(
        self,
        symbol: Symbol,
        operator: Symbol | None = None,
        *,
        checker: Callable[..., bool] = _always,
        execution_transform: Callable[..., Any] | None = None,
    ) -> None:
        """Claim ``symbol``: run it as ``operator`` (same arguments) or as what ``execution_transform`` traces."""
        if (operator is None) == (execution_transform is None):
            raise ValueError("give exactly one of an operator and an execution_transform")
        self.implementations[symbol.id] = Implementation(operator, checker, execution_transform)

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        if bound_symbol.symbol.executor is self:
            return True
        implementation = self.implementations.get(bound_symbol.symbol.id)
        return implementation is not None and bool(
            implementation.checker(*bound_symbol.args, **bound_symbol.kwargs)
        )

    def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Turn a call's arguments into what this executor's callables take; identity by default."""
        return args, kwargs

    def lower(self, bound_symbol: BoundSymbol) -> list[BoundSymbol]:
        """The bound symbols, all of this executor's operators, that compute ``bound_symbol``."""
        if bound_symbol.symbol.executor is self:
            return [bound_symbol]
        implementation = self.implementations[bound_symbol.symbol.id]
        if implementation.operator is not None:
            args, kwargs = self.convert_arguments(bound_symbol.args, bound_symbol.kwargs)
            return [BoundSymbol(implementation.operator, args, kwargs, bound_symbol.output)]
        return _trace_execution_transform(implementation.execution_transform, bound_symbol)


def _meta_from_decomposition(symbol: Symbol) -> Callable:
    def meta(*args: Any, **kwargs: Any) -> Any:
        trace = get_tracectx()
        assert trace is not None and symbol.decomposition is not None
        with trace.subscope():  # what the decomposition records is discarded; only its outputs matter
            return symbol.decomposition(*args, **kwargs)

    return meta


def _trace_execution_transform(transform: Callable | None, bound_symbol: BoundSymbol) -> list[BoundSymbol]:
    from thunder.core.transforms.common import rename_outputs

    trace = get_tracectx()
    assert trace is not None and transform is not None
    with trace.subscope() as scope:
        result = transform(*bound_symbol.args, **bound_symbol.kwargs)
    return rename_outputs(list(scope), result, bound_symbol.output)


class FusionExecutor(Executor):
    """Claims symbols and fuses each region of claimed neighbours into one bound symbol."""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        raise NotImplementedError

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        if self.can_fuse(bound_symbol):
            return True
        if not bound_symbol.symbol.is_leaf and not bound_symbol.subsymbols:
            return True  # a decomposition that records nothing returns its input: nothing to run
        return bool(bound_symbol.subsymbols) and all(self.can_execute(s) for s in bound_symbol.subsymbols)

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One bound symbol computing ``region`` (leaf symbols this executor can fuse).

        ``outputs`` names the region's values that are read after it; only those need to leave it.
        """
        raise NotImplementedError


_registry: dict[str, Executor] = {}
_entry_points_loaded = False
_default_names: list[str] = ["torch"]


def register_executor(executor: Executor) -> Executor:
    _registry[executor.name] = executor
    return executor


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name in _registry:
            continue
        try:
            loaded = entry_point.load()
            executor = loaded() if not isinstance(loaded, Executor) and callable(loaded) else loaded
        except Exception as error:  # a broken plugin must not break thunder: say so and go on
            log.warning(
                "thunder: could not load executor %r from %s: %s", entry_point.name, entry_point.value, error
            )
            continue
        if isinstance(executor, Executor):
            register_executor(executor)


def get_all_executors() -> list[Executor]:
    _load_entry_points()
    return list(_registry.values())


def get_executor(name: str) -> Executor:
    _load_entry_points()
    try:
        return _registry[name]
    except KeyError:
        known = ", ".join(sorted(_registry)) or "none"
        raise ValueError(f"no executor named {name!r} is registered (known: {known})") from None


def get_default_executors() -> list[Executor]:
    """The executors used after the user's own: those of ``_default_names`` that are registered."""
    _load_entry_points()
    return [_registry[name] for name in _default_names if name in _registry]


def resolve_executors(executors: Sequence[str | Executor] | None) -> list[Executor]:
    """The user's executors in priority order, then the defaults they did not name."""
    chosen = [get_executor(e) if isinstance(e, str) else e for e in (executors or [])]
    for executor in get_default_executors():
        if executor not in chosen:
            chosen.append(executor)
    for executor in chosen:
        available, reason = executor.is_available()
        if not available:
            raise RuntimeError(f"executor {executor.name!r} is not available here: {reason}")
    return chosen
