"""Shared helpers: run a function natively and through the VM and compare."""

from __future__ import annotations

from typing import Any


def _allow_vm_without_torch() -> None:
    """thunder/interpreter/__init__.py imports the torch-based frontend; the VM itself does not
    need torch, so where torch is missing (the 3.12 test run) load the VM package on its own."""
    import importlib.util
    import pathlib
    import sys
    import types

    if importlib.util.find_spec("torch") is not None or "thunder.interpreter" in sys.modules:
        return
    package_dir = pathlib.Path(__file__).resolve().parents[2] / "src" / "thunder" / "interpreter"
    shim = types.ModuleType("thunder.interpreter")
    shim.__path__ = [str(package_dir)]
    sys.modules["thunder.interpreter"] = shim


_allow_vm_without_torch()

from thunder.interpreter.vm import InterpreterHooks, interpret  # noqa: E402


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
        assert code.co_qualname in interpreted
    return actual


import pytest  # noqa: E402


@pytest.fixture(name="check")
def check_fixture() -> Any:
    return check


@pytest.fixture(name="run_vm")
def run_vm_fixture() -> Any:
    return run_vm
