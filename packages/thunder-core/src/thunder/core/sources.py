"""Where a value seen during tracing came from, so that a prologue can fetch and check it again.

The frontend records a *source* for every value it reads from outside the traced call's own
locals: the call's arguments, the function's globals and closure cells, and attributes or items
of values that already have a source. The prologue replays the source as Python on each call
(``args[0].fc1.weight``) and checks what the computation assumed about the value.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any, ClassVar

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
        return f"{self.base.expression(constant_name)}[{self._key_expression(constant_name)}]"

    def _key_expression(self, constant_name: Any) -> str:
        # only an int's or a str's repr is known to be a literal; any other key is bound by name
        return repr(self.key) if type(self.key) in (int, str) else constant_name(self.key)

    def describe(self) -> str:
        return f"{self.base.describe()}[{_describe_key(self.key)}]"


def _describe_key(key: Any) -> str:
    """A key as a message shows it: a tensor key (``optimizer.state[p]``) by its kind and shape, not its
    values (printing a parameter's values took 11 ms, once per parameter of a traced optimizer step)."""
    shape = getattr(key, "shape", None)
    if shape is not None and hasattr(
        key, "dtype"
    ):  # a tensor (the interpreter uses this module without torch)
        return f"<{type(key).__name__} of shape {tuple(shape)}, {key.dtype}>"
    return repr(key)


@dataclass(frozen=True, eq=False)
class StoredItemSource(ItemSource):
    """An item as stored in a dict, list or tuple whose subclass overrides ``__getitem__``: the
    override may compute a new value on every read (transformers' ``ACT2FN`` builds a module)."""

    container: type = dict  # dict, list or tuple

    def expression(self, constant_name: Any) -> str:
        base = self.base.expression(constant_name)
        return f"{self.container.__name__}.__getitem__({base}, {self._key_expression(constant_name)})"


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
class _BuiltinCallSource(Source):
    """Abstract: a builtin applied to another source's value, spelled ``len(args[0])`` both in the
    prologue and in messages. ``function`` names the builtin; ``_call`` adds any further argument."""

    base: Source
    function: ClassVar[str]

    def _call(self, argument: str) -> str:
        return f"{self.function}({argument})"

    def expression(self, constant_name: Any) -> str:
        return self._call(self.base.expression(constant_name))

    def describe(self) -> str:
        return self._call(self.base.describe())


@dataclass(frozen=True, eq=False)
class LengthSource(_BuiltinCallSource):
    """The length of a sequence the computation iterated or unpacked."""

    function = "len"


@dataclass(frozen=True, eq=False)
class KeysSource(_BuiltinCallSource):
    """The keys of a dict, in order, as a tuple."""

    function = "tuple"

    def describe(self) -> str:
        return f"the keys of {self.base.describe()}"


@dataclass(frozen=True, eq=False)
class TypeSource(_BuiltinCallSource):
    """The type of a value: ``type(args[0])``, checked by identity for objects guarded by their attributes."""

    function = "type"


@dataclass(frozen=True, eq=False)
class HasAttributeSource(_BuiltinCallSource):
    """Whether a value has an attribute: the program found it missing (``getattr(obj, name, default)``)."""

    name: str
    function = "hasattr"

    def _call(self, argument: str) -> str:
        return f"{self.function}({argument}, {self.name!r})"


@dataclass(frozen=True, eq=False)
class CallSource(Source):
    """The call's positional arguments (``args``) or keyword arguments (``kwargs``) as a whole."""

    name: str  # "args" or "kwargs"

    def expression(self, constant_name: Any) -> str:
        return self.name
