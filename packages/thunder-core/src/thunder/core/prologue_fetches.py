"""Prologue fetches computed once: a value fetched by several checks is bound to a local first.

A module's prologue reaches each submodule many times (its four hook dicts, its parameters, its
flags): ``getattr(_constant8, '0')`` goes through ``torch.nn.Module.__getattr__`` each time, and
for an MLP that was most of a 200 us prologue. ``hoist_repeated_fetches`` rewrites the prologue's
bound symbols so that every fetch (an attribute, ``getattr`` with a literal name, or a subscript
with a literal key) that occurs more than once is bound by a ``HOIST`` line just before its first use
and read from that local afterwards. ``args[0]`` and ``kwargs['cache']`` are left as they are (no
cheaper as a local), but what is read through them is bound: ``kwargs['cache'].layers`` was
fetched again by every layer's checks. So is a global read from a module's namespace
(``_constant129['os']``) and what is read through it: the check of each of 40 environment variables
read ``_constant129['os'].environ._data`` again. The values are the same: no user code runs between
the checks of one call, and a fetch that raises still makes the call's prologue fail.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable

from thunder.core.symbol import BoundSymbol, Symbol

__all__ = ["HOIST", "hoist_repeated_fetches"]


def _print_hoist(bound_symbol: BoundSymbol) -> list[str]:
    name, expression = bound_symbol.args
    return [f"{name} = {expression}"]


HOIST = Symbol(name="hoist", id="prologue.hoist", meta=lambda *args: None, printer=_print_hoist)


_NOT_A_BASE = ("not a base",)


def _base_key(node: ast.AST) -> tuple | None:
    """A key equal for equal fetch chains (``ast.dump``'s equality), or None when ``node`` is neither
    a name, an argument nor a fetch. Built from the keys of the inner nodes, each computed once: a
    module's prologue holds thousands of fetches nested a few levels deep."""
    key = getattr(node, "base_key", None)
    if key is None:
        key = _compute_base_key(node) or _NOT_A_BASE
        node.base_key = key  # type: ignore[attr-defined]
    return None if key is _NOT_A_BASE else key


def _constant(node: ast.AST) -> tuple | None:
    return (type(node.value).__name__, node.value) if isinstance(node, ast.Constant) else None


def _compute_base_key(node: ast.AST) -> tuple | None:
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if _is_argument(node):
        return ("argument", node.value.id, _constant(node.slice))  # type: ignore[attr-defined]
    return _fetch_key(node)


def _fetch_key(node: ast.AST) -> tuple | None:
    """The key of a fetch (see ``_base_key``), or None when ``node`` is not one."""
    if isinstance(node, ast.Attribute):
        base = _base_key(node.value)
        return None if base is None else ("attribute", base, node.attr)
    if isinstance(node, ast.Subscript):  # args[0] is as cheap as a local; a global's dict is not
        constant = _constant(node.slice)
        if constant is None or _is_argument(node):
            return None
        base = _base_key(node.value)
        return None if base is None or base[0] == "argument" else ("subscript", base, constant)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        if len(node.args) != 2 or node.keywords or not isinstance(node.args[1], ast.Constant):
            return None
        if not isinstance(node.args[1].value, str):
            return None
        base = _base_key(node.args[0])
        return None if base is None else ("getattr", base, node.args[1].value)
    return None


def _is_argument(node: ast.AST) -> bool:
    """``args[0]``, ``kwargs['cache']``: not hoisted itself, but what is read through it is."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("args", "kwargs")
        and isinstance(node.slice, ast.Constant)
    )


class _Replace(ast.NodeTransformer):
    def __init__(self, repeated: set[tuple], bound: dict[tuple, str], new_name: Callable[[], str]):
        self.repeated, self.bound, self.new_name = repeated, bound, new_name
        self.hoisted: list[tuple[str, str]] = []  # (local, expression), innermost first

    def generic_visit(self, node: ast.AST) -> ast.AST:
        key = getattr(node, "fetch_key", None)  # set on the original tree, before any replacement
        node = super().generic_visit(node)  # inner fetches first: a hoisted fetch uses hoisted bases
        if key is None or key not in self.repeated:
            return node
        if key not in self.bound:
            local = self.new_name()
            self.bound[key] = local
            self.hoisted.append((local, ast.unparse(node)))
        return ast.Name(id=self.bound[key], ctx=ast.Load())


def hoist_repeated_fetches(
    bound_symbols: list[BoundSymbol],
    expression_index: dict[Symbol, tuple[int, ...]],
    new_name: Callable[[], str],
) -> list[BoundSymbol]:
    """``bound_symbols`` with repeated fetches bound once (see the module docstring).

    ``expression_index`` says, per symbol whose arguments include Python expressions, which arguments
    (``check_same`` compares two: ``_fetched6.config is _fetched4``, not ``is _constant13.config``).
    """
    trees: list[list[ast.AST]] = []
    counts: Counter[tuple] = Counter()
    for b in bound_symbols:
        indices = expression_index.get(b.symbol, ())
        expressions = [ast.parse(b.args[index], mode="eval").body for index in indices]
        trees.append(expressions)
        for tree in expressions:
            for node in ast.walk(tree):
                key = _base_key(node)
                if key is not None and key[0] not in ("name", "argument"):
                    node.fetch_key = key  # type: ignore[attr-defined]
                    counts[key] += 1
    repeated = {key for key, count in counts.items() if count > 1}
    if not repeated:
        return bound_symbols
    bound: dict[tuple, str] = {}
    result: list[BoundSymbol] = []
    for b, expressions in zip(bound_symbols, trees):
        if not expressions:
            result.append(b)
            continue
        args = list(b.args)
        for index, tree in zip(expression_index[b.symbol], expressions):
            replace = _Replace(repeated, bound, new_name)
            args[index] = ast.unparse(replace.visit(tree))
            result.extend(BoundSymbol(HOIST, (local, expression)) for local, expression in replace.hoisted)
        result.append(b.replace(args=tuple(args)))
    return result
