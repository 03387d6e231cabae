"""torch's global module hooks (``torch.nn.modules.module.register_module_forward_hook`` and the like)
run for every module call in eager: the compiled program runs them as eager does, for the wrapped
module and each submodule, whether registered before or after the first call, and stops running
them once removed. Before, one registered after the first call was never run (the prologue did not
check the empty global tables), and one registered before ran once more, for the ThunderModule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

module_globals = torch.nn.modules.module


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def _registering(kind: str, calls: list) -> Callable[[], Any]:
    if kind == "forward":
        return lambda: module_globals.register_module_forward_hook(
            lambda module, args, out: calls.append(type(module).__name__) or out * 2 + 1
        )
    return lambda: module_globals.register_module_forward_pre_hook(
        lambda module, args: calls.append(type(module).__name__) or tuple(a * 0.5 for a in args)
    )


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("kind", ["forward", "forward_pre"])
def test_a_global_hook_runs_as_in_eager(kind: str, when: str) -> None:
    model, calls = _model(), []
    register = _registering(kind, calls)
    handle = register() if when == "before" else None
    jitted = thunder.jit(model)
    try:
        for step in range(4):
            if step == 1 and handle is None:
                handle = register()  # after the first call: the cached entry must not be used
            x = torch.randn(2 + step % 2, 3)
            calls.clear()
            expected = model(x)
            eager_calls = list(calls)
            calls.clear()
            torch.testing.assert_close(jitted(x), expected)
            assert calls == eager_calls, (calls, eager_calls)
    finally:
        if handle is not None:
            handle.remove()
    x = torch.randn(2, 3)
    calls.clear()
    torch.testing.assert_close(jitted(x), model(x))  # removed: no hook on either side
    assert calls == []


def test_a_global_hook_reaches_a_module_called_by_a_jitted_function() -> None:
    model, calls = _model(), []
    jitted = thunder.jit(lambda x: model(x).sum(-1))
    jitted(torch.randn(2, 3))
    handle = _registering("forward", calls)()
    try:
        x = torch.randn(2, 3)
        expected = model(x).sum(-1)
        eager_calls = list(calls)
        calls.clear()
        torch.testing.assert_close(jitted(x), expected)
        assert calls == eager_calls == ["Linear", "ReLU", "Linear", "Sequential"]
    finally:
        handle.remove()


def test_hooks_of_the_wrapper_itself_run_once() -> None:
    model, calls = _model(), []
    jitted = thunder.jit(model)
    jitted.register_forward_hook(lambda module, args, out: calls.append("wrapper") or out + 1)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), model(x) + 1)
    assert calls == ["wrapper"]
    handle = _registering("forward", [])()
    try:  # the wrapper's hooks and global ones: the global ones would run once more than in eager
        with pytest.raises(NotImplementedError, match="global module hooks"):
            jitted(x)
    finally:
        handle.remove()


def test_a_global_backward_hook_is_refused_not_skipped() -> None:
    model = _model()
    jitted = thunder.jit(model)
    jitted(torch.randn(2, 3)).sum().backward()
    handle = module_globals.register_module_full_backward_hook(lambda module, grad_in, grad_out: None)
    try:
        with pytest.raises(NotImplementedError, match="BackwardHook"):
            jitted(torch.randn(2, 3)).sum().backward()
    finally:
        handle.remove()


def test_a_hook_registered_between_calls_is_seen_after_many_hits() -> None:
    """The prologue skips its hook-table checks while no hook handle was made since they passed
    (``prologue.HookRegistrations``): a hook registered after many such calls is still seen, on a
    submodule, and its removal too; the recompile reason names the table."""
    model = _model()
    jitted = thunder.jit(model)
    for _ in range(5):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jitted(x), model(x))
    assert "check the tables" in str(thunder.last_prologue_traces(jitted)[-1])
    handle = model[1].register_forward_hook(lambda module, args, out: out - 1)
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jitted(x), model(x))
    reason = thunder.compile_stats(jitted).recompile_reasons[-1]
    assert "_forward_hooks" in reason.what or "hook" in reason.message, reason
    handle.remove()
    misses = thunder.cache_misses(jitted)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == misses  # the first entry again
