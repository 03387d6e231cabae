"""Side effects on Python objects that outlive the traced call: recorded, undone, replayed.

While the VM runs the program it really performs each write (``layer.keys = t``, ``outputs.append(t)``,
a global assignment), so that the program's later reads see it; the objects then briefly hold proxies.
This module remembers every object written that the program read from outside the call (it has a
source: an argument, a global, a module attribute, anything reachable from those), undoes the writes
when tracing ends, and turns the objects' final states into the epilogue (``core/epilogue.py``), which
writes them again with real values after every run of the compiled computation:

- an attribute: ``target.name = value`` (or ``del target.name`` if the program deleted it);
- a global: ``globals[name] = value`` (or its deletion);
- a tensor's ``.grad`` after ``loss.backward()`` in the program: the gradient added to it, or assigned
  when it is None, as eager's ``AccumulateGrad`` does; or the value the program left in it;
- a list, dict, set or deque changed in place (``append``, ``[]=``, ``update``, ``pop``, ...): its whole
  final contents (``target[:] = [...]``), whichever operations produced them, so a ``sort(key=...)``,
  an ``extend(generator)`` or a ``pop`` needs no replay rule of its own.

Objects are written in the order the program first wrote them (so a new attribute or global lands
where eager puts it in the namespace's order); every target is fetched (through its
source, from the current call's arguments) before the first write. A value written is one of: a tensor
or number the computation produced (an extra output of the computation), a constant, an object with a
source (fetched like a target), an item the container held before the call, or a list/tuple/named tuple/dict/set
the program built (built again); anything else (an object of a Python class created inside the call) cannot
be replayed and raises an error naming the object, the operation and the user's line.

Objects the program created itself and that nothing outside can reach are never reported (the VM
only reports writes to objects with a source), so they need no replay.
"""

from __future__ import annotations

import collections
import copy
import enum
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from thunder.core import devices, dtypes
from thunder.core.epilogue import Epilogue, EpilogueBuilder
from thunder.core.proxies import Proxy
from thunder.core.sources import AttributeSource, GlobalSource, ItemSource, KeysSource, LengthSource, Source
from thunder.interpreter.returned_objects import attributes, holds_traced, is_plain_object, replace_at

__all__ = ["SideEffects", "UnreplayableSideEffectError"]

_MISSING = object()
_CONSTANT_TYPES = (
    int, float, bool, complex, str, bytes, type(None), torch.dtype, torch.device, enum.Enum, type,
    types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
)  # fmt: skip
_BUILT_TYPES = (list, tuple, dict, set, frozenset, collections.OrderedDict)


class UnreplayableSideEffectError(NotImplementedError):
    """A side effect on an outside object whose value the epilogue cannot write again on later calls."""


@dataclass
class _Write:
    """One object (or global) the program wrote, with what undoes the write."""

    kind: str  # "attribute", "global" or "contents"
    target: Any  # the object, or the globals dict
    source: Source | None  # the target's source (None for a globals dict)
    name: str | None  # attribute or global name
    operation: str  # for messages: "assigns", "append", "[]=", ...
    location: str  # the user's line of the last write
    before: Any  # the state before the first write (_MISSING: absent)


def _contents(container: Any) -> Any:
    if isinstance(container, dict):
        return dict(container)
    return list(container)


def _restore_contents(container: Any, contents: Any) -> None:
    if isinstance(container, list):
        container[:] = contents
    elif isinstance(container, dict):
        container.clear()
        container.update(contents)
    elif isinstance(container, collections.deque):
        container.clear()
        container.extend(contents)
    else:  # a set
        container.clear()
        container.update(contents)


def _is_named_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple)


def _attribute_state(obj: Any, name: str) -> Any:
    return getattr(obj, name, _MISSING)


