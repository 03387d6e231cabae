"""A C method bound to an object (``table.get``, ``fn.__get__``) is a new object on every read.

The prologue checked it by identity, which never holds again: the entry just compiled failed its own
prologue and ``GuardFailure`` reached the caller (an LR scheduler's wrapper around ``optimizer.step``
reads ``step.__get__``). It is checked by type, name and what it is bound to instead.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import thunder

TABLE = {"scale": 3.0}


def _scaled(x: torch.Tensor) -> torch.Tensor:
    get = TABLE.get  # a bound C method read from a global
    return x * get("scale")


def _bound_descriptor(x: torch.Tensor) -> torch.Tensor:
    bind = _scaled.__get__  # a method-wrapper
    return x + 1 if callable(bind) else x


def test_a_bound_builtin_read_hits_the_cache_and_what_it_reads_is_still_checked() -> None:
    jitted = thunder.jit(_scaled)
    x = torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(jitted(x), x * 3)
    assert thunder.cache_misses(jitted) == 1
    TABLE["scale"] = 5.0
    try:
        torch.testing.assert_close(jitted(x), x * 5)
    finally:
        TABLE["scale"] = 3.0
    assert thunder.cache_misses(jitted) == 2


def test_a_method_wrapper_read_hits_the_cache() -> None:
    jitted = thunder.jit(_bound_descriptor)
    x = torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(jitted(x), x + 1)
    assert thunder.cache_misses(jitted) == 1


def test_a_program_that_rejects_its_own_call_raises_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard that can never hold (a value that changes on every read) leaves no program to run:
    after the one retrace, the call raises an error naming the failed check, not thunder's internal
    GuardFailure."""
    from thunder.core import pipeline
    from thunder.core.prologue import GuardFailure

    compile_entry = pipeline.JittedFunction._compile

    def never_accepting(self: pipeline.JittedFunction, args: tuple, kwargs: dict) -> pipeline.CacheEntry:
        entry = compile_entry(self, args, kwargs)

        def prologue(*args: object, **kwargs: object) -> object:
            raise GuardFailure("x changed")

        return dataclasses.replace(entry, prologue=prologue)

    monkeypatch.setattr(pipeline.JittedFunction, "_compile", never_accepting)
    jitted = thunder.jit(lambda x: x + 1)
    with pytest.raises(RuntimeError, match="rejected the call they were made for") as caught:
        jitted(torch.ones(2))
    assert not isinstance(caught.value, GuardFailure)
    assert thunder.compile_stats(jitted).cache_misses == 2
