"""Prologues: the cheap function that decides whether a cached computation applies to a call.

While a call is traced the frontend reports every value the computation depends on together with
its source (``args[0].fc1.weight``, a global, a closure cell). The prologue built here fetches each
again on later calls, checks tensors' metadata and Python values' equality, and returns the
computation's inputs; any mismatch raises ``GuardFailure`` and the next cache entry is tried.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import torch

from thunder.core import dtypes
from thunder.core.prologue_fetches import hoist_repeated_fetches
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.sources import KeysSource, Source
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, tracectx

__all__ = [
    "GuardFailure",
    "PrologueBuilder",
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
        and t.shape == shape
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
        f"if not (isinstance({name}, Tensor) and {name}.dtype is {dtype} and {name}.shape == {shape!r} "
        f"and {name}.requires_grad is {requires_grad!r} and {name}.device == {device_name}): raise GuardFailure"
    ]


def _print_unpack(bound_symbol: BoundSymbol) -> list[str]:
    (expression,) = bound_symbol.args
    return [f"{bound_symbol.output.name} = {expression}"]


# The local a value check binds its value to (``type(_checked := x.n) is not int or _checked != 3``).
CHECKED = "_checked"
# Builtins the printed checks call: a proxy or local of the same name would shadow them.
_BUILTINS_USED = ("type", "len", "tuple", "list", "dict", "int", "float", "str", "hasattr", "getattr",
                  "isinstance")  # fmt: skip


def _print_check_value(bound_symbol: BoundSymbol) -> list[str]:
    # Literals are compared inline, as check_tensor: a prologue runs on every call, and calling
    # check_value costs twice the comparison. ``True``, ``False`` and ``None`` are singletons, so
    # identity is their type and value at once; other literals compare type, then value.
    expression, expected_source, *shown = bound_symbol.args
    if shown:  # a value bound by name, as it would print: check_value also equates NaN with NaN
        return [f"check_value({expression}, {expected_source})  # {shown[0]}"]
    if expected_source in ("True", "False", "None"):
        return [f"if {expression} is not {expected_source}: raise GuardFailure"]
    type_name = type(ast.literal_eval(expected_source)).__name__
    return [
        f"if type({CHECKED} := {expression}) is not {type_name} or {CHECKED} != {expected_source}: "
        "raise GuardFailure"
    ]


def _print_check_keys(bound_symbol: BoundSymbol) -> list[str]:
    expression, expected_name, shown = bound_symbol.args
    return [f"check_keys({expression}, {expected_name})  # {shown}"]


CHECK_KEYS = Symbol(name="check_keys", id="prologue.check_keys", meta=lambda *args: None,
                    printer=_print_check_keys, fn=check_keys)  # fmt: skip


UNPACK = Symbol(name="unpack", id="prologue.unpack", meta=lambda expression: None, printer=_print_unpack)
CHECK_TENSOR = Symbol(
    name="check_tensor", id="prologue.check_tensor", meta=lambda *args: None, printer=_print_check_tensor
)
CHECK_VALUE = Symbol(name="check_value", id="prologue.check_value", meta=lambda *args: None,
                     printer=_print_check_value, fn=check_value)  # fmt: skip


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


def _print_check_empty(bound_symbol: BoundSymbol) -> list[str]:
    return [f"if {' or '.join(bound_symbol.args)}: raise GuardFailure"]


def _print_check_same(bound_symbol: BoundSymbol) -> list[str]:
    expression, first_expression = bound_symbol.args
    return [f"if {expression} is not {first_expression}: raise GuardFailure"]


CHECK_SAME = Symbol(
    name="check_same", id="prologue.check_same", meta=lambda *args: None, printer=_print_check_same
)


CHECK_EMPTY = Symbol(
    name="check_empty", id="prologue.check_empty", meta=lambda *args: None, printer=_print_check_empty
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
        self._guarded: set[str] = set()
        self._fetch_names: list[str] = []
        self._finished = False

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
        with tracectx(self.prologue):
            self.prologue.names.add(proxy.name)
            expression = source.expression(self._constant_name)
            self.prologue.record(BoundSymbol(UNPACK, (expression,), {}, proxy))
            # The device is bound by name: spelled as torch.device(...) it would be rebuilt on every call.
            device_name = self._constant_name(tensor.device)
            metadata = (proxy.shape, device_name, dtypes.to_torch_dtype(proxy.dtype), proxy.requires_grad)
            self.prologue.record(BoundSymbol(CHECK_TENSOR, (proxy, *metadata)))
        return proxy

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
        if literal:
            self._record(BoundSymbol(CHECK_VALUE, (expression, repr(value))))
        else:
            self._record(
                BoundSymbol(CHECK_VALUE, (expression, self._constant_name(value), shown_value(value)))
            )

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
            self._record(
                BoundSymbol(
                    CHECK_KEYS, (f"tuple({expression})", self._constant_name(keys), shown_value(keys))
                )
            )

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

    def finish(self) -> Trace:
        expression_index = {
            UNPACK: 0, CHECK_VALUE: 0, CHECK_IDENTITY: 0, CHECK_EMPTY: 0, CHECK_KEYS: 0, CHECK_CONTAINER: 0, CHECK_SAME: 0
        }  # fmt: skip
        self.prologue.bound_symbols[:] = _merge_empty_checks(
            hoist_repeated_fetches(self.prologue.bound_symbols, expression_index, self._fetch_name)
        )
        self.prologue.record(BoundSymbol(RETURN, (list(self.computation.args),)))
        self._finished = True
        self.prologue.header = "Prologue: fetches and checks the computation's inputs"
        return self.prologue


def _merge_empty_checks(bound_symbols: list[BoundSymbol]) -> list[BoundSymbol]:
    """Adjacent emptiness checks as one line (``if m._forward_hooks or m._forward_pre_hooks: ...``):
    a module's four hook tables cost one statement instead of four on every call."""
    merged: list[BoundSymbol] = []
    for bound in bound_symbols:
        if bound.symbol is CHECK_EMPTY and merged and merged[-1].symbol is CHECK_EMPTY:
            merged[-1] = BoundSymbol(CHECK_EMPTY, (*merged[-1].args, *bound.args))
        else:
            merged.append(bound)
    return merged