class SideEffects:
    """The writes a traced call made to outside objects.

    ``source_of(obj)``: the VM's provenance lookup; ``location()``: the user's current line.
    """

    def __init__(self, source_of: Callable[[Any], Source | None], location: Callable[[], str]):
        self._source_of = source_of
        self._location = location
        self._writes: dict[tuple, _Write] = {}  # in the order of the first write
        self._changed_sources: set[int] = set()  # ids of the sources of containers changed in place
        self._written_globals: set[tuple[int, str]] = set()
        # .grad of the program's inputs: (where the tensor is, "add" or "assign", the value)
        self._gradients: list[tuple[Source, str, Proxy | None]] = []

    def __bool__(self) -> bool:
        return bool(self._writes) or bool(self._gradients)

    def accumulate_grad(self, source: Source, gradient: Proxy) -> None:
        """``loss.backward()`` in the program gave the tensor at ``source`` this gradient
        (``core/transforms/inline_backward.py``): the epilogue adds it to the tensor's ``.grad``."""
        self._gradients.append((source, "add", gradient))

    def assign_grad(self, source: Source, value: Proxy | None) -> None:
        """The program left the ``.grad`` of the tensor at ``source`` holding ``value`` (None included)."""
        self._gradients.append((source, "assign", value))

    def _note(self, key: tuple, write: _Write) -> None:
        known = self._writes.get(key)
        if known is None:
            self._writes[key] = write
        else:  # the state from before the first write, and its place (attributes keep eager's order)
            known.operation, known.location = write.operation, write.location

    def attribute(self, obj: Any, name: str) -> None:
        """Before ``obj.name = value`` on an object read from outside the call."""
        source = self._source_of(obj)
        if source is None:
            return
        prop = getattr(type(obj), name, None)
        if isinstance(prop, property):
            raise UnreplayableSideEffectError(
                f"assigning {source.describe()}.{name} runs the property setter "
                f"{type(obj).__qualname__}.{name} natively, which thunder cannot replay on later calls "
                f"(at {self._location()})"
            )
        before = _attribute_state(obj, name)
        self._note(
            (id(obj), name), _Write("attribute", obj, source, name, "assigns", self._location(), before)
        )

    def global_(self, globals_dict: dict, name: str) -> None:
        """Before ``global name`` is assigned or deleted."""
        before = globals_dict.get(name, _MISSING)
        write = _Write("global", globals_dict, None, name, "assigns", self._location(), before)
        self._note((id(globals_dict), name), write)
        self._written_globals.add((id(globals_dict), name))

    def contents(self, container: Any, source: Source, operation: str) -> None:
        """Before ``container`` (read from ``source``) is changed in place by ``operation``."""
        before = _contents(container)
        self._note(
            (id(container),), _Write("contents", container, source, None, operation, self._location(), before)
        )
        self._changed_sources.add(id(source))

    def written_by_program(self, source: Source) -> bool:
        """A value read back from what the program itself wrote, or reached through it (an attribute of a
        module a global was lazily set to, as ``torch.autograd.profiler`` does): the prologue must not
        check it, since the call begins without the write."""
        while True:
            if isinstance(source, GlobalSource):
                return (id(source.globals_dict), source.name) in self._written_globals
            if isinstance(source, AttributeSource):
                source = source.base
            elif isinstance(source, (ItemSource, LengthSource, KeysSource)):
                source = source.base
                if id(source) in self._changed_sources:
                    return True
            else:
                return False

    def undo(self) -> None:
        """Give the user's objects back the state they had before the call (they may hold proxies now)."""
        for write in reversed(self._writes.values()):
            if write.kind == "contents":
                _restore_contents(write.target, write.before)
            elif write.kind == "global":
                write.target.pop(write.name, None)
                if write.before is not _MISSING:
                    write.target[write.name] = write.before
            elif write.before is _MISSING:
                assert write.name is not None  # an attribute write has a name
                if hasattr(write.target, write.name):
                    delattr(write.target, write.name)
            else:
                assert write.name is not None
                setattr(write.target, write.name, write.before)

    def build(
        self,
        adopt: Callable[[torch.Tensor], Proxy],
        returned: Sequence[tuple[str, Source]] = (),
        created: Sequence[tuple[tuple, Any]] = (),
    ) -> tuple[Epilogue | None, list]:
        """The epilogue replaying the final states, and the values the computation must return for it.

        ``returned``: input objects the output holds (where in the output, where from), which the
        epilogue puts there from the call's own inputs. ``created``: objects the program made that
        hold what it computed (key path in the output, object; returned_objects.py), which the epilogue
        builds anew. Call before ``undo``: the final states are read from the objects themselves.
        """
        return _EpilogueWriter(self, adopt).write(returned, created)


