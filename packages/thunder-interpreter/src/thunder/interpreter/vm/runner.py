"""The public entry point: interpret one call, registering sources for its arguments."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from thunder.core.sources import Source
from thunder.interpreter.version import check_python_version

# Importing the opcode modules fills the dispatch table.
from thunder.interpreter.vm import (  # noqa: F401
    lookasides,  # noqa: F401
    opcodes_arithmetic,
    opcodes_attributes,
    opcodes_blocks,
    opcodes_calls,
    opcodes_containers,
    opcodes_control_flow,
    opcodes_exceptions,
    opcodes_generators,
    opcodes_loads_stores,
    opcodes_match,
    opcodes_stack,
)
from thunder.interpreter.vm.calls import call
from thunder.interpreter.vm.context import InterpreterContext
from thunder.interpreter.vm.hooks import InterpreterHooks

__all__ = ["interpret"]


def interpret(
    fn: Any,
    args: tuple,
    kwargs: dict,
    hooks: InterpreterHooks,
    *,
    arg_sources: Sequence[Source | None] = (),
    kwarg_sources: Mapping[str, Source] = {},
    known_sources: Sequence[tuple[Any, Source]] = (),
) -> Any:
    """Call ``fn(*args, **kwargs)`` with the VM, so hooks see calls and value provenance.

    ``known_sources``: objects reachable from the arguments whose canonical source is known in
    advance (a module's submodules by qualified name); they win over any path found while running.
    """
    check_python_version()  # an unknown version's bytecode would fail somewhere inside the program
    context = InterpreterContext(hooks)
    hooks.current_location = context.user_location  # type: ignore[method-assign]
    hooks.source_of = context.provenance.source_of  # type: ignore[method-assign]
    register = context.provenance.register
    hooks.register_source = register  # type: ignore[method-assign]
    for value, known in known_sources:
        register(value, known)
    for value, source in zip(args, arg_sources):
        if source is not None:
            register(value, source)
    for name, source in kwarg_sources.items():
        if name in kwargs and source is not None:
            register(kwargs[name], source)
    return call(context, fn, tuple(args), dict(kwargs))
