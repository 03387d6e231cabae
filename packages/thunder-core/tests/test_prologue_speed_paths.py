"""The prologue's fast spellings of its checks decide exactly as the checks they shortcut.

A value check first compares the value with the very object traced (``is``) and only then its type
and value; a dict's keys are first compared object by object at C speed and only then by
``check_keys``; fetches through a module's globals and both sides of an alias check are bound once.
Each test builds a prologue directly (no interpreter), reads it as Python, and checks that what passes
and what fails is what the plain checks decide: equal values of another type (``1 == True == 1.0``)
fail, equal values that are other objects pass.
"""

from __future__ import annotations

import os
import types
from typing import Any

import pytest
import torch

from thunder.core.prologue import GuardFailure, PrologueBuilder
from thunder.core.sources import AttributeSource, ConstantSource, GlobalSource, ItemSource
from thunder.core.trace import Trace


class Holder:
    """A plain object whose attributes the prologues below check."""


def _prologue(guards: list[tuple[str, Any, Any]]) -> tuple[Any, str]:
    """A compiled prologue of no inputs with the given guards: (kind, value, source)."""
    builder = PrologueBuilder(Trace("computation"))
    for kind, value, source in guards:
        if kind == "alias":
            builder.add_alias_guard(*source)  # source: (the path, the first path to the same object)
        else:
            {"value": builder.add_value_guard, "identity": builder.add_identity_guard,
             "container": builder.add_container_guard}[kind](value, source)  # fmt: skip
    trace = builder.finish()
    text = str(trace)
    compile(text, "<prologue>", "exec")  # a printed prologue is Python
    return trace.python_callable(), text


def _passes(prologue: Any) -> bool:
    try:
        prologue()
    except GuardFailure:
        return False
    return True


# (the value traced, values equal to it that must fail, an equal value that is another object)
VALUES = {
    "int": (16, [16.0, 16 + 0j], int("16")),
    "one": (1, [True, 1.0], int("1")),
    "large int": (100_000, [100_000.0, "100000"], int("100000")),
    "float": (1e-6, [1, "1e-06"], float("1e-06")),
    "str": ("sdpa", [b"sdpa", ["sdpa"]], "".join(["sd", "pa"])),
    "bytes": (b"/bin/bash", ["/bin/bash", bytearray(b"/bin/bash")], bytes([*b"/bin/bash"])),
    "device": (torch.device("cpu"), ["cpu", torch.device("meta")], torch.device("cpu")),
    "zero": (0, [False, 0.0], int("0")),
}


@pytest.mark.parametrize("kind", list(VALUES))
def test_a_value_check_passes_the_same_or_an_equal_value_and_nothing_else(kind: str) -> None:
    traced, others, equal = VALUES[kind]
    holder = Holder()
    holder.value = traced
    prologue, text = _prologue([("value", traced, AttributeSource(ConstantSource(holder), "value"))])
    assert " is not " in text and "type(_checked)" in text  # the shortcut, then the full check
    assert _passes(prologue)
    holder.value = equal
    assert _passes(prologue), "an equal value of the same type is another object: it still passes"
    for other in others:
        holder.value = other
        assert not _passes(prologue), f"{other!r} ({type(other).__name__}) passed a check for {traced!r}"
    holder.value = traced
    assert _passes(prologue)


def test_a_nan_is_still_compared_by_check_value() -> None:
    holder = Holder()
    holder.value = float("nan")
    prologue, text = _prologue([("value", holder.value, AttributeSource(ConstantSource(holder), "value"))])
    assert "check_value(" in text
    holder.value = float("nan")  # another NaN object: check_value equates NaN with NaN
    assert _passes(prologue)
    holder.value = 1.0
    assert not _passes(prologue)