class _EpilogueWriter:
    def __init__(self, effects: SideEffects, adopt: Callable[[torch.Tensor], Proxy]):
        self.effects = effects
        self.adopt = adopt
        self.builder = EpilogueBuilder()
        self.values: list = []
        self._value_index: dict[int, int] = {}
        self._built: dict[int, str] = {}  # containers the program built, written once per run
        self._originals: dict[int, tuple[_Write, Any]] = {}  # id(item) -> (write, key in `before`)
        self._original_names: dict[int, str] = {}  # id(write) -> local with the contents before
        self._write: _Write | None = None

    def write(
        self, returned: Sequence[tuple[str, Source]] = (), created: Sequence[tuple[tuple, Any]] = ()
    ) -> tuple[Epilogue | None, list]:
        for path, source in returned:  # the call's own objects, fetched before any write
            self.builder.statement(f"output{path} = {self.builder.fetch(source)}")
        for keys, obj in created:  # objects the program made, made again with this call's values
            rebuilt = self._created_object(obj)
            self.builder.statement(
                f"output = {self.builder.constant(replace_at)}(output, {keys!r}, {rebuilt})"
            )
        writes = list(self.effects._writes.values())
        for write in writes:
            if write.kind == "contents":
                before_keys = write.before if isinstance(write.before, dict) else range(len(write.before))
                for key in before_keys:
                    self._originals.setdefault(id(write.before[key]), (write, key))
        for source, how, gradient in self.effects._gradients:
            target, value = self.builder.fetch(source), self._value(gradient)
            if how == "assign":  # the program set .grad anew: the old gradient is dropped first
                self.builder.statement(f"{target}.grad = {value}")
                self.builder.before(source, "grad")
            else:  # eager's AccumulateGrad
                self.builder.statement(f"if {target}.grad is None: {target}.grad = {value}")
                self.builder.statement(f"else: {target}.grad.add_({value})")
        for write in writes:
            self._write = write
            getattr(self, f"_{write.kind}")(write)
        return self.builder.finish(), self.values

    def _target(self, write: _Write) -> str:
        assert write.source is not None  # only writes to objects read from outside are recorded
        return self.builder.fetch(write.source)

    def _attribute(self, write: _Write) -> None:
        target = self._target(write)
        name = write.name
        assert name is not None
        spelled = f"{target}.{name}" if name.isidentifier() and name.isascii() else None
        final = _attribute_state(write.target, name)
        if final is _MISSING:
            self.builder.statement(f"if hasattr({target}, {name!r}): delattr({target}, {name!r})")
        elif spelled is not None:
            self.builder.statement(f"{spelled} = {self._value(final)}")
        else:
            self.builder.statement(f"setattr({target}, {name!r}, {self._value(final)})")

    def _global(self, write: _Write) -> None:
        globals_name = self.builder.constant(write.target)
        final = write.target.get(write.name, _MISSING)
        if final is _MISSING:
            self.builder.statement(f"{globals_name}.pop({write.name!r}, None)")
        else:
            self.builder.statement(f"{globals_name}[{write.name!r}] = {self._value(final)}")

    def _contents(self, write: _Write) -> None:
        target = self._target(write)
        container = write.target
        if isinstance(container, dict):
            items = ", ".join(f"{self._value(k)}: {self._value(v)}" for k, v in container.items())
            self.builder.statement(f"{target}.clear(); {target}.update({{{items}}})")
            return
        items = ", ".join(self._value(item) for item in container)
        if isinstance(container, list):
            self.builder.statement(f"{target}[:] = [{items}]")
        elif isinstance(container, collections.deque):
            self.builder.statement(f"{target}.clear(); {target}.extend([{items}])")
        else:
            self.builder.statement(f"{target}.clear(); {target}.update([{items}])")

    def _value(self, value: Any) -> str:
        """An expression for ``value`` in the epilogue."""
        if isinstance(value, torch.Tensor):
            value = self.adopt(value)
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            # a symbolic size (thunder.core.symbolic_shapes): a value the computation returns, as a proxy
            constant = value.node.maybe_as_int() if isinstance(value, torch.SymInt) else None
            if constant is not None:
                return self.builder.constant(int(constant))
        if isinstance(value, (Proxy, torch.SymInt, torch.SymFloat, torch.SymBool)):
            index = self._value_index.get(id(value))
            if index is None:
                index = self._value_index[id(value)] = len(self.values)
                self.values.append(value)
            return EpilogueBuilder.value(index)
        if isinstance(value, dtypes.dtype):  # a proxy's dtype: the user's object gets torch's
            return self.builder.constant(dtypes.to_torch_dtype(value))
        if isinstance(value, devices.Device):
            return self.builder.constant(devices.to_torch_device(value))
        if isinstance(value, _CONSTANT_TYPES) or value is Ellipsis:
            return self.builder.constant(value)
        source = self.effects._source_of(value)
        if source is not None:
            return self.builder.fetch(source)
        original = self._originals.get(id(value))
        if original is not None and original[0].before[original[1]] is value:
            return self._original(*original)
        if type(value) in _BUILT_TYPES or type(value) is torch.Size or _is_named_tuple(value):
            return self._built_container(value)
        if self._write is None:  # inside an object the program made and returns (returned_objects.py)
            return self._created_object(value) if is_plain_object(value) else self.builder.constant(value)
        write = self._write
        assert write is not None  # set by write() for each recorded write
        place = write.source.describe() if write.source is not None else "?"
        where = f"{place}.{write.name}" if write.kind == "attribute" else (
            f"global {write.name}" if write.kind == "global" else f"{place} ({write.operation})"
        )  # fmt: skip
        raise UnreplayableSideEffectError(
            f"the compiled function writes a {type(value).__module__}.{type(value).__qualname__} object it created "
            f"to {where}, an object the caller can see; thunder replays such writes after every call "
            "but cannot create that object again. Return it instead, or create it outside the compiled "
            f"function (at {write.location})"
        )

    def _original(self, write: _Write, key: Any) -> str:
        """An item the container held before the call, taken from the contents fetched at the start."""
        name = self._original_names.get(id(write))
        if name is None:
            target = self._target(write)
            copy = f"dict({target})" if isinstance(write.before, dict) else f"list({target})"
            name = self._original_names[id(write)] = self.builder.fetch_expression(copy)
        return f"{name}[{self._value(key)}]"

    def _created_object(self, obj: Any) -> str:
        """An object the program made and returns: a copy of the one made while tracing, its attributes
        that hold computed values, containers or other objects set from this run (once per run, if
        shared): eager makes them anew on every call, and a caller may change them."""
        known = self._built.get(id(obj))
        if known is not None:
            return known
        name = self.builder.local(f"{self.builder.constant(copy.copy)}({self.builder.constant(obj)})")
        self._built[id(obj)] = name
        in_dict = vars(obj) if isinstance(getattr(obj, "__dict__", None), dict) else {}
        for attribute, item in attributes(obj).items():
            if holds_traced(item) or type(item) in _BUILT_TYPES or is_plain_object(item):
                # past __setattr__ (a frozen dataclass, a custom one): through __dict__, or object's for a slot
                if attribute in in_dict:
                    self.builder.statement(f"{name}.__dict__[{attribute!r}] = {self._value(item)}")
                else:
                    setter = self.builder.constant(object.__setattr__)
                    self.builder.statement(f"{setter}({name}, {attribute!r}, {self._value(item)})")
        return name

    def _built_container(self, value: Any) -> str:
        """A list, tuple, dict or set the program built: built anew on every run (once, if shared)."""
        known = self._built.get(id(value))
        if known is not None:
            return known
        if isinstance(value, dict):
            items = ", ".join(f"{self._value(k)}: {self._value(v)}" for k, v in value.items())
            expression = f"{{{items}}}"
        else:
            items = ", ".join(self._value(item) for item in value)
            expression = f"[{items}]"
        if _is_named_tuple(value):
            expression = f"{self.builder.constant(type(value))}(*{expression})"
        elif type(value) is not list and type(value) is not dict:
            expression = f"{self.builder.constant(type(value))}({expression})"
        name = self.builder.local(expression)
        self._built[id(value)] = name
        return name
