"""thunder's frontend: a Python bytecode interpreter written in Python.

``thunder.interpreter.vm`` runs bytecode and reports what it loads and calls (it needs no torch);
``thunder.interpreter.frontend`` uses that to turn a call into prologue and computation traces.
"""

from __future__ import annotations

from typing import Any

__all__ = ["interpreter_frontend", "TraceTimeSideEffectWarning"]


def __getattr__(name: str) -> Any:
    # The frontend imports torch; importing it lazily keeps ``thunder.interpreter.vm`` torch-free.
    if name == "interpreter_frontend":
        from thunder.interpreter.frontend import interpreter_frontend

        return interpreter_frontend
    if name == "TraceTimeSideEffectWarning":  # print, logging, clocks, random in a jitted function
        from thunder.interpreter.trace_time_effects import TraceTimeSideEffectWarning

        return TraceTimeSideEffectWarning
    raise AttributeError(name)
