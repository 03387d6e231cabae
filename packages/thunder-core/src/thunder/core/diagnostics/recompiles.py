"""Why a call recompiled: the check of the cached prologue that rejected it, with the values before and after.

A prologue stops at its first failed check by raising ``GuardFailure``, and says nothing more: the
checks are spelled out inline so that a cache hit costs as little as possible. The reason is worked
out only on a miss, which costs a whole compile anyway: the prologue of the most recently used entry
runs once more, and the traceback of its failure tells which line of the prologue failed; that
line's bound symbol (a ``check_value``, a ``check_tensor``, ...) says what was expected, and the
failed frame holds what the call passed. Cache hits pay nothing for this.

Every reason is kept, the last ``REASONS_KEPT`` of them, in ``compile_stats(fn).recompile_reasons``,
and logged to the ``thunder.recompiles`` logger, which ``THUNDER_LOGS=recompiles`` prints to stderr
(log_channels.py)::

    thunder: recompiling scale (train.py:12) because factor changed: 2 -> 3 (check_value in the prologue)

A reason holds strings only, never the call's values: it must not keep a tensor alive.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from thunder.core import layouts
from thunder.core.diagnostics.log_channels import channel_logger
from thunder.core.prologue import (
    CHECK_CONTAINER,
    CHECK_EMPTY,
    CHECK_HOOKS,
    CHECK_IDENTITY,
    CHECK_KEYS,
    CHECK_SAME,
    CHECK_TENSOR,
    CHECK_TENSORS,
    CHECK_TYPE,
    CHECK_VALUE,
    UNPACK,
    GuardFailure,
    shown_value,
)
from thunder.core.prologue_fetches import HOIST
from thunder.core.prologue_write_overlaps import CHECK_WRITES_APART
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import Trace

__all__ = ["RecompileReason", "REASONS_KEPT", "explain_miss", "record_recompile"]

REASONS_KEPT = 16  # compile_stats(fn).recompile_reasons holds the last this many


@dataclass(frozen=True)
class RecompileReason:
    """Why one call missed the cache: ``str(reason)`` is the line ``THUNDER_LOGS=recompiles`` prints.

    ``what`` names the value as the program knows it (``factor``, ``global __main__.SCALE``, ``x``),
    ``before`` and ``after`` are what the cached entry was compiled for and what the call passed
    (``"2"`` and ``"3"``; ``"shape (2, 3)"`` and ``"shape (4, 3)"``; None when the check has no
    values), ``check`` is the prologue's check that failed and ``prologue_line`` its line.
    """

    message: str
    what: str
    before: str | None
    after: str | None
    check: str
    prologue_line: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class _Finding:
    """What failed, before the function's name and place are added to it."""

    summary: str  # "factor changed: 2 -> 3"
    what: str
    before: str | None = None
    after: str | None = None
    check: str = "prologue"
    prologue_line: str = ""


def record_recompile(stats: Any, fn: Any, cache: list, args: tuple, kwargs: dict) -> RecompileReason:
    """Explain a cache miss of ``fn``, keep the reason in ``stats`` and log it; never raises."""
    reason = explain_miss(fn, cache, args, kwargs)
    reasons = stats.recompile_reasons
    reasons.append(reason)
    del reasons[:-REASONS_KEPT]
    channel_logger("recompiles").info("%s", reason.message)
    return reason


def explain_miss(fn: Any, cache: list, args: tuple, kwargs: dict) -> RecompileReason:
    """Why the most recently used of ``cache``'s entries (``CacheEntry``, least recently used first) did
    not accept the call."""
    entry = cache[-1]
    try:
        finding = _explain_entry(entry, fn, args, kwargs)
    except Exception as error:  # explaining must never break a call that would compile fine
        finding = _Finding(f"the cached prologue rejected the call (not explained: {_error_text(error)})", "")
    others = len(cache) - 1
    message = f"thunder: recompiling {_function_label(fn)} because {finding.summary}"
    if finding.prologue_line:
        message += f" ({finding.check} in the prologue)"
    if others:
        message += f"; {others} other cache {'entry' if others == 1 else 'entries'} did not match either"
    return RecompileReason(
        message, finding.what, finding.before, finding.after, finding.check, finding.prologue_line
    )


