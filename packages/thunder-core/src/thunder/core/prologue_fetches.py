"""Prologue fetches computed once: a value fetched by several checks is bound to a local first.

A module's prologue reaches each submodule many times (its four hook dicts, its parameters, its
flags): ``getattr(_constant8, '0')`` goes through ``torch.nn.Module.__getattr__`` each time, and
for an MLP that was most of a 200 us prologue. ``hoist_repeated_fetches`` rewrites the prologue's
bound symbols so that every fetch (an attribute, ``getattr`` with a literal name, or a subscript
with a literal key) that occurs more than once is bound by a ``HOIST`` line just before its first use
and read from that local afterwards. ``args[0]`` and ``kwargs['cache']`` are left as they are (no
cheaper as a local), but what is read through them is bound: ``kwargs['cache'].layers`` was
fetched again by every layer's checks. The values are the same: no user code runs between the
checks of one call, and a fetch that raises still makes the call's prologue fail.
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


def _is_fetch(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return _is_base(node.value)
    if isinstance(node, ast.Subscript):  # args[0] is as cheap as a local: only subscripts of fetches
        return isinstance(node.slice, ast.Constant) and _is_fetch(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return (
            len(node.args) == 2
            and not node.keywords
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_base(node.args[0])
        )
    return False


def _is_base(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or _is_argument(node) or _is_fetch(node)


def _is_argument(node: ast.AST) -> bool:
    """``args[0]``, ``kwargs['cache']``: not hoisted itself, but what is read through it is."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("args", "kwargs")
        and isinstance(node.slice, ast.Constant)
    )


class _Replace(ast.NodeTransformer):
    def __init__(self, repeated: set[str], bound: dict[str, str], new_name: Callable[[], str]):
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
    bound_symbols: list[BoundSymbol], expression_index: dict[Symbol, int], new_name: Callable[[], str]
) -> list[BoundSymbol]:
    """``bound_symbols`` with repeated fetches bound once (see the module docstring).

    ``expression_index`` says, per symbol whose argument is a Python expression, which argument.
    """
    trees: list[ast.AST | None] = []
    counts: Counter[str] = Counter()
    for b in bound_symbols:
        index = expression_index.get(b.symbol)
        tree = ast.parse(b.args[index], mode="eval").body if index is not None else None
        trees.append(tree)
        if tree is not None:
            for node in ast.walk(tree):
                if _is_fetch(node):
                    node.fetch_key = ast.dump(node)  # type: ignore[attr-defined]
                    counts[node.fetch_key] += 1  # type: ignore[attr-defined]
    repeated = {key for key, count in counts.items() if count > 1}
    if not repeated:
        return bound_symbols
    bound: dict[str, str] = {}
    result: list[BoundSymbol] = []
    for b, tree in zip(bound_symbols, trees):
        if tree is None:
            result.append(b)
            continue
        replace = _Replace(repeated, bound, new_name)
        rewritten = replace.visit(tree)
        result.extend(BoundSymbol(HOIST, (local, expression)) for local, expression in replace.hoisted)
        index = expression_index[b.symbol]
        args = (*b.args[:index], ast.unparse(rewritten), *b.args[index + 1 :])
        result.append(b.replace(args=args))
    return result
