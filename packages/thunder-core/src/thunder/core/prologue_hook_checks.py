"""The prologue's checks that hook tables are still empty, and the gate that skips them.

A module traced with no hooks is specialized on its four hook tables (and torch's global ones)
staying empty: one ``CHECK_EMPTY`` line per table, a module's tables merged into one statement
(``merge_empty_checks``). ``PrologueBuilder.finish`` (core/prologue.py) then gathers them
(``is_hook_check``) into one ``CHECK_HOOKS`` block that runs only when a hook handle was made since
they last passed (``HookRegistrations``). Every name here is also importable from
``thunder.core.prologue``.
"""

from __future__ import annotations

import torch
import torch.utils.hooks

from thunder.core.symbol import BoundSymbol, Symbol

__all__ = [
    "CHECKED",
    "CHECK_EMPTY",
    "CHECK_HOOKS",
    "HookRegistrations",
    "is_hook_check",
    "merge_empty_checks",
]


# The local a check binds the value it tests to (``type(_checked := x.n) is not int or _checked != 3``,
# ``(_checked := m.__dict__)['_forward_hooks']``); the prologue builder keeps the name free.
CHECKED = "_checked"


def _print_check_empty(bound_symbol: BoundSymbol) -> list[str]:
    # A module's hook tables are read from its ``__dict__``, where nn.Module keeps them: one attribute
    # read and four dict lookups cost 2/3 of four attribute reads through a class with ``__getattr__``
    # (292 modules of a 22-layer Llama).
    parts = [expression.rpartition(".") for expression in bound_symbol.args]
    bases = {base for base, _, _ in parts}
    if len(parts) > 1 and len(bases) == 1 and all(_is_hook_table_name(name) for _, _, name in parts):
        (base,) = bases
        first, *rest = (name for _, _, name in parts)
        condition = f"({CHECKED} := {base}.__dict__)[{first!r}]" + "".join(
            f" or {CHECKED}[{n!r}]" for n in rest
        )
        return [f"if {condition}: raise GuardFailure"]
    return [f"if {' or '.join(bound_symbol.args)}: raise GuardFailure"]


_HOOK_TABLE_NAMES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _is_hook_table_name(name: str) -> bool:
    return name in _HOOK_TABLE_NAMES


CHECK_EMPTY = Symbol(
    name="check_empty", id="prologue.check_empty", meta=lambda *args: None, printer=_print_check_empty
)


class HookRegistrations:
    """What a prologue knows of hook registrations: ``next_id``, torch's count of hook handles
    (``torch.utils.hooks.RemovableHandle.next_id``, taken from ``handles``) when its hook tables
    were last found empty. Every ``register_*hook`` of a module (and torch's global ones, and a
    tensor's) makes a handle, which raises the count before the hook enters its table; removing one
    only empties a table. So while the count is unchanged, no table the prologue found empty can have
    gained a hook, and its hook checks are skipped: 292 modules' tables were a fifth of a 22-layer
    decode step's prologue. A table filled without a handle (``m._forward_hooks[k] = f``, torch's
    private dict) is not seen until some handle is made."""

    handles = torch.utils.hooks.RemovableHandle

    def __init__(self) -> None:
        self.next_id = -1


def _print_check_hooks(bound_symbol: BoundSymbol) -> list[str]:
    seen, count = bound_symbol.kwargs["seen"], bound_symbol.kwargs["count"]
    groups: list[list[str]] = []
    for expression in bound_symbol.args:  # a module's tables together, printed as one statement
        base = expression.rpartition(".")[0]
        if groups and groups[-1][0].rpartition(".")[0] == base and "." in expression:
            groups[-1].append(expression)
        else:
            groups.append([expression])
    checks = [line for group in groups for line in _print_check_empty(BoundSymbol(CHECK_EMPTY, tuple(group)))]
    return [
        f"if {seen}.next_id != ({count} := {seen}.handles.next_id):  # a hook handle was made since: check the tables",
        *(f"  {line}" for line in checks),
        f"  {seen}.next_id = {count}",
    ]


CHECK_HOOKS = Symbol(
    name="check_hooks", id="prologue.check_hooks", meta=lambda *args: None, printer=_print_check_hooks
)


def is_hook_check(bound_symbol: BoundSymbol) -> bool:
    """An emptiness check of hook tables only (modules' or torch's global ones), which ``CHECK_HOOKS``
    may skip."""
    return bound_symbol.symbol is CHECK_EMPTY and all(
        _is_hook_table_name(expression.rpartition(".")[2])
        or expression.endswith(tuple(f"['_global{name}']" for name in _HOOK_TABLE_NAMES))
        for expression in bound_symbol.args
    )


def merge_empty_checks(bound_symbols: list[BoundSymbol]) -> list[BoundSymbol]:
    """Adjacent emptiness checks as one line (``if m._forward_hooks or m._forward_pre_hooks: ...``):
    a module's four hook tables cost one statement instead of four on every call."""
    merged: list[BoundSymbol] = []
    for bound in bound_symbols:
        if bound.symbol is CHECK_EMPTY and merged and merged[-1].symbol is CHECK_EMPTY:
            merged[-1] = BoundSymbol(CHECK_EMPTY, (*merged[-1].args, *bound.args))
        else:
            merged.append(bound)
    return merged