def _explain_entry(entry: Any, fn: Any, args: tuple, kwargs: dict) -> _Finding:
    # The prologue first, although the cache tests grad mode first: "x changed: shape ..." says more
    # than "grad mode changed" about an entry that would fail either way.
    prologue = entry.prologue
    try:
        prologue(*args, **kwargs)
    except Exception as error:
        try:
            return _explain_failure(error, prologue, entry.prologue_traces[-1], fn)
        finally:
            del error  # its traceback holds the call's values
    if entry.grad_mode is not None and entry.grad_mode is not torch.is_grad_enabled():
        before, after = (_on_off(entry.grad_mode), _on_off(not entry.grad_mode))
        return _Finding(f"grad mode changed: {before} -> {after}", "grad mode", before, after, "grad mode")
    return _Finding("the cached prologue accepts the call now (the program's state changed meanwhile)", "")


def _explain_failure(error: Exception, prologue: Callable, trace: Trace, fn: Any) -> _Finding:
    frame, line_number, inner = _failed_frames(error, getattr(prologue, "__code__", None))
    if frame is None:
        return _Finding(f"the cached prologue rejected the call ({_error_text(error)})", "")
    line = linecache.getline(frame.f_code.co_filename, line_number).strip()
    bound_symbol = _bound_symbol_of_line(trace, line)
    if bound_symbol is None:
        return _Finding(f"a prologue check failed: {line}", line, check="prologue", prologue_line=line)
    describer = _Describer(trace, frame.f_globals, fn)
    check = bound_symbol.symbol.name
    if not isinstance(error, GuardFailure):  # the fetch itself failed: a missing attribute, key or item
        what = describer.describe(_fetched_expression(bound_symbol))
        summary = f"{what} could not be read ({_error_text(error)})"
        return _Finding(summary, what, check=check, prologue_line=line)
    explain = _EXPLAINERS.get(bound_symbol.symbol.id)
    if explain is None:
        return _Finding(f"a prologue check failed: {line}", line, check=check, prologue_line=line)
    finding = explain(bound_symbol, frame, inner, describer)
    return _Finding(finding.summary, finding.what, finding.before, finding.after, check, line)


def _failed_frames(error: BaseException, code: Any) -> tuple[FrameType | None, int, FrameType | None]:
    """The prologue's frame, its failed line, and the frame of the check it called there (if any)."""
    prologue_frame, line_number, inner = None, 0, None
    for frame, number in traceback.walk_tb(error.__traceback__):
        if prologue_frame is not None and inner is None:
            inner = frame
        if frame.f_code is code:
            prologue_frame, line_number, inner = frame, number, None
    return prologue_frame, line_number, inner


def _bound_symbol_of_line(trace: Trace, line: str) -> BoundSymbol | None:
    for bound_symbol in trace.bound_symbols:
        printer = bound_symbol.symbol.printer
        if printer is not None and any(printed.strip() == line for printed in printer(bound_symbol)):
            return bound_symbol
        if bound_symbol.symbol is layouts.guard_symbol() and line.startswith(
            f"layouts.guard({bound_symbol.args[0].name},"
        ):
            return bound_symbol  # printed as a call; its explainer reads the guard's own arguments
    return None


def _fetched_expression(bound_symbol: BoundSymbol) -> str:
    symbol = bound_symbol.symbol
    if symbol is HOIST:
        return bound_symbol.args[1]
    if symbol in (CHECK_TENSOR, CHECK_TYPE):
        return bound_symbol.args[0].name
    return bound_symbol.args[0]


# Explainers, one per kind of check: (bound symbol, prologue frame, frame of the called check, describer)


