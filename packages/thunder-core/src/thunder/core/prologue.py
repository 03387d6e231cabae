"""Prologues: the cheap function that decides whether a cached computation applies to a call.

While a call is traced the frontend reports every value the computation depends on together with
its source (``args[0].fc1.weight``, a global, a closure cell). The prologue built here fetches each
again on later calls, checks tensors' metadata and Python values' equality, and returns the
computation's inputs; any mismatch raises ``GuardFailure`` and the next cache entry is tried.

This module holds the checks' symbols and ``PrologueBuilder``. What ``finish`` makes faster lives in
modules beside it: ``prologue_fetches`` (a value fetched twice is bound once), ``prologue_hook_checks``
(hook tables checked only after a hook handle was made: ``HookRegistrations``) and
``prologue_tensor_checks`` (all tensors checked in one native call: ``TensorChecks``); the names of
the last two are importable from here too.
"""

from __future__ import annotations

import array
import ast
import copy
import math
import operator
import weakref
from typing import Any

import torch

from thunder.core import dtypes, symbolic_shapes
from thunder.core.prologue_fetches import hoist_repeated_fetches
from thunder.core.prologue_hook_checks import (
    CHECK_EMPTY,
    CHECK_HOOKS,
    CHECKED,
    HookRegistrations,
    is_hook_check,
    merge_empty_checks,
)

# TORCH_TENSOR_GUARDS is read here by ``PrologueBuilder.finish``: None (as tests set it) keeps the
# tensors' checks in Python.
from thunder.core.prologue_tensor_checks import (
    CHECK_TENSORS,
    TORCH_TENSOR_GUARDS,
    TensorChecks,
    fold_layout_guards,
    same_shape,
    tensor_checks,
)
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.sources import (
    ArgumentSource,
    CallSource,
    HasAttributeSource,
    KeysSource,
    KeywordSource,
    LengthSource,
    Source,
    TypeSource,
)
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, from_trace, tracectx

__all__ = [
    "GuardFailure",
    "HookRegistrations",
    "TensorChecks",
    "add_size_guards",
    "with_tensor_shapes",
    "fold_layout_guards",
    "PrologueBuilder",
    "builder_of",
    "check_tensor",
    "check_value",
    "check_identity",
    "check_keys",
    "shown_value",
]


class GuardFailure(Exception):
    """The inputs of a call differ from those a cached computation was built for."""


def check_tensor(t: Any, shape: tuple, device: torch.device, dtype: torch.dtype, requires_grad: bool) -> None:
    if not (
        isinstance(t, torch.Tensor)
        and t.dtype is dtype
        and same_shape(t.shape, shape)
        and t.requires_grad is requires_grad
        and t.device == device
    ):
        raise GuardFailure


def check_value(value: Any, expected: Any) -> None:
    if type(value) is not type(expected):
        raise GuardFailure
    if value != expected and not (value != value and expected != expected):  # NaN: the value traced for
        raise GuardFailure


def check_identity(value: Any, expected: Any) -> None:
    if value is not expected:
        raise GuardFailure


def check_keys(keys: tuple, expected: tuple) -> None:
    """A dict's keys, in order: strings and ints by value, any other key (an enum, a module) by identity."""
    if len(keys) != len(expected):
        raise GuardFailure
    for key, expected_key in zip(keys, expected):
        if key is not expected_key and not (
            type(key) is type(expected_key) and type(key) in (str, int) and key == expected_key
        ):
            raise GuardFailure


def _print_check_tensor(bound_symbol: BoundSymbol) -> list[str]:
    # Spelled out rather than a call of check_tensor: a prologue runs on every call, and the call
    # itself would cost as much as the checks.
    proxy, shape, device_name, dtype, requires_grad = bound_symbol.args
    name = proxy.name
    return [
        f"if not (isinstance({name}, Tensor) and {name}.dtype is {dtype} and {_shape_test(name, shape)} "
        f"and {name}.requires_grad is {requires_grad!r} and {name}.device == {device_name}): raise GuardFailure"
    ]


def _shape_test(name: str, shape: tuple) -> str:
    """``name.shape == (2, 3)``; with symbolic dims (None) their number and each other dim."""
    if None not in shape:
        return f"{name}.shape == {tuple(shape)!r}"
    return " and ".join(
        [f"{name}.dim() == {len(shape)}"]
        + [f"{name}.shape[{d}] == {n}" for d, n in enumerate(shape) if n is not None]
    )


