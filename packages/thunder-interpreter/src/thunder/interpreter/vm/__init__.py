"""A Python bytecode interpreter (3.11 and 3.12) that lets a compiler redirect calls and learn
where values came from. See ``interpret`` and ``InterpreterHooks``.
"""

from thunder.interpreter.vm.errors import InterpreterError
from thunder.interpreter.vm.hooks import InterpreterHooks
from thunder.interpreter.vm.runner import interpret

__all__ = ["InterpreterError", "InterpreterHooks", "interpret"]
