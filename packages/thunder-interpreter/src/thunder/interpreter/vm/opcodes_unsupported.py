"""Handlers for every instruction the VM does not implement: they fail loudly, naming the
construct and the user's file:line, instead of silently misbehaving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder.interpreter.vm.errors import unsupported

__all__ = ["fallback_handler", "CONSTRUCTS"]

CONSTRUCTS = {
    "GET_AWAITABLE": "await",
    "GET_AITER": "async for",
    "GET_ANEXT": "async for",
    "END_ASYNC_FOR": "async for",
    "BEFORE_ASYNC_WITH": "async with",
    "SETUP_ASYNC_WITH": "async with",
    "ASYNC_GEN_WRAP": "async generator",
    "CHECK_EG_MATCH": "except*",
    "PREP_RERAISE_STAR": "except*",
    "PRINT_EXPR": "interactive expression printing",
    "IMPORT_STAR": "from module import *",
    "SETUP_ANNOTATIONS": "module or class annotations",
    "LOAD_CLASSDEREF": "class body",
    "LOAD_LOCALS": "class body",
    "LOAD_FROM_DICT_OR_DEREF": "class body",
    "LOAD_FROM_DICT_OR_GLOBALS": "class body or PEP 695 scope",
    "INTERPRETER_EXIT": "interpreter exit",
    "ENTER_EXECUTOR": "tier-2 executor",
}


def fallback_handler(opname: str) -> Callable:
    construct = CONSTRUCTS.get(opname, "an instruction this version of the VM does not know")

    def handler(frame: Any, op: Any) -> None:
        raise unsupported(frame, op, construct)

    handler.__name__ = f"unsupported_{opname.lower()}"
    return handler
