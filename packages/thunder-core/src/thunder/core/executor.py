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
    "set_default_executors",
    "resolve_executors",
    "list_executors",
    "executor_kind",
    "ExecutorInfo",
    "ExecutorListing",
    "ENTRY_POINT_GROUP",
    "to_torch_arguments",
]

ENTRY_POINT_GROUP = "thunder.executors"
log = logging.getLogger(__name__)


_EFFECT_TAGS = frozenset({"random", "side_effect"})


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
    defers_to_fusion: bool = False  # a fusion executor earlier in the list takes the decomposition
    beats_fusion: bool = False  # a fusion executor earlier in the list leaves the symbol to the operator


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
        # what a later pass must respect: running it draws random numbers or changes outside state
        tags = like.tags & _EFFECT_TAGS if like is not None else frozenset()
        operator = Symbol(
            name=name, id=f"{self.name}.{name}", meta=meta, module=module, fn=fn, executor=self, tags=tags
        )
        self.operators[name] = operator
        return operator

    def register_implementation(
        self,
        symbol: Symbol,
        operator: Symbol | None = None,
        *,
        checker: Callable[..., bool] = _always,
        execution_transform: Callable[..., Any] | None = None,
        defers_to_fusion: bool = False,
        beats_fusion: bool = False,
    ) -> None:
        """Claim ``symbol``: run it as ``operator`` (same arguments) or as what ``execution_transform`` traces.

        ``defers_to_fusion``: when a fusion executor listed before this one can fuse part of the
        symbol's decomposition, leave the symbol decomposed for it (the operator is a convenience,
        not faster than fusing, e.g. a layer norm made of elementwise work and reductions).
        ``beats_fusion``: the opposite: where ``checker`` accepts a call, a fusion executor listed
        before this one leaves it to the operator instead of fusing its decomposition (a library
        kernel that runs about as fast as a fused one and costs no compile, e.g. PyTorch's RMS-norm
        backward against nvFuser's seconds for an inner-outer persistent kernel).
        """
        if (operator is None) == (execution_transform is None):
            raise ValueError("give exactly one of an operator and an execution_transform")
        if defers_to_fusion and beats_fusion:
            raise ValueError("an implementation defers to fusion or beats it, not both")
        self.implementations[symbol.id] = Implementation(
            operator, checker, execution_transform, defers_to_fusion, beats_fusion
        )

    def defers_to_fusion(self, bound_symbol: BoundSymbol) -> bool:
        implementation = self.implementations.get(bound_symbol.symbol.id)
        return implementation is not None and implementation.defers_to_fusion

    def beats_fusion(self, bound_symbol: BoundSymbol) -> bool:
        """Whether this executor's implementation of ``bound_symbol`` is to run even where a fusion
        executor comes first (where it can execute it: ``can_execute``)."""
        implementation = self.implementations.get(bound_symbol.symbol.id)
        return implementation is not None and implementation.beats_fusion

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

    def can_join(self, region: Sequence[BoundSymbol], bound_symbol: BoundSymbol) -> bool:
        """Whether ``bound_symbol`` may join ``region`` (the symbols already in it); yes by default.

        The core already keeps regions acyclic; this is for a backend's own limits (nvFuser: one
        tensor reduced over different axes in one fusion). A refused symbol tries another region.
        """
        return True

    def stages(self, region: Sequence[BoundSymbol], outputs: set[str]) -> list[list[BoundSymbol]]:
        """The parts of ``region`` that run as separate launches (its symbols, grouped); one by default.

        ``outputs`` names the values read after the region. Region formation moves a part to another
        region it is linked to where that saves launches (``transforms/region_moves.py``), for an
        executor that overrides this method only.
        """
        return [list(region)]

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One bound symbol computing ``region`` (leaf symbols this executor can fuse).

        ``outputs`` names the region's values that are read after it; only those need to leave it.
        """
        raise NotImplementedError

    # Whether ``write_inputs`` can take copy-backs into this executor's regions
    # (``transforms/fusion_copy_backs.py``).
    writes_inputs = False

    def write_inputs(
        self, region: BoundSymbol, copies: Sequence[BoundSymbol], outputs: set[str]
    ) -> BoundSymbol | None:
        """``region`` (a bound symbol ``fuse`` made) that also does ``copies``: the copy-backs
        ``inplace.copy_(input, value)`` of values it makes, which it writes into the inputs itself
        or copies at its end; None where it cannot. ``outputs`` names its values still read after it."""
        return None


_registry: dict[str, Executor] = {}
_entry_points_loaded = False
# Entry points that failed to load: name -> why (listed as unavailable instead of breaking thunder).
_broken_entry_points: dict[str, str] = {}
# Set by ``set_default_executors``; None: chosen by device and what is installed (``get_default_executors``).
_default_names: list[str] | None = None
# The automatic defaults: on a machine with a CUDA device, the first available fusion executor of
# DEFAULT_FUSION_PREFERENCE; then the available executors of DEFAULT_OPERATOR_EXECUTORS, in order
# (library executors such as attention go before "torch", which runs everything).
DEFAULT_FUSION_PREFERENCE: tuple[str, ...] = ("nvfuser", "triton")
# Operator executors that are defaults only where a CUDA device is (after the fusion executor): their
# kernels win there, and on the CPU they would run in Triton's interpreter.
DEFAULT_CUDA_OPERATOR_EXECUTORS: tuple[str, ...] = ("triton_gemv",)
DEFAULT_OPERATOR_EXECUTORS: list[str] = ["torch"]


def register_executor(executor: Executor) -> Executor:
    _registry[executor.name] = executor
    _broken_entry_points.pop(executor.name, None)
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
            reason = f"its entry point {entry_point.value} failed to load: {type(error).__name__}: {error}"
            log.warning("thunder: executor %r: %s", entry_point.name, reason)
            _broken_entry_points[entry_point.name] = reason
            continue
        if isinstance(executor, Executor):
            register_executor(executor)
        else:
            _broken_entry_points[entry_point.name] = (
                f"its entry point {entry_point.value} gave {type(executor).__name__}, not an Executor"
            )


def get_all_executors() -> list[Executor]:
    """Every registered executor (built-in and entry-point plugins), available here or not."""
    _load_entry_points()
    return list(_registry.values())


def executor_kind(executor: Executor) -> str:
    """``"fusion"``, ``"operator"``, or ``"other"`` for an executor of neither protocol."""
    if isinstance(executor, FusionExecutor):
        return "fusion"
    return "operator" if isinstance(executor, OperatorExecutor) else "other"


def _availability(executor: Executor) -> tuple[bool, str]:
    try:
        available, reason = executor.is_available()
    except Exception as error:  # a plugin's check that raises is a reason, not a crash
        return False, f"is_available() raised {type(error).__name__}: {error}"
    return bool(available), reason


@dataclass(frozen=True)
class ExecutorInfo:
    """One row of ``list_executors``: what an executor is and whether it can run here."""

    name: str
    kind: str  # "fusion", "operator", "other", or "broken" for a plugin that failed to load
    available: bool
    reason: str  # why it is unavailable; empty when available
    version: str | None
    default: bool  # whether ``thunder.jit`` uses it without being asked

    def __str__(self) -> str:
        status = "available" if self.available else f"unavailable: {self.reason}"
        default = ", default" if self.default else ""
        return f"{self.name} ({self.kind}{default}): {status}"


class ExecutorListing(list):
    """A list of ``ExecutorInfo`` that prints as a table."""

    def __str__(self) -> str:
        rows = [("name", "kind", "version", "default", "available", "why not")]
        for info in self:
            yes_no = "yes" if info.available else "no"
            rows.append(
                (info.name, info.kind, info.version or "", "yes" if info.default else "", yes_no, info.reason)
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows
        ]
        return "\n".join(line.rstrip() for line in lines)

    __repr__ = __str__


def list_executors() -> ExecutorListing:
    """Every executor thunder knows here: built-in ones and installed plugins, with why one is unavailable.

    Returns:
        One ``ExecutorInfo`` per executor (name, kind, availability and the reason, version, whether
        it is a default), printing as a table. Entry-point plugins that failed to load are listed as
        kind ``"broken"`` with the error.

    Example::

        print(thunder.list_executors())
        # name     kind      version  default  available  why not
        # torch    operator  2.13.0   yes      yes
        # nvfuser  fusion                      no         nvFuser is not installed (...)
    """
    defaults = {executor.name for executor in get_default_executors()}
    listing = ExecutorListing()
    for executor in get_all_executors():
        available, reason = _availability(executor)
        kind = executor_kind(executor)
        listing.append(
            ExecutorInfo(executor.name, kind, available, reason, executor.version, executor.name in defaults)
        )
    for name, reason in _broken_entry_points.items():
        listing.append(ExecutorInfo(name, "broken", False, reason, None, False))
    return listing


def _available_names() -> str:
    names = [info.name for info in list_executors() if info.available]
    return ", ".join(names) or "none"


def get_executor(name: str) -> Executor:
    """The registered executor called ``name``; a ValueError lists the known ones otherwise."""
    _load_entry_points()
    try:
        return _registry[name]
    except KeyError:
        if name in _broken_entry_points:
            raise ValueError(f"executor {name!r} could not be loaded: {_broken_entry_points[name]}") from None
        known = ", ".join(sorted(_registry)) or "none"
        raise ValueError(
            f"no executor named {name!r} is registered (known: {known}; available here: {_available_names()}). "
            f"Third-party executors register through the {ENTRY_POINT_GROUP!r} entry-point group."
        ) from None


def set_default_executors(executors: Sequence[str | Executor] | None) -> None:
    """Replace the automatic defaults by these executors (names or objects); ``None`` restores them."""
    global _default_names
    if executors is None:
        _default_names = None
        return
    chosen = [e if isinstance(e, Executor) else get_executor(e) for e in executors]
    for executor in chosen:
        register_executor(executor)
    _default_names = [executor.name for executor in chosen]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def get_default_executors() -> list[Executor]:
    """The executors ``thunder.jit`` uses when given none, chosen by device and what is installed.

    On a machine with a CUDA device: the first available fusion executor of
    ``DEFAULT_FUSION_PREFERENCE`` (nvFuser, else Triton) and the available executors of
    ``DEFAULT_CUDA_OPERATOR_EXECUTORS`` (Triton's GEMV); then, everywhere, the available executors
    of ``DEFAULT_OPERATOR_EXECUTORS`` (torch). On a CPU-only machine that is torch alone.
    ``set_default_executors`` overrides the choice.
    """
    _load_entry_points()
    if _default_names is not None:
        return [_registry[name] for name in _default_names if name in _registry]
    chosen: list[Executor] = []
    if _cuda_available():
        for name in DEFAULT_FUSION_PREFERENCE:
            executor = _registry.get(name)
            if executor is not None and _availability(executor)[0]:
                chosen.append(executor)
                break
        for name in DEFAULT_CUDA_OPERATOR_EXECUTORS:
            executor = _registry.get(name)
            if executor is not None and _availability(executor)[0]:
                chosen.append(executor)
    for name in DEFAULT_OPERATOR_EXECUTORS:
        executor = _registry.get(name)
        if executor is not None and _availability(executor)[0]:
            chosen.append(executor)
    return chosen


def resolve_executors(executors: Sequence[str | Executor] | None) -> list[Executor]:
    """The executors a compile uses: the user's in priority order, then defaults.

    Each default operator executor the user did not name follows theirs (so that everything can
    run); the default fusion executor follows only when the user named no fusion executor of their
    own. Unknown names raise ValueError, unavailable executors RuntimeError, each listing the
    executors available here.
    """
    if isinstance(executors, (str, Executor)):
        executors = [executors]
    chosen: list[Executor] = []
    for item in executors or []:
        if isinstance(item, str):
            executor = get_executor(item)
        elif isinstance(item, Executor):
            executor = item
        else:
            raise TypeError(f"executors are given by name or as Executor objects, not {type(item).__name__}")
        available, reason = _availability(executor)
        if not available:
            raise RuntimeError(
                f"executor {executor.name!r} is not available here: {reason} (available: {_available_names()})"
            )
        if executor not in chosen:
            chosen.append(executor)
    user_fuses = any(isinstance(executor, FusionExecutor) for executor in chosen)
    for executor in get_default_executors():
        if executor in chosen or (user_fuses and isinstance(executor, FusionExecutor)):
            continue
        chosen.append(executor)
    return chosen