def _print_unpack(bound_symbol: BoundSymbol) -> list[str]:
    (expression,) = bound_symbol.args
    return [f"{bound_symbol.output.name} = {expression}"]


# Builtins the printed checks call: a proxy or local of the same name would shadow them.
_BUILTINS_USED = ("type", "len", "tuple", "list", "dict", "int", "float", "str", "hasattr", "getattr",
                  "isinstance", "all", "map")  # fmt: skip


def _print_check_value(bound_symbol: BoundSymbol) -> list[str]:
    # Literals are compared inline, as check_tensor: a prologue runs on every call, and calling
    # check_value costs twice the comparison. ``True``, ``False`` and ``None`` are singletons, so
    # identity is their type and value at once; other literals compare type, then value.
    expression, expected_source, *shown = bound_symbol.args
    same = bound_symbol.kwargs.get("same")  # the object traced, bound by name (add_value_guard)
    if len(shown) == 2:  # a value bound by name and its type's name ("": compared by identity)
        shown_text, type_name = shown
        if not type_name:
            return [f"if {expression} is not {expected_source}: raise GuardFailure  # {shown_text}"]
        test = _typed_test(expression, type_name, expected_source, same)
        return [f"if {test}: raise GuardFailure  # {shown_text}"]
    if shown:  # a value bound by name that may hold a NaN: check_value equates NaN with NaN
        return [f"check_value({expression}, {expected_source})  # {shown[0]}"]
    if expected_source in ("True", "False", "None"):
        return [f"if {expression} is not {expected_source}: raise GuardFailure"]
    type_name = type(ast.literal_eval(expected_source)).__name__
    return [f"if {_typed_test(expression, type_name, expected_source, same)}: raise GuardFailure"]


def _typed_test(expression: str, type_name: str, expected_source: str, same: str | None) -> str:
    """The condition failing a value check: another type, or another value; with ``same``, the
    object traced itself passes first (one ``is``, not a call of ``type`` and a comparison)."""
    if same is None:
        return f"type({CHECKED} := {expression}) is not {type_name} or {CHECKED} != {expected_source}"
    return (
        f"({CHECKED} := {expression}) is not {same} and "
        f"(type({CHECKED}) is not {type_name} or {CHECKED} != {expected_source})"
    )


# Values of these exact types pass a value check when they are the very object traced: none can be
# changed in place or made another type (``__class__`` of an int, a str, ... cannot be assigned), and
# each is equal to itself (a float only if finite: NaN is compared by check_value).
_SAME_OBJECT_PASSES = (int, float, str, bytes, torch.device)
_MUTABLE_VALUE_TYPES = (set, bytearray, array.array)


def _passed_by_the_call(source: Source) -> bool:
    """An argument itself (``args[1]``, ``len(args)``): a new object on most calls, so the shortcut
    would cost an ``is`` and save nothing. What is read through one (``kwargs['cache'].device``) is
    the program's state, the same object from call to call."""
    while isinstance(source, (LengthSource, KeysSource, TypeSource, HasAttributeSource)):
        source = source.base
    return isinstance(source, (ArgumentSource, KeywordSource, CallSource))


def _print_check_keys(bound_symbol: BoundSymbol) -> list[str]:
    # The keys as they were, the same objects in the same order, pass at C speed (``is_`` is
    # ``operator.is_``); anything else goes to ``check_keys``, which compares strings and ints by value
    # and raises if they differ (39 environment variables' keys: 1.5 us a call in check_keys' loop).
    # The keys are the ones iterating the dict gives, as check_keys was always given: a subclass's
    # ``__len__`` is not asked.
    expression, expected_name, shown, count = bound_symbol.args
    return [
        f"if len({CHECKED} := tuple({expression})) != {count} or not all(map(is_, {CHECKED}, {expected_name})): "
        f"check_keys({CHECKED}, {expected_name})  # {shown}"
    ]


CHECK_KEYS = Symbol(name="check_keys", id="prologue.check_keys", meta=lambda *args: None,
                    printer=_print_check_keys, fn=check_keys)  # fmt: skip


UNPACK = Symbol(name="unpack", id="prologue.unpack", meta=lambda expression: None, printer=_print_unpack)
CHECK_TENSOR = Symbol(
    name="check_tensor", id="prologue.check_tensor", meta=lambda *args: None, printer=_print_check_tensor
)
CHECK_VALUE = Symbol(name="check_value", id="prologue.check_value", meta=lambda *args: None,
                     printer=_print_check_value, fn=check_value)  # fmt: skip


