"""Python arithmetic on number proxies, recorded into the trace as plain Python expressions.

With ``cache="symbolic values"`` the Python numbers a program reads are trace inputs
(``NumberProxy``). ``scale * 2`` then records ``f1 = scale * 2  # f1: "float 4.0"``: a bound symbol
that prints as the Python expression itself, so the printed trace runs as it reads. These symbols
are tagged ``python``: they need no executor (``claim_executors`` keeps them as they are) and no
gradient (numbers are never differentiated).

Each recorded result is a new ``NumberProxy`` whose value is computed now (so that what depends on
it, a dtype or a later specialization, sees the real number) and whose roots are the inputs it was
computed from (so that specializing it guards them).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from thunder.core.proxies import NumberProxy, pyval
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import get_tracectx

__all__ = ["binary", "unary", "convert", "PYTHON", "accepts_number_proxies", "specialize_numbers"]

PYTHON = frozenset({"python"})

_BINARY: dict[str, tuple[Callable[[Any, Any], Any], str]] = {
    "add": (operator.add, "+"),
    "sub": (operator.sub, "-"),
    "mul": (operator.mul, "*"),
    "truediv": (operator.truediv, "/"),
    "floordiv": (operator.floordiv, "//"),
    "mod": (operator.mod, "%"),
    "pow": (operator.pow, "**"),
    "lshift": (operator.lshift, "<<"),
    "rshift": (operator.rshift, ">>"),
    "and": (operator.and_, "&"),
    "or": (operator.or_, "|"),
    "xor": (operator.xor, "^"),
}
_UNARY: dict[str, tuple[Callable[[Any], Any], str]] = {
    "neg": (operator.neg, "-{}"),
    "pos": (operator.pos, "+{}"),
    "abs": (abs, "abs({})"),
    "invert": (operator.invert, "~{}"),
    "float": (float, "float({})"),
    "int": (int, "int({})"),
    "bool": (bool, "bool({})"),
    "complex": (complex, "complex({})"),
}


def _comment(output: NumberProxy) -> str:
    return f"  # {output.name}: {output.type_comment()}"


def _binary_printer(spelling: str) -> Callable[[BoundSymbol], list[str]]:
    def printer(bound_symbol: BoundSymbol) -> list[str]:
        from thunder.core.codegen import value_to_python

        a, b = (value_to_python(x) for x in bound_symbol.args)
        return [f"{bound_symbol.output.name} = {a} {spelling} {b}{_comment(bound_symbol.output)}"]

    return printer


def _unary_printer(template: str) -> Callable[[BoundSymbol], list[str]]:
    def printer(bound_symbol: BoundSymbol) -> list[str]:
        from thunder.core.codegen import value_to_python

        expression = template.format(value_to_python(bound_symbol.args[0]))
        return [f"{bound_symbol.output.name} = {expression}{_comment(bound_symbol.output)}"]

    return printer


def _symbol(name: str, fn: Callable, printer: Callable[[BoundSymbol], list[str]]) -> Symbol:
    # ``fn`` computes the value; the printer spells the call as Python, so no executor is involved.
    return Symbol(name=name, id=f"python.{name}", meta=fn, fn=fn, printer=printer, tags=PYTHON)


BINARY_SYMBOLS = {
    name: _symbol(name, fn, _binary_printer(spelling)) for name, (fn, spelling) in _BINARY.items()
}
UNARY_SYMBOLS = {name: _symbol(name, fn, _unary_printer(template)) for name, (fn, template) in _UNARY.items()}


def _roots(*values: Any) -> tuple[NumberProxy, ...]:
    roots: dict[str, NumberProxy] = {}
    for value in values:
        if isinstance(value, NumberProxy):
            roots.update((root.name, root) for root in value.roots)
    return tuple(roots.values())


def _record(symbol: Symbol, args: tuple, value: Any) -> Any:
    trace = get_tracectx()
    if trace is None or type(value) not in (int, float, bool, complex):
        # nothing to record into, or a result that is no number: Python sees the values themselves
        return symbol.fn(*(x.specialize() if isinstance(x, NumberProxy) else x for x in args))  # type: ignore[misc]
    output = NumberProxy(value, roots=_roots(*args))
    trace.record(BoundSymbol(symbol, args, {}, output))
    return output


def binary(name: str, a: Any, b: Any) -> Any:
    """``a <op> b`` where at least one is a number proxy: recorded, with its value computed now."""
    fn, _ = _BINARY[name]
    return _record(BINARY_SYMBOLS[name], (a, b), fn(pyval(a), pyval(b)))


def unary(name: str, a: NumberProxy) -> Any:
    fn, _ = _UNARY[name]
    return _record(UNARY_SYMBOLS[name], (a,), fn(a.value))


def convert(a: NumberProxy, python_type: type) -> NumberProxy:
    """``a`` as ``python_type`` (``float(i0)``), recorded; ``a`` itself when it already is one."""
    if type(a.value) is python_type:
        return a
    return unary(python_type.__name__, a)


# Torch-language symbols that take number proxies as operands. Elementwise ops use a number's value
# only as data (its type, which the prologue checks, decides promotion); ``full`` likewise for its
# fill value. Every other symbol gets the specialized values: what its meta or decomposition does
# with them (shapes, dims, branches) is then guarded.
_NUMBER_OPERAND_IDS = frozenset({"prims.full", "ltorch.full"})


def accepts_number_proxies(symbol: Symbol) -> bool:
    return "elementwise" in symbol.tags or "python" in symbol.tags or symbol.id in _NUMBER_OPERAND_IDS


def specialize_numbers(x: Any) -> Any:
    """``x`` (a pytree) with every number proxy replaced by its value, which is from now on guarded."""
    from thunder.core.pytree import tree_map

    return tree_map(_specialized, x)


def _specialized(x: Any) -> Any:
    if isinstance(x, NumberProxy):
        return x.specialize()
    if isinstance(x, slice):  # not a pytree node, but indexing carries numbers in it
        return slice(_specialized(x.start), _specialized(x.stop), _specialized(x.step))
    return x
