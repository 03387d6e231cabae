"""Printing traces as Python source, and compiling that source into callables.

The printed source is the program: ``compile_trace`` executes exactly the text that
``trace_to_python`` returns, with the imports it lists, so a trace that prints also runs. Values a
trace cannot spell as a literal (an arbitrary Python object captured as a constant) are bound by
name in the compiled function's globals and listed in a comment of the header.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace

__all__ = ["value_to_python", "trace_to_python", "compile_trace"]

# How a printed module prefix is imported; any other prefix is imported as ``import <prefix>``.
_MODULE_IMPORTS = {
    "prims": "from thunder.core import prims",
    "ltorch": "import thunder.torch as ltorch",
    "dtypes": "from thunder.core import dtypes",
    "devices": "from thunder.core import devices",
    "fallback": "from thunder.core import fallback",
    "inplace": "from thunder.core import inplace",
}


def _module_import(module: str) -> str:
    # ``import torch`` makes ``torch.nn.functional.linear`` and ``torch.Tensor.to`` reachable.
    return _MODULE_IMPORTS.get(module, f"import {module.split('.')[0]}")


class _Printer:
    """Prints values and bound symbols, collecting the imports and constants they need."""

    def __init__(self) -> None:
        self.imports: dict[str, None] = {}  # ordered set
        self.constants: dict[str, Any] = {}

    def need_module(self, module: str) -> None:
        self.imports[_module_import(module)] = None

    def constant(self, value: Any) -> str:
        for name, existing in self.constants.items():
            if existing is value:
                return name
        name = f"_constant{len(self.constants)}"
        self.constants[name] = value
        return name

    def value(self, x: Any) -> str:
        if isinstance(x, Proxy):
            return x.name
        if x is None or isinstance(x, (bool, str)) or x is Ellipsis:
            return repr(x)
        if isinstance(x, int):
            return repr(int(x))
        if isinstance(x, float):
            return repr(x) if math.isfinite(x) else f"float('{x}')"
        if isinstance(x, complex):
            return f"complex({self.value(x.real)}, {self.value(x.imag)})"
        if isinstance(x, dtypes.dtype):
            self.need_module("dtypes")
            return repr(x)
        if isinstance(x, devices.Device):
            self.need_module("devices")
            return repr(x)
        if isinstance(x, torch.dtype):
            self.need_module("torch")
            return str(x)
        if isinstance(x, torch.device):
            self.need_module("torch")
            return f"torch.device({str(x)!r})"
        if isinstance(x, slice):
            return f"slice({self.value(x.start)}, {self.value(x.stop)}, {self.value(x.step)})"
        if isinstance(x, tuple) and not hasattr(x, "_fields"):
            items = ", ".join(self.value(item) for item in x)
            return f"({items},)" if len(x) == 1 else f"({items})"
        if isinstance(x, list):
            return f"[{', '.join(self.value(item) for item in x)}]"
        if isinstance(x, dict) and all(isinstance(key, (str, int)) for key in x):
            items = "{" + ", ".join(f"{key!r}: {self.value(item)}" for key, item in x.items()) + "}"
            if type(x) is dict:
                return items
            # a dict subclass holding proxies (OrderedDict, a transformers ModelOutput dataclass) is
            # rebuilt as that class, so the caller gets the type eager mode returns
            if dataclasses.is_dataclass(x) and all(isinstance(key, str) for key in x):
                return f"{self.constant(type(x))}(**{items})"
            if type(x) is collections.OrderedDict:
                return f"{self.constant(type(x))}({items})"
        if isinstance(x, tuple) and any(isinstance(item, Proxy) for item in x):  # a namedtuple
            return f"{self.constant(type(x))}({', '.join(self.value(item) for item in x)})"
        return self.constant(x)

    def target(self, output: Any) -> str | None:
        """The left-hand side that binds a bound symbol's output, or None when nothing is bound."""
        if isinstance(output, Proxy):
            return output.name
        if isinstance(output, (tuple, list)) and output:
            parts = [self.target(item) or "_" for item in output]
            return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
        return None

    def callee(self, symbol: Symbol) -> str:
        if symbol.module:
            self.need_module(symbol.module)
        elif symbol.fn is not None:
            importable = _import_line(symbol.fn, symbol.name)
            if importable:
                self.imports[importable] = None
            else:
                self.constants[symbol.name] = symbol.fn
        return symbol.call_name

    def call(self, bound_symbol: BoundSymbol) -> str:
        arguments = [self.value(arg) for arg in bound_symbol.args]
        arguments += [f"{key}={self.value(arg)}" for key, arg in bound_symbol.kwargs.items()]
        call = f"{self.callee(bound_symbol.symbol)}({', '.join(arguments)})"
        target = self.target(bound_symbol.output)
        line = f"{target} = {call}" if target else call
        comments = [
            f"{p.name}: {p.type_comment()}"
            for p in bound_symbol.proxy_outputs()
            if isinstance(p, TensorProxy)
        ]
        return f"{line}  # {'; '.join(comments)}" if comments else line

    def bound_symbol(self, bound_symbol: BoundSymbol) -> list[str]:
        printer = bound_symbol.symbol.printer
        if bound_symbol.symbol.id == "thunder.return":  # its value may need this trace's imports and constants
            return [f"return {self.value(bound_symbol.args[0])}"]
        lines = printer(bound_symbol) if printer is not None else [self.call(bound_symbol)]
        comments = _Printer()  # subsymbols are comments: their imports and constants are not needed
        for subsymbol in bound_symbol.subsymbols:
            lines += [
                f"  # {line}" if not line.startswith(" ") else f"  {line}"
                for line in comments.bound_symbol(subsymbol)
            ]
        return lines