def with_tensor_shapes(prologue: Trace, shapes: dict[str, tuple[int, ...]]) -> Trace:
    """``prologue`` checking other shapes for the tensors named in ``shapes`` (FSDP's shards)."""
    new = from_trace(prologue, prologue.header)
    for bound_symbol in prologue.bound_symbols:
        if bound_symbol.symbol is CHECK_TENSOR and bound_symbol.args[0].name in shapes:
            proxy, _, *metadata = bound_symbol.args
            bound_symbol = bound_symbol.replace(args=(proxy, shapes[proxy.name], *metadata))
        elif bound_symbol.symbol is CHECK_TENSORS:
            name, entries, layouts = bound_symbol.args
            entries = tuple((p, shapes.get(p.name, shape), *rest) for p, shape, *rest in entries)
            bound_symbol = tensor_checks(
                entries, new.constants, name, layouts
            )  # the old prologue keeps its own
        new.bound_symbols.append(bound_symbol)
    return new


def _print_check_container(bound_symbol: BoundSymbol) -> list[str]:
    # Spelled out, as check_tensor: the type is checked with the length or keys, since a dict of two
    # keys has the length of a two-item list, and an empty dict is as false as 0.
    expression, type_name, what, expected = bound_symbol.args
    mismatch = {"len": f"len({expression}) != {expected}", "keys": f"tuple({expression}) != {expected}",
                "empty": expression, "type": ""}[what]  # fmt: skip
    condition = f"type({expression}) is not {type_name}" + (f" or {mismatch}" if mismatch else "")
    return [f"if {condition}: raise GuardFailure"]


CHECK_CONTAINER = Symbol(
    name="check_container",
    id="prologue.check_container",
    meta=lambda *args: None,
    printer=_print_check_container,
)


def _print_check_same(bound_symbol: BoundSymbol) -> list[str]:
    expression, first_expression = bound_symbol.args
    return [f"if {expression} is not {first_expression}: raise GuardFailure"]


CHECK_SAME = Symbol(
    name="check_same", id="prologue.check_same", meta=lambda *args: None, printer=_print_check_same
)


def _print_check_identity(bound_symbol: BoundSymbol) -> list[str]:
    expression, expected_name, *shown = bound_symbol.args  # inline, as check_value
    comment = f"  # {shown[0]}" if shown else ""
    return [f"if {expression} is not {expected_name}: raise GuardFailure{comment}"]


CHECK_IDENTITY = Symbol(name="check_identity", id="prologue.check_identity", meta=lambda *args: None,
                        printer=_print_check_identity, fn=check_identity)  # fmt: skip


def _print_check_type(bound_symbol: BoundSymbol) -> list[str]:
    # Spelled out, as check_tensor: the value is not checked, only that it still is an int (float).
    proxy, type_name = bound_symbol.args
    return [f"if type({proxy.name}) is not {type_name}: raise GuardFailure"]


CHECK_TYPE = Symbol(
    name="check_type", id="prologue.check_type", meta=lambda *args: None, printer=_print_check_type
)


def _print_check_sizes(bound_symbol: BoundSymbol) -> list[str]:
    return [f"if not ({condition}): raise GuardFailure" for condition in bound_symbol.args]


CHECK_SIZES = Symbol(
    name="check_sizes", id="prologue.check_sizes", meta=lambda *args: None, printer=_print_check_sizes
)


def add_size_guards(prologue: Trace) -> None:
    """The relations between symbolic sizes that the compile assumed (core/symbolic_shapes.py), checked
    after every size is read; called once the computation is compiled, before the prologue is."""
    symbols = getattr(prologue, "shape_symbols", None)
    if symbols is None or prologue._python_callable is not None:
        return
    conditions = symbolic_shapes.guard_lines(symbols)
    prologue.constants.setdefault("math", math)  # FloorToInt prints as math.floor
    prologue.bound_symbols.insert(
        len(prologue.bound_symbols) - 1, BoundSymbol(CHECK_SIZES, tuple(conditions))
    )


