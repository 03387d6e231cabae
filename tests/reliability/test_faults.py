"""Faults degrade: failing executors fall back, user errors surface, interrupted compiles leave nothing.

Each test compares with eager PyTorch. The fusion executors here are made to fail on purpose: one
registered by the test, and the Triton executor with its kernel generation monkeypatched.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import traceback
import warnings
from collections.abc import Iterable

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before any Triton kernel is decorated

import thunder  # noqa: E402
from thunder.core.executor import FusionExecutor  # noqa: E402
from thunder.core.fusion_fallback import ExecutorFallbackWarning, FusionFallback  # noqa: E402
from thunder.core.pipeline import _jitted  # noqa: E402
from thunder.core.proxies import TensorProxy  # noqa: E402
from thunder.core.symbol import BoundSymbol, Symbol  # noqa: E402

_FUSIBLE = {"add", "mul", "sub", "neg", "exp", "tanh", "sin"}


class BrokenFusionExecutor(FusionExecutor):
    """Claims a few elementwise prims and fuses them into regions whose callable raises ``error``."""

    def __init__(self, name: str, error: BaseException):
        super().__init__(name)
        self.error = error
        self.calls = 0

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        symbol = bound_symbol.symbol
        return symbol.is_leaf and symbol.module == "prims" and symbol.name in _FUSIBLE

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        produced = {p.name for b in region for p in b.proxy_outputs()}
        inputs: dict[str, TensorProxy] = {}
        for b in region:
            inputs.update({p.name: p for p in b.proxy_args() if p.name not in produced})
        wanted = set(outputs) if outputs is not None else produced
        region_outputs = [p for b in region for p in b.proxy_outputs() if p.name in wanted]

        def run(*args: torch.Tensor) -> tuple:
            self.calls += 1
            raise self.error

        name = f"BrokenFusion{index}"
        symbol = Symbol(name=name, id=f"{self.name}.{name}", fn=run, executor=self)
        return BoundSymbol(symbol, tuple(inputs.values()), {}, tuple(region_outputs), tuple(region))


def _program(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x * y + 1).exp() - torch.sin(y)


def _fallback_warnings(caught: list) -> list:
    return [w for w in caught if issubclass(w.category, ExecutorFallbackWarning)]


def test_a_failing_fusion_region_runs_on_torch_with_one_warning() -> None:
    broken = BrokenFusionExecutor("broken_fusion", RuntimeError("fusion compile failed"))
    jitted = thunder.jit(_program, executors=[broken])
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(jitted(x, y), _program(x, y))
        x2, y2 = torch.randn(4, 5), torch.randn(4, 5)
        torch.testing.assert_close(jitted(x2, y2), _program(x2, y2))
    assert "BrokenFusion0" in str(thunder.last_traces(jitted)[-1])  # the region was built, and failed
    assert broken.calls == 1  # sticky: after the first failure the region runs on torch
    (warning,) = _fallback_warnings(caught)
    assert "broken_fusion" in str(warning.message) and "fusion compile failed" in str(warning.message)


def test_a_failing_fusion_region_falls_back_forward_and_backward() -> None:
    broken = BrokenFusionExecutor("broken_fusion_grad", ValueError("unsupported layout"))
    jitted = thunder.jit(_program, executors=[broken])
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    ex, ey = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted(x, y).sum().backward()
    _program(ex, ey).sum().backward()
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(y.grad, ey.grad)
    assert "BrokenFusion" in str(thunder.last_backward_traces(jitted)[-1])
    assert len(_fallback_warnings(caught)) == 2  # one region in the forward, one in the backward


def test_out_of_memory_in_a_fusion_region_is_not_swallowed() -> None:
    oom = torch.OutOfMemoryError("CUDA out of memory (simulated)")
    broken = BrokenFusionExecutor("oom_fusion", oom)
    jitted = thunder.jit(_program, executors=[broken])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(torch.OutOfMemoryError) as info:
            jitted(torch.randn(2), torch.randn(2))
    assert info.value is oom and not _fallback_warnings(caught)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_compile_error_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from thunder.executors.triton import cache as triton_cache
    from thunder.executors.triton import executor as triton_executor

    available, reason = triton_executor.is_available()
    if not available:
        pytest.skip(f"the Triton executor is unavailable: {reason}")

    def failing_generate_kernel(*args: object, **kwargs: object) -> None:
        raise RuntimeError("triton.compiler.errors.CompilationError (simulated)")

    monkeypatch.setattr(triton_cache, "generate_kernel", failing_generate_kernel)
    jitted = thunder.jit(_program, executors=["triton"])
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(jitted(x, y), _program(x, y))
        torch.testing.assert_close(jitted(y, x), _program(y, x))
    trace = thunder.last_traces(jitted)[-1]
    region = next(b for b in trace.bound_symbols if b.symbol.name.startswith("TritonFusion"))
    assert isinstance(region.symbol.fn, FusionFallback) and region.symbol.fn.error is not None
    assert len(_fallback_warnings(caught)) == 1


class UserError(Exception):
    pass


def _helper(x: torch.Tensor) -> torch.Tensor:
    if x.shape[0] > 2:
        raise _ERROR
    return x


_ERROR = UserError("raised by the user's code")


def test_user_exception_surfaces_unchanged_with_the_users_location() -> None:
    jitted = thunder.jit(lambda x: _helper(x * 2) + 1)
    with pytest.raises(UserError) as info:
        jitted(torch.randn(3))
    assert info.value is _ERROR and info.value.args == ("raised by the user's code",)
    text = "".join(traceback.format_exception(info.value))
    assert f"{__file__}:{_helper.__code__.co_firstlineno + 2}" in text  # the ``raise`` line
    torch.testing.assert_close(jitted(torch.ones(2)), torch.ones(2) * 2 + 1)  # and it still compiles


def _assert_recovers(jitted: object, fn: object) -> None:
    x = torch.randn(3, 4)
    torch.testing.assert_close(jitted(x), fn(x))  # type: ignore[operator]
    torch.testing.assert_close(jitted(x), fn(x))  # type: ignore[operator]
    assert len(_jitted(jitted)._cache) == 1 and thunder.cache_hits(jitted) == 1


def _square_plus_one(x: torch.Tensor) -> torch.Tensor:
    return x * x + 1


@pytest.mark.parametrize("error", [KeyboardInterrupt, ValueError])
def test_an_interrupted_transform_leaves_no_cache_entry(error: type[BaseException]) -> None:
    raised = []

    def transform(trace: thunder.Trace) -> thunder.Trace:
        if not raised:
            raised.append(True)
            raise error("interrupted in a transform")
        return trace

    jitted = thunder.jit(_square_plus_one, transforms=[transform])
    with pytest.raises(error):
        jitted(torch.randn(3, 4))
    assert _jitted(jitted)._cache == []
    _assert_recovers(jitted, _square_plus_one)


def test_a_keyboard_interrupt_inside_the_interpreter_leaves_no_cache_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from thunder.interpreter.frontend import TracingHooks

    original = TracingHooks.on_load
    raised = []

    def interrupted(self: TracingHooks, *args: object, **kwargs: object) -> object:
        if not raised:
            raised.append(True)
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TracingHooks, "on_load", interrupted)
    jitted = thunder.jit(_square_plus_one)
    with pytest.raises(KeyboardInterrupt):
        jitted(torch.randn(3, 4))
    assert _jitted(jitted)._cache == []
    _assert_recovers(jitted, _square_plus_one)


def test_out_of_memory_raised_by_an_op_propagates_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x) + 1

    jitted = thunder.jit(fn)
    x = torch.randn(4)
    torch.testing.assert_close(jitted(x), fn(x))
    assert "torch.exp(" in str(thunder.last_traces(jitted)[-1])
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")

    def exp_out_of_memory(*args: object, **kwargs: object) -> None:
        raise oom

    monkeypatch.setattr(torch, "exp", exp_out_of_memory)
    with pytest.raises(torch.OutOfMemoryError) as info:
        jitted(x)
    assert info.value is oom


def test_calls_from_many_threads_are_right_and_compile_once() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.sin() * y).sum(0) + y.mean()

    jitted = thunder.jit(fn, dynamic=False)  # an entry per shape (no symbolic size), as counted below
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for step in range(20):
                rows = 2 + (index + step) % 3  # three shapes shared by all threads
                x, y = torch.randn(rows, 4), torch.randn(rows, 4)
                torch.testing.assert_close(jitted(x, y), fn(x, y))
        except BaseException as error:  # noqa: BLE001 -- reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert thunder.cache_misses(jitted) == 3  # one compile per shape, however many threads raced
    assert thunder.cache_hits(jitted) == 6 * 20 - 3