def _import_line(fn: Any, name: str) -> str | None:
    """``from module import fn as name`` when that import gives back ``fn`` itself."""
    import sys

    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if (
        not module
        or not qualname.isidentifier()
        or getattr(sys.modules.get(module), qualname, None) is not fn
    ):
        return None
    return f"from {module} import {qualname}" + (f" as {name}" if name != qualname else "")


def value_to_python(x: Any) -> str:
    return _Printer().value(x)


def _source_and_constants(trace: Trace) -> tuple[str, dict[str, Any]]:
    printer = _Printer()
    printer.constants.update(trace.constants)
    body = [f"# {arg.name}: {arg.type_comment()}" for arg in trace.args if isinstance(arg, TensorProxy)]
    for bound_symbol in trace.bound_symbols:
        body += printer.bound_symbol(bound_symbol)
    if not any(line.startswith("return") for line in body):
        body.append("return None")
    for decorator in trace.decorators:
        if decorator.startswith("@torch."):
            printer.need_module("torch")
    lines = [f"# {trace.header}"] if trace.header else []
    lines += list(printer.imports)
    if printer.constants:
        lines.append(f"# bound when compiled: {', '.join(sorted(printer.constants))}")
    lines += [""] + trace.decorators
    signature = trace.signature if trace.signature is not None else ", ".join(arg.name for arg in trace.args)
    lines.append(f"def {trace.name}({signature}):")
    lines += [f"  {line}" for line in body]
    return "\n".join(lines) + "\n", printer.constants


def trace_to_python(trace: Trace) -> str:
    return _source_and_constants(trace)[0]


def compile_trace(trace: Trace) -> Callable:
    source, constants = _source_and_constants(trace)
    namespace: dict[str, Any] = dict(constants)
    filename = f"thunder.{trace.name}_{id(trace):x}"
    exec(compile(source, filename, "exec"), namespace)
    _register_source_for_tracebacks(filename, source)
    return namespace[trace.name]


def _register_source_for_tracebacks(filename: str, source: str) -> None:
    """Let tracebacks and debuggers show the generated lines (as they do for files)."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
