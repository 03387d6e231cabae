"""thunder.jit on functions and modules, checked against eager PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

SCALE = 3.0


def _run_printed(source: str, *args: torch.Tensor) -> object:
    namespace: dict = {}
    exec(compile(source, "printed trace", "exec"), namespace)
    return namespace["computation"](*args)


def test_overview_function_matches_eager_and_its_trace_runs() -> None:
    def my_function(x, y):
        return F.relu(x @ y.T + 1.0).sum(dim=1) / SCALE

    x, y = torch.randn(4, 8), torch.randn(5, 8)
    jitted = thunder.jit(my_function)
    torch.testing.assert_close(jitted(x, y), my_function(x, y))
    source = str(thunder.last_traces(jitted)[-1])
    assert "bound when compiled" not in source
    torch.testing.assert_close(_run_printed(source, x, y), my_function(x, y))


def test_overview_module_shares_parameters_with_the_original() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    jitted = thunder.jit(model)
    assert isinstance(jitted, thunder.ThunderModule)
    x = torch.randn(3, 16)
    torch.testing.assert_close(jitted(x), model(x))
    assert dict(jitted.named_parameters()).keys() == dict(model.named_parameters()).keys()
    assert jitted.get_parameter("0.weight") is model[0].weight
    with torch.no_grad():
        model[0].weight.mul_(2)  # shared, not copied: the compiled module sees the change
    torch.testing.assert_close(jitted(x), model(x))


def test_cache_hits_and_new_entries() -> None:
    jitted = thunder.jit(lambda a, b: a * b + a)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    jitted(a, b)
    jitted(torch.randn(2, 3), torch.randn(2, 3))
    assert (thunder.cache_hits(jitted), thunder.cache_misses(jitted)) == (1, 1)
    out = jitted(torch.ones(4, 3, dtype=torch.float64), torch.ones(4, 3, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.shape == (4, 3)
    assert thunder.cache_misses(jitted) == 2
    assert thunder.cache_option(jitted) == "constant values"


def test_python_control_flow_specializes_and_is_guarded() -> None:
    def fn(x, n, flag):
        for _ in range(n):
            x = x * 2
        if flag:
            x = x - 1
        return x

    jitted = thunder.jit(fn)
    x = torch.randn(3)
    for n, flag in [(2, True), (3, False), (2, True), (2, False)]:
        torch.testing.assert_close(jitted(x, n, flag), fn(x, n, flag))
    assert thunder.cache_misses(jitted) == 3 and thunder.cache_hits(jitted) == 1


def test_globals_are_read_again_on_every_call() -> None:
    global SCALE
    jitted = thunder.jit(lambda x: x * SCALE)
    x = torch.ones(2)
    assert jitted(x).tolist() == [3.0, 3.0]
    SCALE = 5.0
    try:
        assert jitted(x).tolist() == [5.0, 5.0]  # a changed global is never served from a stale entry
    finally:
        SCALE = 3.0


def test_closures_kwargs_and_containers() -> None:
    offset = torch.randn(3)

    def fn(xs, *, weights):
        total = xs[0] * weights["a"]
        for x in xs[1:]:
            total = total + x * weights["b"]
        return {"total": total + offset, "parts": (xs[0].shape[0], len(xs))}

    xs = [torch.randn(3) for _ in range(3)]
    weights = {"a": 0.5, "b": 2.0}
    result, expected = thunder.jit(fn)(xs, weights=weights), fn(xs, weights=weights)
    torch.testing.assert_close(result["total"], expected["total"])
    assert result["parts"] == expected["parts"]


def test_closure_tensor_replaced_between_calls_is_seen() -> None:
    state = {"bias": torch.zeros(2)}

    def fn(x):
        return x + state["bias"]

    jitted = thunder.jit(fn)
    assert jitted(torch.ones(2)).tolist() == [1.0, 1.0]
    state["bias"] = torch.full((2,), 10.0)
    assert jitted(torch.ones(2)).tolist() == [11.0, 11.0]


def test_unsupported_torch_function_names_it_and_the_users_line() -> None:
    def uses_an_unsupported_op(x):
        return torch.sinc(x)

    with pytest.raises(NotImplementedError) as info:
        thunder.jit(uses_an_unsupported_op)(torch.randn(2))
    message = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "torch.sinc" in message
    assert "test_jit.py" in message and "return torch.sinc(x)" in message


def test_inplace_update_of_an_input_is_refused_not_ignored() -> None:
    def fn(x):
        x += 1
        return x

    with pytest.raises(NotImplementedError, match="in-place"):
        thunder.jit(fn)(torch.zeros(2))


def test_user_exceptions_surface_unchanged() -> None:
    def fn(x):
        if x.shape[0] > 2:
            raise ValueError("too long")
        return x

    with pytest.raises(ValueError, match="too long"):
        thunder.jit(fn)(torch.zeros(3))


def test_requires_grad_inputs_still_get_gradients() -> None:
    # thunder builds no backward of its own yet: the torch executor's ops run under PyTorch autograd.
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(2, 3)
    jitted = thunder.jit(lambda x, w: F.linear(x, w).relu().sum())
    jitted(x, w).backward()
    expected_w = w.detach().clone().requires_grad_()
    F.linear(x, expected_w).relu().sum().backward()
    torch.testing.assert_close(w.grad, expected_w.grad)


def test_inspection_api() -> None:
    jitted = thunder.jit(lambda x: x.exp())
    jitted(torch.randn(2))
    assert len(thunder.last_prologue_traces(jitted)) == 1
    assert "check_tensor" in str(thunder.last_prologue_traces(jitted)[-1])
    assert thunder.last_interpreted_instructions(jitted)
    assert thunder.list_transforms(jitted) == []
    assert thunder.last_backward_traces(jitted) == []
    assert "torch" in [e.name for e in thunder.get_all_executors()]
    assert thunder.compile_stats(jitted).last_stage_seconds["frontend"] >= 0
