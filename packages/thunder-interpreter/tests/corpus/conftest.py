"""The corpus harness: each program runs eagerly and through ``jit`` on the same inputs.

A program is a function plus ``make_args(size, seed) -> (args, kwargs)``. ``check_jit`` calls the
compiled function three times (the first inputs, new values of the same shapes, new shapes) and
compares each result, or each raised exception's type and message, with CPython running the same
function on the same inputs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

from thunder.core import pipeline
from thunder.core.executor import Executor, OperatorExecutor, to_torch_arguments
from thunder.core.module import ThunderModule
from thunder.interpreter import interpreter_frontend


@functools.cache
def _executors() -> list[Executor]:
    """The torch executor when thunder-executors is installed; otherwise a minimal stand-in."""
    try:
        from thunder.executors.torchex import executor

        return [executor]
    except ImportError:
        return [_eager_executor()]


def _eager_executor() -> Executor:
    import operator

    import thunder.torch as ltorch

    class Eager(OperatorExecutor):
        def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            return to_torch_arguments(args, kwargs)

    executor = Eager("corpus_eager")
    claimed = {**ltorch.torch_callables(), operator.getitem: ltorch.getitem}
    for torch_fn, symbol in claimed.items():
        if symbol.id not in executor.implementations and callable(torch_fn):
            name = f"op_{symbol.name}"
            executor.register_implementation(
                symbol, executor.register_operator(name, fn=torch_fn, like=symbol)
            )
    return executor


def jit(fn: Callable, **options: Any) -> Any:
    """``thunder.jit`` assembled from the interpreter's own dependencies (no meta package)."""
    # THUNDER_CORPUS_CACHE="symbolic values" runs the whole corpus with numbers as trace inputs
    cache = options.pop("cache", os.environ.get("THUNDER_CORPUS_CACHE", "constant values"))
    jitted = pipeline.jit(fn, frontend=interpreter_frontend, cache=cache, **options)
    jitted._compile_data.executors = _executors()
    return ThunderModule(fn, jitted) if isinstance(fn, torch.nn.Module) else jitted


_TENSOR_SHAPES: dict[str, Callable[[int], tuple[int, ...]]] = {
    "t": lambda size: (size, 4),  # a matrix whose first dimension changes with the size
    "v": lambda size: (size,),  # a vector
    "m": lambda size: (4, 4),  # a square matrix whose shape never changes
}


def make_args(spec: tuple, size: int, seed: int) -> tuple:
    """Inputs from a spec: ``"t"``/``"v"``/``"m"`` are random tensors, a callable gives ``value(seed)``."""
    generator = torch.Generator().manual_seed(seed)
    args = []
    for entry in spec:
        if isinstance(entry, str):
            args.append(torch.randn(_TENSOR_SHAPES[entry](size), generator=generator))
        else:
            args.append(entry(seed))
    return tuple(args)


def assert_same(actual: Any, expected: Any) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), (type(actual), expected)
        torch.testing.assert_close(actual, expected)
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and list(actual) == list(expected), (actual, expected)
        for key in expected:
            assert_same(actual[key], expected[key])
    else:
        assert type(actual) is type(expected) and actual == expected, (actual, expected)


def _outcome(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args, **kwargs), None
    except Exception as error:  # compared with the compiled function's behaviour
        return None, error


def check_jit(fn: Callable, *spec: Any, sizes: tuple[int, ...] = (3, 3, 5), kwargs: dict | None = None,
              **options: Any) -> Any:  # fmt: skip
    """Compare ``jit(fn)`` with ``fn`` on inputs from ``spec`` (see ``make_args``): three calls, the
    second with new values of the same shapes, the third with new shapes. ``kwargs`` maps keyword
    names to specs of one entry. Returns the compiled function."""
    spec = spec or ("t",)
    keyword_specs = kwargs or {}
    jitted = jit(fn, **options)
    for seed, size in enumerate(sizes):

        def inputs() -> tuple[tuple, dict]:  # fresh each time: the program may change its inputs
            named = {k: make_args((entry,), size, seed + 100)[0] for k, entry in keyword_specs.items()}
            return make_args(spec, size, seed), named

        args, named = inputs()
        expected, expected_error = _outcome(fn, args, named)
        args, named = inputs()
        actual, actual_error = _outcome(jitted, args, named)
        if expected_error is not None:
            assert actual_error is not None, f"compiled returned {actual!r}; eager raised {expected_error!r}"
            assert type(actual_error) is type(expected_error), (actual_error, expected_error)
            assert str(actual_error) == str(expected_error)
            continue
        if actual_error is not None:
            raise actual_error
        assert_same(actual, expected)
    return jitted


@pytest.fixture(name="check_jit")
def check_jit_fixture() -> Callable:
    return check_jit


@pytest.fixture(name="jit")
def jit_fixture() -> Callable:
    return jit
