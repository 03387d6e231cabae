"""Shared helpers: run a function natively and through the VM and compare."""

from __future__ import annotations

from typing import Any

import pytest

from thunder.interpreter.vm import InterpreterHooks, interpret
from thunder.interpreter.vm.errors import qualname_of


class LoggingHooks(InterpreterHooks):
    def __init__(self) -> None:
        self.instruction_log = []


def run_vm(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return interpret(fn, args, kwargs, InterpreterHooks())


def check(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Assert the VM gives the native result (or raises the same exception type and args)."""
    try:
        expected = fn(*args, **kwargs)
        expected_error = None
    except Exception as error:  # compare with the VM's behaviour below
        expected_error = error
    hooks = LoggingHooks()
    try:
        actual = interpret(fn, args, kwargs, hooks)
    except Exception as error:
        if expected_error is None:
            raise
        assert type(error) is type(expected_error), (error, expected_error)
        assert error.args == expected_error.args
        return error
    assert expected_error is None, f"VM returned {actual!r}, native raised {expected_error!r}"
    assert actual == expected, (actual, expected)
    interpreted = {record[0] for record in hooks.instruction_log}
    code = getattr(fn, "__code__", None)
    if code is not None:
        assert qualname_of(code, fn) in interpreted
    return actual


@pytest.fixture(name="check")
def check_fixture() -> Any:
    return check


@pytest.fixture(name="run_vm")
def run_vm_fixture() -> Any:
    return run_vm
