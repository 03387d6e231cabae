"""Printing traces as Python source, and compiling that source into callables.

The printed source is the program: ``compile_trace`` executes exactly the text that
``trace_to_python`` returns, with the imports it lists, so a trace that prints also runs. Values a
trace cannot spell as a literal (an arbitrary Python object captured as a constant) are bound by
name in the compiled function's globals and listed in a comment of the header.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import keyword
import math
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import devices, dtypes
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace, safe_identifier

__all__ = ["value_to_python", "trace_to_python", "compile_trace"]

# How a printed module prefix is imported; any other prefix is imported as ``import <prefix>``.
_MODULE_IMPORTS = {
    "prims": "from thunder.core import prims",
    "ltorch": "import thunder.torch as ltorch",
    "dtypes": "from thunder.core import dtypes",
    "devices": "from thunder.core import devices",
    "fallback": "from thunder.core import fallback",
    "inplace": "from thunder.core import inplace",
    "layouts": "from thunder.core import layouts",
    "dist": "import thunder.distributed.prims as dist",
}


def _module_import(module: str) -> str:
    # ``import torch`` makes ``torch.nn.functional.linear`` and ``torch.Tensor.to`` reachable.
    return _MODULE_IMPORTS.get(module, f"import {module.split('.')[0]}")


class _Printer:
    """Prints values and bound symbols, collecting the imports and constants they need."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.imports: dict[str, None] = {}  # ordered set
        self.constants: dict[str, Any] = {}
        # the trace's variable names: a callee or constant bound under one of them would be shadowed
        self.taken: set[str] = taken or set()
        self.callee_names: dict[int, str] = {}  # id(symbol) -> the name it is called by, when aliased

    def need_module(self, module: str) -> None:
        self.imports[_module_import(module)] = None

    def constant(self, value: Any) -> str:
        for name, existing in self.constants.items():
            if existing is value:
                return name
        name = self.fresh_name("_constant")
        self.constants[name] = value
        return name

    def fresh_name(self, prefix: str) -> str:
        index = len(self.constants)
        while f"{prefix}{index}" in self.constants or f"{prefix}{index}" in self.taken:
            index += 1
        return f"{prefix}{index}"

    def value(self, x: Any) -> str:
        if isinstance(x, Proxy):
            return x.name
        if x is None or type(x) in (bool, str) or x is Ellipsis:
            return repr(x)
        if isinstance(x, str):  # a subclass's __repr__ is user code: never pasted as source
            return self.constant(x)
        if type(x) is int:  # a subclass (an IntEnum member) is a constant: the caller gets that object
            return repr(x)
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):  # a symbolic size: its expression
            from thunder.core.symbolic_shapes import expression

            text = expression(x)
            for module in ("math", "torch"):  # FloorToInt prints as math.floor
                if f"{module}." in text:
                    self.need_module(module)
            return text if text.isidentifier() or text.lstrip("-").isdigit() else f"({text})"
        if type(x) is float:  # a subclass (numpy.float64, whose repr needs numpy) is a constant
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
        if type(x).__module__ == "torch.return_types":  # a structseq: built from one sequence
            self.need_module("torch")
            return f"torch.return_types.{type(x).__name__}({self.value(tuple(x))})"
        if type(x) is torch.Size:  # a shape the program returns or passes on keeps its type
            self.need_module("torch")
            return f"torch.Size([{', '.join(self.value(item) for item in x)}])"
        if isinstance(x, tuple) and not hasattr(x, "_fields"):
            items = ", ".join(self.value(item) for item in x)
            return f"({items},)" if len(x) == 1 else f"({items})"
        if isinstance(x, list):
            return f"[{', '.join(self.value(item) for item in x)}]"
        if type(x) is set:  # mutable: built anew per call, as eager builds it (a caller may change it)
            return f"set([{', '.join(self.value(item) for item in x)}])"
        if type(x) is bytearray:
            return f"bytearray({bytes(x)!r})"
        if type(x) is collections.deque:
            return f"{self.constant(collections.deque)}([{', '.join(self.value(item) for item in x)}], {x.maxlen!r})"
        if type(x) is collections.defaultdict and all(type(key) in (str, int) for key in x):
            items = ", ".join(f"{key!r}: {self.value(item)}" for key, item in x.items())
            return f"{self.constant(collections.defaultdict)}({self.value(x.default_factory)}, {{{items}}})"
        if isinstance(x, dict) and all(type(key) in (str, int) for key in x):
            items = "{" + ", ".join(f"{key!r}: {self.value(item)}" for key, item in x.items()) + "}"
            if type(x) is dict:
                return items
            # a dict subclass holding proxies (OrderedDict, a transformers ModelOutput dataclass) is
            # rebuilt as that class, so the caller gets the type eager mode returns
            if dataclasses.is_dataclass(x) and all(isinstance(key, str) for key in x):
                return f"{self.constant(type(x))}(**{items})"
            if type(x) is collections.OrderedDict:
                return f"{self.constant(type(x))}({items})"
        if isinstance(x, tuple) and _holds_traced(x):  # a namedtuple holding what the trace computes
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
        known = self.callee_names.get(id(symbol))
        if known is not None:
            return known
        if symbol.module:
            root = symbol.module.split(".")[0]
            if root in self.taken and symbol.module not in _MODULE_IMPORTS:  # a trace variable shadows it
                import importlib

                name = self.fresh_name("_module")
                _, _, rest = symbol.call_name.partition(".")
                self.constants[name] = importlib.import_module(root)
                self.callee_names[id(symbol)] = f"{name}.{rest}" if rest else name
                return self.callee_names[id(symbol)]
            self.need_module(symbol.module)
        elif symbol.fn is not None:
            name = symbol.name
            if name in self.taken or self.constants.get(name, symbol.fn) is not symbol.fn:
                name = self.callee_names[id(symbol)] = self.fresh_name(f"_{safe_identifier(name)}_")
            importable = _import_line(symbol.fn, name)
            if importable:
                self.imports[importable] = None
            else:
                self.constants[name] = symbol.fn
            return name
        return symbol.call_name

    def call(self, bound_symbol: BoundSymbol) -> str:
        arguments = [self.value(arg) for arg in bound_symbol.args]
        keywords = {key: arg for key, arg in bound_symbol.kwargs.items() if _is_plain_name(key)}
        arguments += [f"{key}={self.value(arg)}" for key, arg in keywords.items()]
        if len(keywords) < len(bound_symbol.kwargs):  # a user's keyword that is no identifier: passed as data
            others = {key: arg for key, arg in bound_symbol.kwargs.items() if key not in keywords}
            arguments.append(f"**{self.value(others)}")
        call = f"{self.callee(bound_symbol.symbol)}({', '.join(arguments)})"
        target = self.target(bound_symbol.output)
        line = f"{target} = {call}" if target else call
        comments = [
            f"{p.name}: {p.type_comment()}"
            for p in bound_symbol.proxy_outputs()
            if isinstance(p, (TensorProxy, NumberProxy))
        ]
        return f"{line}  # {'; '.join(comments)}" if comments else line

    def bound_symbol(self, bound_symbol: BoundSymbol) -> list[str]:
        printer = bound_symbol.symbol.printer
        if (
            bound_symbol.symbol.id == "thunder.return"
        ):  # its value may need this trace's imports and constants
            return [f"return {self.value(bound_symbol.args[0])}"]
        lines = printer(bound_symbol) if printer is not None else [self.call(bound_symbol)]
        comments = _Printer()  # subsymbols are comments: their imports and constants are not needed
        for subsymbol in bound_symbol.subsymbols:
            lines += [
                f"  # {line}" if not line.startswith(" ") else f"  {line}"
                for line in comments.bound_symbol(subsymbol)
            ]
        return lines