def _reflexive(value: Any) -> bool:
    """Equal to itself, as values of the kinds ``check_value`` compares are unless they hold a NaN."""
    try:
        return bool(value == value)
    except Exception:  # noqa: BLE001 -- a comparison that fails: leave it to check_value
        return False


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def shown_value(value: Any) -> str:
    """A value on one line of at most 80 characters: in the prologue's comments (a value it binds by
    name) and in recompile reasons (core/diagnostics/recompiles.py)."""
    if isinstance(value, torch.nn.Module):  # its repr lists every submodule
        return f"<{type(value).__name__} module>"
    if isinstance(value, type):
        text = f"{value.__module__}.{value.__qualname__}"
    elif callable(value) and hasattr(value, "__qualname__"):
        text = f"{getattr(value, '__module__', None) or '?'}.{value.__qualname__}"
    else:
        try:
            text = repr(value)
        except Exception:
            text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


class PrologueBuilder:
    """Collects what a computation depends on while it is traced, then prints the prologue."""

    def __init__(self, computation: Trace):
        self.computation = computation
        self.prologue = Trace("prologue")
        self.prologue.signature = "*args, **kwargs"
        self.prologue.constants.update(
            check_value=check_value,
            check_tensor=check_tensor,
            check_identity=check_identity,
            check_keys=check_keys,
            is_=operator.is_,
            torch=torch,
            Tensor=torch.Tensor,
            GuardFailure=GuardFailure,
        )
        # a proxy named ``Tensor`` (a user's parameter) would shadow the prologue's own names
        computation.names.update(self.prologue.constants, _BUILTINS_USED, (CHECKED,))
        self.prologue.names.update(_BUILTINS_USED, (CHECKED,))
        self._tensors: dict[int, tuple[Any, TensorProxy]] = {}
        self._tensor_sources: dict[int, Source] = {}  # where each tensor input was first read
        self._numbers: dict[str, NumberProxy] = {}  # by the expression that fetches them
        self._symbolic_ints: dict[str, Any] = {}  # Python ints traced as symbols, by fetching expression
        self._guarded: set[str] = set()
        self._fetch_names: list[str] = []
        self._finished = False
        # the symbols of the sizes traced as symbolic, if any (core/symbolic_shapes.py)
        self.shape_symbols: symbolic_shapes.ShapeSymbols | None = None
        # each tensor input's strides when traced, and the checks that eager's layout-dependent answers
        # are the traced ones (core/layouts.py): after the tensors' checks, which they rely on
        self.input_strides: dict[str, tuple[int, ...]] = {}
        self._layout_guards: list[BoundSymbol] = []
        _BUILDERS[computation] = weakref.ref(self)

    def _first_guard(self, key: str) -> bool:
        """True the first time a check is asked for ``key`` (the expression checked): later ones are dropped."""
        if key in self._guarded:
            return False
        self._guarded.add(key)
        return True

    def _fetch_name(self) -> str:
        name = f"_fetched{len(self._fetch_names)}"
        while name in self.prologue.names or name in self.computation.names:
            name = f"_{name}"
        self._fetch_names.append(name)
        self.prologue.names.add(name)
        return name

    def _constant_name(self, obj: Any) -> str:
        for name, value in self.prologue.constants.items():
            if value is obj:
                return name
        name = f"_constant{len(self.prologue.constants)}"
        self.prologue.constants[name] = obj
        return name

    def proxy_for(self, tensor: torch.Tensor) -> TensorProxy | None:
        """The proxy already made for this tensor object, if any."""
        known = self._tensors.get(id(tensor))
        return known[1] if known is not None else None

    def add_tensor(self, tensor: torch.Tensor, source: Source, name: str | None = None) -> TensorProxy:
        """The computation input standing for ``tensor``, fetched and checked by the prologue.

        A tensor reached again through another path is one input; the prologue checks that both
        paths still hold one tensor (called later with two, the trace would read only the first).
        """
        known = self.proxy_for(tensor)
        if known is not None:
            self.add_alias_guard(source, self._tensor_sources[id(tensor)])
            return known
        self._tensor_sources[id(tensor)] = source
        with tracectx(self.computation):
            proxy = TensorProxy.from_tensor(tensor, name=name)
        self._tensors[id(tensor)] = (tensor, proxy)
        self.computation.args.append(proxy)
        if tensor.layout is torch.strided and not _expanded_parameter(tensor):
            self.input_strides[proxy.name] = tuple(tensor.stride())
        with tracectx(self.prologue):
            self.prologue.names.add(proxy.name)
            expression = source.expression(self._constant_name)
            self.prologue.record(BoundSymbol(UNPACK, (expression,), {}, proxy))
            # The device is bound by name: spelled as torch.device(...) it would be rebuilt on every call.
            device_name = self._constant_name(tensor.device)
            checked_shape = self._make_sizes_symbolic(tensor, source, proxy)
            metadata = (checked_shape, device_name, dtypes.to_torch_dtype(proxy.dtype), proxy.requires_grad)
            self.prologue.record(BoundSymbol(CHECK_TENSOR, (proxy, *metadata)))
        return proxy

    def _make_sizes_symbolic(self, tensor: torch.Tensor, source: Source, proxy: TensorProxy) -> tuple:
        """The dims the jitted function's ``DynamicDims`` picks become symbols (core/symbolic_shapes.py):
        the prologue reads each from the tensor and passes it to the computation as an int. Returns
        the shape the tensor check compares, None at a symbolic dim."""
        policy = symbolic_shapes.current_dynamic_dims()
        dims = policy.dims(source.describe(), tensor) if policy is not None else ()
        if not dims:
            return proxy.shape
        if self.shape_symbols is None:
            # the prologue trace's own attribute (no Trace field): add_size_guards reads it with getattr
            self.shape_symbols = self.prologue.shape_symbols = symbolic_shapes.ShapeSymbols()  # type: ignore[attr-defined]
        shape: list[int | torch.SymInt] = list(proxy.shape)
        checked: list[int | None] = list(proxy.shape)
        for dim in dims:
            with tracectx(self.computation):
                size = symbolic_shapes.DimProxy(int(shape[dim]))
            self.computation.args.append(size)
            shape[dim] = self.shape_symbols.size(int(shape[dim]), f"{proxy.name}.shape[{dim}]", size)
            checked[dim] = None
            self.prologue.names.add(size.name)
            self.prologue.record(BoundSymbol(UNPACK, (f"{proxy.name}.shape[{dim}]",), {}, size))
        proxy.shape = torch.Size(shape)  # type: ignore[arg-type]  # SymInts too; the stub says int
        return tuple(checked)

    def add_symbolic_int(self, value: int, source: Source) -> torch.SymInt | None:
        """A Python int the program reads, as a symbol if the jitted function's ``DynamicDims`` says it
        changed between compiles (core/symbolic_shapes.py); None if it stays a constant (the caller
        checks its value).

        The prologue fetches it, checks that it still is an ``int`` and, with the sizes' conditions,
        that it is at least 2, and passes it to the computation as an input, as a symbolic size.
        """
        policy = symbolic_shapes.current_dynamic_dims()
        if policy is None or not policy.is_symbolic_int(source.describe(), value):
            return None
        expression = source.expression(self._constant_name)
        known = self._symbolic_ints.get(expression)
        if known is not None:
            return known
        if self.shape_symbols is None:
            # the prologue trace's own attribute (no Trace field): add_size_guards reads it with getattr
            self.shape_symbols = self.prologue.shape_symbols = symbolic_shapes.ShapeSymbols()  # type: ignore[attr-defined]
        with tracectx(self.computation):
            proxy = symbolic_shapes.DimProxy(value)
        self.computation.args.append(proxy)
        symbol = self._symbolic_ints[expression] = self.shape_symbols.size(value, source.describe(), proxy)
        with tracectx(self.prologue):
            self.prologue.names.add(proxy.name)
            self.prologue.record(BoundSymbol(UNPACK, (expression,), {}, proxy))
            self.prologue.record(BoundSymbol(CHECK_TYPE, (proxy, "int")))  # not a bool, float or tensor
        return symbol

    def add_value_guard(self, value: Any, source: Source) -> None:
        """Specialize on a Python value: the prologue checks it is equal on later calls."""
        expression = source.expression(self._constant_name)
        if not self._first_guard(expression):
            return
        if isinstance(source, KeysSource) and value == ():  # no hooks: one truth test, no tuple built
            self._record(BoundSymbol(CHECK_EMPTY, (source.base.expression(self._constant_name),)))
            return
        # Numbers, strings and None are spelled as literals; other values (dtypes, sizes, slices) are
        # bound by name, so that a call does not build them again, and shown in a comment.
        literal = type(value) in (bool, int, float, str, type(None)) and _finite(value)
        same = type(value) in _SAME_OBJECT_PASSES and _finite(value) and not _passed_by_the_call(source)
        if literal:
            kwargs = {"same": self._constant_name(value)} if same else {}
            self._record(BoundSymbol(CHECK_VALUE, (expression, repr(value)), kwargs))
            return
        # A mutable value (a set, a bytearray, an array.array) is compared with a copy: bound as itself,
        # one changed in place would be compared with itself and always pass (a stale trace)
        expected = copy.copy(value) if type(value) in _MUTABLE_VALUE_TYPES else value
        args: tuple[str, ...] = (expression, self._constant_name(expected), shown_value(value))
        if type(value) is torch.dtype:  # one object per dtype: equal is identical
            args += ("",)
        elif _reflexive(value):  # inline, as a literal; check_value equates NaN with NaN
            args += (self._constant_name(type(value)),)
        self._record(BoundSymbol(CHECK_VALUE, args, {"same": args[1]} if same and len(args) == 4 else {}))

    def add_alias_guard(self, source: Source, first_source: Source) -> None:
        """Specialize on two paths reaching one object (``f(s, s)``): the trace read it as one."""
        expression = source.expression(self._constant_name)
        first_expression = first_source.expression(self._constant_name)
        if expression == first_expression or not self._first_guard(f"{expression} is {first_expression}"):
            return
        self._record(BoundSymbol(CHECK_SAME, (expression, first_expression)))

    def add_empty_guard(self, source: Source) -> None:
        """Specialize on a value being empty (false): a module's hook tables, always dicts, have no hooks."""
        expression = source.expression(self._constant_name)
        if self._first_guard(expression):
            self._record(BoundSymbol(CHECK_EMPTY, (expression,)))

    def add_container_guard(self, value: Any, source: Source) -> None:
        """Specialize on a container's type and shape: its length (a tuple or list) or its keys (a dict).

        A dict's keys are compared as a tuple when all are strings or ints, else one by one (``check_keys``:
        an enum or a module key by identity). The items are guarded one by one by the caller.
        """
        expression = source.expression(self._constant_name)
        if not self._first_guard(expression):
            return
        container_type = type(value)
        type_name = (
            container_type.__name__
            if container_type in (list, tuple, dict)
            else self._constant_name(container_type)
        )
        if not isinstance(value, dict):
            self._record(BoundSymbol(CHECK_CONTAINER, (expression, type_name, "len", len(value))))
        elif not value:
            self._record(BoundSymbol(CHECK_CONTAINER, (expression, type_name, "empty", None)))
        elif all(type(key) in (str, int) for key in value):
            self._record(BoundSymbol(CHECK_CONTAINER, (expression, type_name, "keys", repr(tuple(value)))))
        else:
            self._record(BoundSymbol(CHECK_CONTAINER, (expression, type_name, "type", None)))
            keys = tuple(value)
            arguments = (expression, self._constant_name(keys), shown_value(keys), len(keys))
            self._record(BoundSymbol(CHECK_KEYS, arguments))

    def add_number(self, value: int | float, source: Source, name: str | None = None) -> NumberProxy:
        """The computation input standing for a Python number (``cache="symbolic values"``).

        The prologue fetches it and checks only its type. Once the traced program needs its value
        (a branch, a shape), the proxy is specialized and the prologue checks the value as well.
        """
        expression = source.expression(self._constant_name)
        known = self._numbers.get(expression)
        if known is not None:
            return known
        with tracectx(self.computation):
            proxy = NumberProxy(value, name=name)
        self._numbers[expression] = proxy
        self.computation.args.append(proxy)
        with tracectx(self.prologue):
            self.prologue.names.add(proxy.name)
            self.prologue.record(BoundSymbol(UNPACK, (expression,), {}, proxy))
            self.prologue.record(BoundSymbol(CHECK_TYPE, (proxy, type(value).__name__)))
        proxy.on_specialize = lambda: self._specialize(value, source)
        return proxy

    def _specialize(self, value: Any, source: Source) -> None:
        if self.prologue._python_callable is not None:
            raise RuntimeError(
                f"the value of {source.describe()} became a constant of the trace after its prologue was "
                "compiled; thunder cannot guard it any more (use cache='constant values')"
            )
        self.add_value_guard(value, source)

    def _record(self, bound_symbol: BoundSymbol) -> None:
        # A transform (autograd) may specialize a number after finish(): its check goes before the return.
        if self._finished:
            self.prologue.bound_symbols.insert(len(self.prologue.bound_symbols) - 1, bound_symbol)
        else:
            self.prologue.record(bound_symbol)

    def add_identity_guard(self, value: Any, source: Source) -> None:
        """Specialize on an object itself: the prologue checks it is the same object on later calls."""
        expression = source.expression(self._constant_name)
        if self._first_guard(expression):
            self._record(
                BoundSymbol(CHECK_IDENTITY, (expression, self._constant_name(value), shown_value(value)))
            )

    def add_layout_guard(self, bound_symbol: BoundSymbol) -> bool:
        """Check an input's layout where eager's answer depends on it (core/layouts.py); False once the
        prologue is compiled (too late to check anything more)."""
        if not self._finished:
            self._layout_guards.append(bound_symbol)
        elif self.prologue._python_callable is None:
            self._record(bound_symbol)
        else:
            return False
        return True

    def finish(self) -> Trace:
        expression_index = {
            UNPACK: (0,), CHECK_VALUE: (0,), CHECK_IDENTITY: (0,), CHECK_EMPTY: (0,), CHECK_KEYS: (0,),
            CHECK_CONTAINER: (0,), CHECK_SAME: (0, 1),
        }  # fmt: skip
        self.prologue.bound_symbols[:] = merge_empty_checks(
            hoist_repeated_fetches(self.prologue.bound_symbols, expression_index, self._fetch_name)
        )
        self._gate_hook_checks()
        if TORCH_TENSOR_GUARDS is not None:
            self._check_tensors_at_once()
        self.prologue.bound_symbols.extend(self._layout_guards)
        self.prologue.record(BoundSymbol(RETURN, (list(self.computation.args),)))
        self._finished = True
        self.prologue.header = "Prologue: fetches and checks the computation's inputs"
        return self.prologue

    def _gate_hook_checks(self) -> None:
        """The hook tables' emptiness checks as one block after the last fetch, run only when a hook
        handle was made since they last passed (``HookRegistrations``, core/prologue_hook_checks.py).
        Moving them later changes nothing but which check a recompile reason names first: no check
        reads through a hook table."""
        bound_symbols = self.prologue.bound_symbols
        hooks = [b for b in bound_symbols if is_hook_check(b)]
        if not hooks:
            return
        bound_symbols[:] = [b for b in bound_symbols if not is_hook_check(b)]
        seen = self._constant_name(HookRegistrations())
        count = "_handle_count"
        while count in self.prologue.names or count in self.computation.names:
            count = f"_{count}"
        self.prologue.names.add(count)
        expressions = tuple(expression for b in hooks for expression in b.args)
        bound_symbols.append(BoundSymbol(CHECK_HOOKS, expressions, {"seen": seen, "count": count}))

    def _check_tensors_at_once(self) -> None:
        """The tensors' checks as one call after the last fetch (``TensorChecks``,
        core/prologue_tensor_checks.py): no later check reads through a tensor (what is read from one
        needs no check of its own), so none relies on them having passed first."""
        bound_symbols = self.prologue.bound_symbols
        entries = tuple(b.args for b in bound_symbols if b.symbol is CHECK_TENSOR)
        if entries:
            bound_symbols[:] = [b for b in bound_symbols if b.symbol is not CHECK_TENSOR]
            name = "_tensor_checks"
            while name in self.prologue.names or name in self.computation.names:
                name = f"_{name}"
            self.prologue.names.add(name)
            bound_symbols.append(tensor_checks(entries, self.prologue.constants, name))


# The builder of each computation being traced, for core/layouts.py: weak both ways, a builder lives as
# long as its frontend keeps it.
_BUILDERS: weakref.WeakKeyDictionary[Trace, weakref.ref[PrologueBuilder]] = weakref.WeakKeyDictionary()


def builder_of(computation: Trace) -> PrologueBuilder | None:
    """The ``PrologueBuilder`` of ``computation`` while it is traced, else None."""
    ref = _BUILDERS.get(computation)
    return ref() if ref is not None else None


def _expanded_parameter(tensor: torch.Tensor) -> bool:
    """A parameter expanded when traced (a stride 0 on a dim of size above 1): thunder.distributed's
    FSDP traces a parameter so and calls with the gathered tensor. Its strides are not recorded, so
    ``layouts`` takes it as contiguous and never checks them (checking rejected every call)."""
    return isinstance(tensor, torch.nn.Parameter) and any(
        stride == 0 and size != 1 for stride, size in zip(tensor.stride(), tensor.shape)
    )
