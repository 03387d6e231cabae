"""thunder's frontend: a Python bytecode interpreter written in Python.

``thunder.interpreter.vm`` runs bytecode and reports what it loads and calls;
``thunder.interpreter.frontend`` uses that to turn a call into prologue and computation traces.
"""

from thunder.interpreter.frontend import interpreter_frontend

__all__ = ["interpreter_frontend"]