def _explain_value(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    # the check is inline (or a call of check_value): both sides are read again in the prologue's frame
    value, expected = _evaluate(bound.args[0], frame), _evaluate(bound.args[1], frame)
    what = describer.describe(bound.args[0])
    before, after = shown_value(expected), shown_value(value)
    if type(value) is not type(expected):
        before += f" ({type(expected).__name__})"
        after += f" ({type(value).__name__})"
    return _Finding(f"{what} changed: {before} -> {after}", what, before, after)


def _explain_identity(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    value, expected = _evaluate(bound.args[0], frame), _evaluate(bound.args[1], frame)
    what = describer.describe(bound.args[0])
    before, after = shown_value(expected), shown_value(value)
    return _Finding(f"{what} is another object: {before} -> {after}", what, before, after)


def _explain_keys(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    keys, expected = inner.f_locals["keys"], inner.f_locals["expected"]
    what = describer.describe(bound.args[0])
    before, after = shown_value(expected), shown_value(keys)
    return _Finding(f"{what} changed: {before} -> {after}", what, before, after)


def _explain_tensor(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    proxy, shape, device_name, dtype, requires_grad = bound.args
    what = describer.describe(proxy.name)
    value = frame.f_locals[proxy.name]
    if not isinstance(value, torch.Tensor):
        before, after = "a tensor", f"a {type(value).__qualname__}"
        return _Finding(f"{what} changed: {before} -> {after}", what, before, after)
    expected = {
        "shape": tuple(shape),
        "dtype": dtype,
        "requires_grad": requires_grad,
        "device": frame.f_globals.get(device_name),
    }
    actual = {
        "shape": tuple(value.shape),
        "dtype": value.dtype,
        "requires_grad": value.requires_grad,
        "device": value.device,
    }
    changed = [field for field in expected if expected[field] != actual[field]]
    befores = [f"{field} {shown_value(expected[field])}" for field in changed]
    afters = [f"{field} {shown_value(actual[field])}" for field in changed]
    changes = ", ".join(
        f"{field} {shown_value(expected[field])} -> {shown_value(actual[field])}" for field in changed
    )
    return _Finding(f"{what} changed: {changes}", what, ", ".join(befores), ", ".join(afters))


def _explain_tensors(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    checks_name, entries, *_ = bound.args
    tensors = tuple(frame.f_locals.get(entry[0].name) for entry in entries)
    found = frame.f_globals[checks_name].mismatch(tensors)
    if found is None:
        return _Finding("the tensors' check failed", "tensors")
    index, changes = found
    what = describer.describe(entries[index][0].name) if index >= 0 else "the tensors"
    summary = ", ".join(f"{field} {before} -> {after}".lstrip() for field, before, after in changes)
    befores = ", ".join(f"{field} {before}".lstrip() for field, before, _ in changes)
    afters = ", ".join(f"{field} {after}".lstrip() for field, _, after in changes)
    return _Finding(f"{what} changed: {summary}", what, befores, afters)


def _explain_type(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    proxy, type_name = bound.args
    what = describer.describe(proxy.name)
    after = type(frame.f_locals[proxy.name]).__qualname__
    return _Finding(f"{what} changed type: {type_name} -> {after}", what, type_name, after)


def _explain_container(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    expression, type_name, kind, expected = bound.args
    what = describer.describe(expression)
    value = _evaluate(expression, frame)
    expected_type = frame.f_globals.get(type_name, type_name)
    expected_type_name = expected_type if isinstance(expected_type, str) else expected_type.__qualname__
    if type(value).__qualname__ != expected_type_name or kind == "type":
        before, after = f"a {expected_type_name}", f"a {type(value).__qualname__}"
    elif kind in ("len", "keys"):
        label = "length" if kind == "len" else "keys"
        now = str(len(value)) if kind == "len" else shown_value(tuple(value))
        summary = f"{what} changed: {label} {expected} -> {now}"
        return _Finding(summary, what, f"{label} {expected}", f"{label} {now}")
    else:  # "empty"
        before, after = "empty", _count(len(value), "item")
    return _Finding(f"{what} changed: {before} -> {after}", what, before, after)


def _explain_layout(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    arguments = ("x", "steps", "kind", "shape", "expected", "traced")
    before, after, consequence = layouts.describe_guard(*(inner.f_locals[name] for name in arguments))
    what = describer.describe(bound.args[0].name)
    return _Finding(f"{what} changed layout: {before} -> {after}; {consequence}", what, before, after)


def _explain_same(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    expression, first_expression = bound.args
    what, first = describer.describe(expression), describer.describe(first_expression)
    before, after = f"the same object as {first}", "another object"
    return _Finding(f"{what} is no longer the same object as {first}", what, before, after)


def _explain_writes_apart(
    bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer
) -> _Finding:
    name, proxies, _ = bound.args
    found = frame.f_globals[name].overlap(tuple(frame.f_locals.get(p.name) for p in proxies))
    if found is None:  # accepted when read again
        return _Finding("the inputs written in place shared memory with other inputs", "")
    written, other = (describer.describe(proxies[k].name) for k in found)
    summary = f"{written}, which the program writes in place, shares memory with {other}"
    return _Finding(summary, written, "memory of its own", f"shares memory with {other}")


def _explain_empty(bound: BoundSymbol, frame: FrameType, inner: Any, describer: _Describer) -> _Finding:
    for expression in bound.args:
        value = _evaluate(expression, frame)
        if value:
            break
    what = describer.describe(expression)
    if expression == "kwargs":
        after = ", ".join(value)
        return _Finding(f"keyword arguments were passed: {after}", what, "none", after)
    try:
        after = _count(len(value), "item")
    except TypeError:
        after = shown_value(value)
    return _Finding(f"{what} changed: empty -> {after}", what, "empty", after)


_EXPLAINERS: dict[str, Callable[..., _Finding]] = {
    CHECK_VALUE.id: _explain_value,
    CHECK_IDENTITY.id: _explain_identity,
    CHECK_KEYS.id: _explain_keys,
    CHECK_TENSOR.id: _explain_tensor,
    CHECK_TENSORS.id: _explain_tensors,
    CHECK_TYPE.id: _explain_type,
    CHECK_CONTAINER.id: _explain_container,
    CHECK_SAME.id: _explain_same,
    CHECK_EMPTY.id: _explain_empty,
    CHECK_HOOKS.id: _explain_empty,
    "layouts.guard": _explain_layout,
    CHECK_WRITES_APART.id: _explain_writes_apart,
}


class _Describer:
    """A prologue expression as the program knows the value: ``args[1]`` is ``factor``,
    ``_constant8['SCALE']`` is ``global __main__.SCALE``, ``_fetched2['weight']`` is ``self.fc1.weight``."""

    def __init__(self, trace: Trace, namespace: dict, fn: Any):
        self.namespace = namespace
        self.fn = fn
        self.locals: dict[str, str] = {}  # names the prologue binds -> the expression they fetch
        for bound in trace.bound_symbols:
            if bound.symbol is UNPACK and bound.output is not None:
                self.locals[bound.output.name] = bound.args[0]
            elif bound.symbol is HOIST:
                self.locals[bound.args[0]] = bound.args[1]
        self.positional, self.var_positional, self.var_keyword = _parameters(fn)
        self.suffix = ""

    def describe(self, expression: str) -> str:
        self.suffix = ""
        try:
            text = self._render(self._substituted(expression))
        except Exception:
            return expression
        return text + self.suffix

    def _substituted(self, expression: str) -> ast.AST:
        """The expression with the prologue's locals (``_fetched0``, ``x``) replaced by what they fetch."""
        describer = self

        class Substitute(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if node.id in describer.locals:
                    return describer._substituted(describer.locals[node.id])
                return node

        return Substitute().visit(ast.parse(expression, mode="eval").body)

    def _render(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Subscript):
            return self._subscript(node.value, node.slice)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Call) and not node.keywords:
            return self._call(node)
        return ast.unparse(node)

    def _name(self, name: str) -> str:
        if name not in self.namespace:
            return name  # args, kwargs
        value = self.namespace[name]
        if value is self.fn:
            return "self"
        if isinstance(value, torch.nn.Module):
            return f"<{type(value).__name__}>"
        return shown_value(value)

    def _subscript(self, base: ast.AST, key_node: ast.AST) -> str:
        if not isinstance(key_node, ast.Constant):
            return f"{self._render(base)}[{self._render(key_node)}]"
        key = key_node.value
        if isinstance(base, ast.Name) and base.id == "args" and isinstance(key, int):
            return self._argument(key)
        if isinstance(base, ast.Name) and base.id == "kwargs" and isinstance(key, str):
            known = key in self.positional or self.var_keyword is None
            return key if known else f"{self.var_keyword}[{key!r}]"
        if isinstance(base, ast.Name) and _is_globals(self.namespace.get(base.id)):
            return f"global {self.namespace[base.id].get('__name__', '?')}.{key!s}"
        if isinstance(base, ast.Attribute) and base.attr in ("_modules", "_parameters", "_buffers"):
            return _member(self._render(base.value), key)
        return f"{self._render(base)}[{key!r}]"

    def _argument(self, index: int) -> str:
        if index < len(self.positional):
            return self.positional[index]
        if self.var_positional is not None:
            return f"{self.var_positional}[{index - len(self.positional)}]"
        return f"args[{index}]"

    def _attribute(self, node: ast.Attribute) -> str:
        base = node.value
        if (
            node.attr == "cell_contents"
            and isinstance(base, ast.Subscript)
            and isinstance(base.value, ast.Attribute)
            and base.value.attr == "__closure__"
            and isinstance(base.value.value, ast.Name)
            and isinstance(base.slice, ast.Constant)
        ):
            function = self.namespace.get(base.value.value.id)
            code = getattr(function, "__code__", None)
            if function is not None and code is not None:
                self.suffix = f" (closure variable of {function.__qualname__})"
                return code.co_freevars[base.slice.value]
        return f"{self._render(base)}.{node.attr}"

    def _call(self, node: ast.Call) -> str:
        function, arguments = node.func, node.args
        if isinstance(function, ast.Name) and len(arguments) == 1:
            argument = arguments[0]
            if function.id == "len":
                if isinstance(argument, ast.Name) and argument.id == "args":
                    return "the number of positional arguments"
                return f"len({self._render(argument)})"
            if function.id == "tuple":
                return f"the keys of {self._render(argument)}"
            if function.id == "type":
                return f"type({self._render(argument)})"
        if isinstance(function, ast.Name) and function.id == "getattr" and len(arguments) == 2:
            name = arguments[1]
            if isinstance(name, ast.Constant):
                return f"{self._render(arguments[0])}.{name.value!s}"
        if (
            isinstance(function, ast.Attribute)
            and function.attr == "__getitem__"
            and isinstance(function.value, ast.Name)
            and function.value.id in ("dict", "list", "tuple")
            and len(arguments) == 2
        ):
            return self._subscript(arguments[0], arguments[1])
        return ast.unparse(node)


def _member(base: str, name: Any) -> str:
    """A module's submodule, parameter or buffer as one writes it: ``self.fc1``, ``self.layers[0]``."""
    name = f"{name!s}"
    if name.isdigit():
        return f"{base}[{name}]"
    return f"{base}.{name}" if name.isidentifier() else f"{base}[{name!r}]"


def _is_globals(value: Any) -> bool:
    return type(value) is dict and "__name__" in value and "__builtins__" in value


def _parameters(fn: Any) -> tuple[list[str], str | None, str | None]:
    """The names of ``fn``'s positional parameters, its ``*args`` and its ``**kwargs`` (for modules: forward's)."""
    target = type(fn).forward if isinstance(fn, torch.nn.Module) else fn
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return [], None, None
    parameters = list(signature.parameters.values())
    if isinstance(fn, torch.nn.Module) and parameters:
        parameters = parameters[1:]  # self
    kinds = inspect.Parameter
    positional = [
        p.name for p in parameters if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    var_positional = next((p.name for p in parameters if p.kind is kinds.VAR_POSITIONAL), None)
    var_keyword = next((p.name for p in parameters if p.kind is kinds.VAR_KEYWORD), None)
    return positional, var_positional, var_keyword


def _function_label(fn: Any) -> str:
    """``scale (train.py:12)``: the compiled function's name and where it is defined."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, torch.nn.Module):
        name, target = type(fn).__name__, type(fn).forward
    else:
        name, target = getattr(fn, "__qualname__", None) or type(fn).__name__, fn
        name = name.rpartition("<locals>.")[2]
    code = getattr(inspect.unwrap(getattr(target, "__func__", target)), "__code__", None)
    if code is None:
        return name
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _evaluate(expression: str, frame: FrameType) -> Any:
    return eval(expression, frame.f_globals, dict(frame.f_locals))  # noqa: S307 - the prologue's own line


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _on_off(enabled: bool) -> str:
    return "enabled" if enabled else "disabled"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