def _holds_traced(x: Any) -> bool:
    """Whether a (nested) tuple, list or dict holds a proxy or a symbolic size: its value differs per call."""
    if isinstance(x, (Proxy, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(x, (tuple, list)):
        return any(_holds_traced(item) for item in x)
    if isinstance(x, dict):
        return any(_holds_traced(item) for item in x.values())
    return False


def _is_plain_name(name: Any) -> bool:
    return type(name) is str and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


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


def _variable_names(trace: Trace) -> set[str]:
    names = {arg.name for arg in trace.args}
    for bound_symbol in trace.bound_symbols:
        names.update(p.name for p in bound_symbol.proxy_outputs())
    return names


def _source_and_constants(trace: Trace) -> tuple[str, dict[str, Any]]:
    printer = _Printer(_variable_names(trace))
    printer.constants.update(trace.constants)
    typed = (TensorProxy, NumberProxy)
    body = [f"# {arg.name}: {arg.type_comment()}" for arg in trace.args if isinstance(arg, typed)]
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
    if trace.takes_argument_list:
        signature = printer.fresh_name("_arguments")
        body = [f"{printer.target(list(trace.args)) or '_'} = {signature}", f"{signature}.clear()", *body]
    lines.append(f"def {trace.name}({signature}):")
    lines += [f"  {line}" for line in body]
    return "\n".join(lines) + "\n", printer.constants


def trace_to_python(trace: Trace) -> str:
    return _source_and_constants(trace)[0]


def compile_trace(trace: Trace) -> Callable:
    source, constants = _source_and_constants(trace)
    namespace: dict[str, Any] = dict(constants)
    number = _free_numbers.pop() if _free_numbers else next(_numbers)
    filename = f"thunder.{trace.name}_{number}"
    exec(compile(source, filename, "exec"), namespace)
    function = namespace[trace.name]
    _register_source_for_tracebacks(filename, source, function, number)
    return function


# Generated files are numbered, and a number is reused once its function is gone: CPython keeps
# every distinct filename given to ``compile`` for good, so fresh names would grow without bound.
_numbers = itertools.count()
_free_numbers: list[int] = []


def _release(filename: str, number: int) -> None:
    import linecache

    linecache.cache.pop(filename, None)
    _free_numbers.append(number)


def _register_source_for_tracebacks(filename: str, source: str, function: Callable, number: int) -> None:
    """Let tracebacks and debuggers show the generated lines (as they do for files), while ``function`` lives.

    linecache never drops an entry without a file, so the entry goes with the function: compiling
    and dropping many functions must not grow memory.
    """
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    weakref.finalize(function, _release, filename, number)
