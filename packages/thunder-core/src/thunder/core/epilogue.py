"""The Python half of the epilogue: side effects on Python objects, replayed after the computation.

Tensor side effects (in-place updates of inputs, module buffers) are the end of the computation
trace (``inplace.copy_``, see ``core/inplace.py``). Side effects on Python objects that outlive the
call (``cache.keys = torch.cat(...)``, ``outputs.append(t)``, ``counter = counter + 1`` on a global)
cannot be symbols: they are recorded by the frontend while it traces and replayed here, in order,
on every call of the cached entry. The targets are fetched from the current call's arguments
through their sources, exactly as the prologue fetches inputs, all of them before the first write
(so a write cannot redirect a later fetch); the tensors written are extra outputs of the
computation, which then returns ``(output, values)``.

An epilogue prints as the Python it runs::

    # Constructed by the interpreter: side effects replayed after the computation
    def epilogue(args, kwargs, result):
      output, values = result
      target0 = kwargs['past_key_values'].layers[0]
      target0.keys = values[0]
      target0.is_initialized = True
      return output
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder.core.sources import Source

__all__ = ["Epilogue", "EpilogueBuilder"]


class Epilogue:
    """A compiled epilogue: ``epilogue(args, kwargs, (output, values))`` replays, returns ``output``.

    ``before(args, kwargs)``, where not None, runs before the computation: it drops the references the
    epilogue is bound to overwrite (``p.grad`` of a program that set it anew: eager's
    ``zero_grad(set_to_none=True)`` frees the old gradients when the step begins, and a CUDA graph's
    lent outputs are then no longer held when it replays). The computation's inputs are fetched by
    then, so it sees nothing of this.
    """

    def __init__(self, source: str, constants: dict[str, Any]):
        self.source = source
        namespace = dict(constants)
        exec(compile(source, "thunder.epilogue", "exec"), namespace)
        self._function: Callable = namespace["epilogue"]
        self.before: Callable[[tuple, dict], None] | None = namespace.get("before")

    def __call__(self, args: tuple, kwargs: dict, result: Any) -> Any:
        return self._function(args, kwargs, result)

    def __str__(self) -> str:
        return self.source


class EpilogueBuilder:
    """Collects an epilogue's fetches and statements; a frontend spells each statement itself.

    Example::

        builder = EpilogueBuilder()
        target = builder.fetch(AttributeSource(ArgumentSource(0), "cache"))
        builder.statement(f"{target}.keys = {builder.value(0)}")
        epilogue = builder.finish()
    """

    def __init__(self) -> None:
        self._constants: dict[str, Any] = {}
        self._fetches: list[str] = []
        self._fetched: dict[int, str] = {}  # id(source) -> local name
        self._statements: list[str] = []
        self._before: list[str] = []  # fetches and statements of ``before`` (run before the computation)

    def constant(self, obj: Any) -> str:
        """A name for ``obj`` in the epilogue (a literal for exact ints and strings)."""
        if type(obj) in (int, str, bool) or obj is None:
            return repr(obj)
        for name, value in self._constants.items():
            if value is obj:
                return name
        name = f"_constant{len(self._constants)}"
        self._constants[name] = obj
        return name

    def fetch(self, source: Source) -> str:
        """A local holding the value at ``source`` as it was when the call began."""
        known = self._fetched.get(id(source))
        if known is not None:
            return known
        name = f"target{len(self._fetches)}"
        self._fetches.append(f"{name} = {source.expression(self.constant)}")
        self._fetched[id(source)] = name
        return name

    def fetch_expression(self, expression: str) -> str:
        """A local holding ``expression`` (over earlier fetches) evaluated before the first write."""
        name = f"before{len(self._fetches)}"
        self._fetches.append(f"{name} = {expression}")
        return name

    def local(self, expression: str) -> str:
        """A local holding ``expression`` evaluated here, among the writes (an object built anew)."""
        name = f"built{len(self._statements)}"
        self._statements.append(f"{name} = {expression}")
        return name

    @staticmethod
    def value(index: int) -> str:
        """The computation's ``index``-th extra output."""
        return f"values[{index}]"

    def statement(self, line: str) -> None:
        self._statements.append(line)

    def before(self, source: Source, attribute: str) -> None:
        """Set ``attribute`` of the object at ``source`` to None before the computation runs (an
        attribute the epilogue overwrites, whose old value the program dropped)."""
        name = f"early{len(self._before)}"
        self._before.append(f"{name} = {source.expression(self.constant)}")
        self._before.append(f"{name}.{attribute} = None")

    def finish(self) -> Epilogue | None:
        if not self._statements:
            return None
        lines = [
            "# Constructed by the interpreter: side effects replayed after the computation",
            "def epilogue(args, kwargs, result):",
            "  output, values = result",
            *(f"  {line}" for line in self._fetches + self._statements),
            "  return output",
        ]
        if self._before:
            lines += [
                "",
                "# Run before the computation: references the epilogue overwrites, dropped as eager drops them",
                "def before(args, kwargs):",
                *(f"  {line}" for line in self._before),
            ]
        return Epilogue("\n".join(lines) + "\n", self._constants)