def test_the_keys_of_a_dict_pass_as_the_same_objects_or_equal_strings_and_ints() -> None:
    class Key:  # keys other than strings and ints are compared by identity
        pass

    first, second = Key(), Key()
    table = {first: 1, "name": 2, 3: 4}
    prologue, text = _prologue([("container", table, ConstantSource(table))])
    assert "all(map(is_, " in text and "check_keys(" in text
    assert _passes(prologue)
    rebuilt = {first: 1, "".join(["na", "me"]): 2, int("3"): 4}  # equal str and int keys, new objects
    table.clear()
    table.update(rebuilt)
    assert _passes(prologue)
    for keys in ([second, "name", 3], [first, "name"], [first, "name", 3, 5], ["name", first, 3],
                 [first, b"name", 3], [first, "name", 3.0]):  # fmt: skip
        table.clear()
        table.update(dict.fromkeys(keys, 0))
        assert not _passes(prologue), keys


def test_environment_variables_through_a_modules_globals() -> None:
    """``os.environ._data`` read through a module's globals is bound once, and still checked per key."""
    namespace = {"os": os}
    data = os.environ._data  # type: ignore[attr-defined]
    environ_data = AttributeSource(AttributeSource(GlobalSource(namespace, "os"), "environ"), "_data")
    keys = list(data)[:5]
    guards = [("container", data, environ_data)]
    guards += [("value", data[k], ItemSource(environ_data, k)) for k in keys]
    prologue, text = _prologue(guards)
    assert _passes(prologue)
    assert text.count(".environ") == 1, text  # the chain is fetched once, not once per variable
    os.environ[os.fsdecode(keys[0])] = os.fsdecode(data[keys[0]])  # set again: another equal object
    assert _passes(prologue)
    os.environ["THUNDER_TEST_PROLOGUE_FAST_PATHS"] = "1"  # one key more
    try:
        assert not _passes(prologue)
    finally:
        del os.environ["THUNDER_TEST_PROLOGUE_FAST_PATHS"]
    assert _passes(prologue)
    namespace["os"] = types.SimpleNamespace(environ=os.environ)  # the global rebound: the same data
    assert _passes(prologue), "the data read through another object is still the same data"
    namespace["os"] = types.SimpleNamespace(environ=types.SimpleNamespace(_data=dict(data)))
    assert _passes(prologue), "equal keys and values read through another path still pass"
    namespace["os"] = os


def test_an_alias_check_binds_its_second_side_once() -> None:
    config, other = Holder(), Holder()
    first, second = Holder(), Holder()
    first.config = second.config = config
    root = Holder()
    root.first, root.second = first, second
    first_config = AttributeSource(AttributeSource(ConstantSource(root), "first"), "config")
    second_config = AttributeSource(AttributeSource(ConstantSource(root), "second"), "config")
    guards = [("identity", first, AttributeSource(ConstantSource(root), "first")),
              ("value", 3, AttributeSource(first_config, "n")),
              ("alias", None, (second_config, first_config))]  # fmt: skip
    config.n = 3
    prologue, text = _prologue(guards)
    alias_line = next(line for line in text.splitlines() if ".config is not " in line)
    assert "config is not _fetched" in alias_line, text  # not `... is not _constant0.first.config`
    assert _passes(prologue)
    second.config = other
    other.n = 3
    assert not _passes(prologue), "an equal config that is another object breaks the alias"
    second.config = config
    assert _passes(prologue)
    root.first = Holder()
    root.first.config = config
    assert not _passes(prologue)


def test_the_keys_are_the_ones_iteration_gives_whatever_len_says() -> None:
    class Key:
        pass

    class Lying(dict):  # a dict subclass whose len disagrees with its keys
        def __len__(self) -> int:
            return 2

    first = Key()
    table = Lying({first: 1, "name": 2})
    prologue, _ = _prologue([("container", table, ConstantSource(table))])
    assert _passes(prologue)
    table["more"] = 3  # len still says 2; the first two keys are the same objects
    assert not _passes(prologue)


def test_a_set_changed_in_place_fails_its_check() -> None:
    """A set is checked by value against a copy: against itself, a change in place would pass."""
    holder = Holder()
    holder.allowed = {1, 2}
    prologue, _ = _prologue([("value", holder.allowed, AttributeSource(ConstantSource(holder), "allowed"))])
    assert _passes(prologue)
    holder.allowed.add(3)
    assert not _passes(prologue)
    holder.allowed.discard(3)
    assert _passes(prologue)
    holder.allowed = frozenset({1, 2})  # equal, another type
    assert not _passes(prologue)
