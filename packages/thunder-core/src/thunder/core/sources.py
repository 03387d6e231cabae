"""Where a value seen during tracing came from, so that a prologue can fetch and check it again.

The frontend records a *source* for every value it reads from outside the traced call's own
locals: the call's arguments, the function's globals and closure cells, and attributes or items
of values that already have a source. The prologue replays the source as Python on each call
(``args[0].fc1.weight``) and checks what the computation assumed about the value.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Source",
    "ArgumentSource",
    "KeywordSource",
    "GlobalSource",
    "ClosureSource",
    "AttributeSource",
    "ModuleEntrySource",
    "ItemSource",
    "ConstantSource",
    "LengthSource",
    "KeysSource",
    "CallSource",
    "TypeSource",
    "HasAttributeSource",
    "StoredItemSource",
]


class Source:
    """Abstract: a path from the call's roots (arguments, globals, closures) to a value."""

    def expression(self, constant_name: Any) -> str:
        """Python that fetches the value inside a prologue taking ``(args, kwargs)``.

        ``constant_name(obj)`` returns the name under which the prologue can refer to a Python
        object it was built with (a globals dict, a function whose closure is read).
        """
        raise NotImplementedError

    def describe(self) -> str:
        """A short description for error messages: ``args[0].fc1.weight``."""
        return self.expression(lambda obj: f"<{type(obj).__name__}>")


@dataclass(frozen=True, eq=False)
class ArgumentSource(Source):
    index: int

    def expression(self, constant_name: Any) -> str:
        return f"args[{self.index}]"


@dataclass(frozen=True, eq=False)
class KeywordSource(Source):
    name: str

    def expression(self, constant_name: Any) -> str:
        return f"kwargs[{self.name!r}]"


@dataclass(frozen=True, eq=False)
class GlobalSource(Source):
    globals_dict: dict
    name: str

    def expression(self, constant_name: Any) -> str:
        return f"{constant_name(self.globals_dict)}[{self.name!r}]"

    def describe(self) -> str:
        module = self.globals_dict.get("__name__", "?")
        return f"global {module}.{self.name}"


@dataclass(frozen=True, eq=False)
class ClosureSource(Source):
    function: Any
    index: int

    def expression(self, constant_name: Any) -> str:
        return f"{constant_name(self.function)}.__closure__[{self.index}].cell_contents"

    def describe(self) -> str:
        name = self.function.__code__.co_freevars[self.index]
        return f"closure variable {name!r} of {self.function.__qualname__}"


@dataclass(frozen=True, eq=False)
class AttributeSource(Source):
    base: Source
    name: str

    def expression(self, constant_name: Any) -> str:
        base = self.base.expression(constant_name)
        # a keyword or a non-ASCII name (Python reads ``obj.ﬁ`` as ``obj.fi``) is fetched with getattr
        plain = self.name.isascii() and self.name.isidentifier() and not keyword.iskeyword(self.name)
        return f"{base}.{self.name}" if plain else f"getattr({base}, {self.name!r})"

    def describe(self) -> str:
        return f"{self.base.describe()}.{self.name}"


@dataclass(frozen=True, eq=False)
class ModuleEntrySource(Source):
    """A submodule, parameter or buffer of an ``nn.Module``, read from the table that
    ``nn.Module.__getattr__`` would look in: ``m._parameters['weight']`` is ``m.weight`` without the
    Python-level ``__getattr__`` call (a microsecond per fetch, on every call of the prologue)."""

    base: Source
    table: str  # "_modules", "_parameters" or "_buffers"
    name: str

    def expression(self, constant_name: Any) -> str:
        return f"{self.base.expression(constant_name)}.{self.table}[{self.name!r}]"

    def describe(self) -> str:
        return f"{self.base.describe()}.{self.name}"


@dataclass(frozen=True, eq=False)
class ItemSource(Source):
    base: Source
    key: Any  # an int, str or other constant usable as a literal

    def expression(self, constant_name: Any) -> str:
        # only an int's or a str's repr is known to be a literal; any other key is bound by name
        key = repr(self.key) if type(self.key) in (int, str) else constant_name(self.key)
        return f"{self.base.expression(constant_name)}[{key}]"

    def describe(self) -> str:
        return f"{self.base.describe()}[{self.key!r}]"


@dataclass(frozen=True, eq=False)
class StoredItemSource(ItemSource):
    """An item as stored in a dict, list or tuple whose subclass overrides ``__getitem__``: the
    override may compute a new value on every read (transformers' ``ACT2FN`` builds a module)."""

    container: type = dict  # dict, list or tuple

    def expression(self, constant_name: Any) -> str:
        key = repr(self.key) if type(self.key) in (int, str) else constant_name(self.key)
        return f"{self.container.__name__}.__getitem__({self.base.expression(constant_name)}, {key})"


@dataclass(frozen=True, eq=False)
class ConstantSource(Source):
    """A value the prologue holds itself (a module the compiled function was built for)."""

    value: Any
    label: str = "constant"

    def expression(self, constant_name: Any) -> str:
        return constant_name(self.value)

    def describe(self) -> str:
        return self.label


@dataclass(frozen=True, eq=False)
class LengthSource(Source):
    """The length of a sequence the computation iterated or unpacked."""

    base: Source

    def expression(self, constant_name: Any) -> str:
        return f"len({self.base.expression(constant_name)})"

    def describe(self) -> str:
        return f"len({self.base.describe()})"


@dataclass(frozen=True, eq=False)
class KeysSource(Source):
    """The keys of a dict, in order, as a tuple."""

    base: Source

    def expression(self, constant_name: Any) -> str:
        return f"tuple({self.base.expression(constant_name)})"

    def describe(self) -> str:
        return f"the keys of {self.base.describe()}"


@dataclass(frozen=True, eq=False)
class CallSource(Source):
    """The call's positional arguments (``args``) or keyword arguments (``kwargs``) as a whole."""

    name: str  # "args" or "kwargs"

    def expression(self, constant_name: Any) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class TypeSource(Source):
    """The type of a value: ``type(args[0])``, checked by identity for objects guarded by their attributes."""

    base: Source

    def expression(self, constant_name: Any) -> str:
        return f"type({self.base.expression(constant_name)})"

    def describe(self) -> str:
        return f"type({self.base.describe()})"


@dataclass(frozen=True, eq=False)
class HasAttributeSource(Source):
    """Whether a value has an attribute: the program found it missing (``getattr(obj, name, default)``)."""

    base: Source
    name: str

    def expression(self, constant_name: Any) -> str:
        return f"hasattr({self.base.expression(constant_name)}, {self.name!r})"

    def describe(self) -> str:
        return f"hasattr({self.base.describe()}, {self.name!r})"
