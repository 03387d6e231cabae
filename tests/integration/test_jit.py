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
    def uses_an_unsupported_op(x):  # data-dependent output shape: no fallback either
        return torch.nonzero(x)

    with pytest.raises(NotImplementedError) as info:
        thunder.jit(uses_an_unsupported_op)(torch.randn(2))
    message = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "torch.nonzero" in message
    assert "test_jit.py" in message and "return torch.nonzero(x)" in message


def test_inplace_update_of_an_input_is_applied_not_ignored() -> None:
    def fn(x):
        x += 1
        return x

    x = torch.zeros(2)
    assert thunder.jit(fn)(x).tolist() == [1.0, 1.0]
    assert x.tolist() == [1.0, 1.0]


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


# --- caching: every assumption is checked, a change is never served from a stale entry ---------------


def _activation(x):
    return torch.relu(x)


def _other_activation(x):
    return torch.tanh(x)


ACTIVATION = _activation
OPTIONS = {"depth": 2, "names": ["a", "b"]}


def test_a_rebound_global_function_retraces() -> None:
    global ACTIVATION
    jitted = thunder.jit(lambda x: ACTIVATION(x) * 2)
    x = torch.randn(4)
    torch.testing.assert_close(jitted(x), torch.relu(x) * 2)
    ACTIVATION = _other_activation
    try:
        torch.testing.assert_close(jitted(x), torch.tanh(x) * 2)
        assert thunder.cache_misses(jitted) == 2
        assert "['ACTIVATION'] is not _constant" in str(thunder.last_prologue_traces(jitted)[-1])
    finally:
        ACTIVATION = _activation


def test_a_changed_global_container_retraces() -> None:
    def fn(x):
        for _ in range(OPTIONS["depth"]):
            x = x * 2
        return x, len(OPTIONS["names"])

    jitted = thunder.jit(fn)
    x = torch.ones(2)
    assert jitted(x)[1] == 2
    OPTIONS["names"] = ["a", "b", "c"]  # same items first, one more: the length is checked
    OPTIONS["depth"] = 3
    try:
        result, count = jitted(x)
        assert count == 3 and result.tolist() == [8.0, 8.0]
    finally:
        OPTIONS.update(depth=2, names=["a", "b"])


def test_a_changed_closure_variable_retraces() -> None:
    scale = 2.0
    activation = torch.relu

    def fn(x):
        return activation(x) * scale

    jitted = thunder.jit(fn)
    x = torch.randn(5)
    torch.testing.assert_close(jitted(x), torch.relu(x) * 2.0)
    scale = 3.0
    torch.testing.assert_close(jitted(x), torch.relu(x) * 3.0)
    activation = torch.sigmoid  # a different function in the same cell
    torch.testing.assert_close(jitted(x), torch.sigmoid(x) * 3.0)
    assert thunder.cache_misses(jitted) == 3


def test_a_changed_module_attribute_retraces() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)
            self.factor = 1.0
            self.activation = torch.relu

        def forward(self, x):
            return self.activation(self.linear(x)) * self.factor

    model = Scaled()
    jitted = thunder.jit(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), model(x))
    model.factor = -4.0
    torch.testing.assert_close(jitted(x), model(x))
    model.activation = torch.tanh
    torch.testing.assert_close(jitted(x), model(x))
    model.linear = torch.nn.Linear(3, 3)  # a new submodule with new parameters
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == 4


def test_a_changed_python_argument_retraces_and_old_values_hit_again() -> None:
    def fn(x, n, mode="add"):
        return x + n if mode == "add" else x * n

    jitted = thunder.jit(fn)
    x = torch.ones(2)
    for n, mode in [(1, "add"), (2, "add"), (2, "mul"), (1, "add"), (2.0, "add")]:
        torch.testing.assert_close(jitted(x, n, mode=mode), fn(x, n, mode=mode))
    # (1, "add") ran twice; 2 and 2.0 are different types, so they are different entries
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (4, 1)


def test_no_caching_traces_every_call() -> None:
    jitted = thunder.jit(lambda x: x + 1, cache="no caching")
    for _ in range(3):
        jitted(torch.ones(2))
    assert thunder.cache_option(jitted) == "no caching"
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (3, 0)


def test_cache_options_are_validated() -> None:
    assert thunder.cache_option(thunder.jit(lambda x: x, cache="symbolic values")) == "symbolic values"
    with pytest.raises(ValueError, match="cache='sometimes' is invalid: choose one of 'constant values'"):
        thunder.jit(lambda x: x, cache="sometimes")


# --- the inspection API ---------------------------------------------------------------------------------


def test_compile_data_and_compile_stats() -> None:
    def fn(x):
        return x.sin() * 2

    jitted = thunder.jit(fn, executors=["torch"], transforms=[lambda trace: trace])
    data = thunder.compile_data(jitted)
    assert data.fn is fn and [e.name for e in data.executors][0] == "torch"
    jitted(torch.randn(3))
    stats = thunder.compile_stats(jitted)
    assert {"frontend", "user transform 0", "dce", "executors", "lifetimes"} <= set(stats.last_stage_seconds)
    assert all(seconds >= 0 for seconds in stats.last_stage_seconds.values())
    with pytest.raises(TypeError, match="not a function or module compiled by thunder"):
        thunder.compile_data(fn)


def test_last_traces_and_last_prologue_traces_follow_the_entry_that_ran() -> None:
    jitted = thunder.jit(lambda x: x.cos(), dynamic=False)  # a static entry per shape (no symbolic size)
    small, large = torch.randn(2), torch.randn(7)
    jitted(small)
    jitted(large)
    assert "[7]" in str(thunder.last_traces(jitted)[-1])
    jitted(small)  # a hit on the first entry
    traces = thunder.last_traces(jitted)
    assert "[2]" in str(traces[-1]) and "[7]" not in str(traces[-1])
    assert traces[0].header == "Constructed by the interpreter"
    assert "(2,)" in str(thunder.last_prologue_traces(jitted)[-1])


def test_cache_hits_and_misses_count_calls() -> None:
    jitted = thunder.jit(lambda x: x * 3)
    assert (thunder.cache_hits(jitted), thunder.cache_misses(jitted)) == (0, 0)
    jitted(torch.ones(2))
    jitted(torch.ones(2))
    jitted(torch.ones(3))
    assert (thunder.cache_hits(jitted), thunder.cache_misses(jitted)) == (1, 2)
    assert thunder.cache_option(jitted) == "constant values"


def test_list_transforms_returns_them_in_order() -> None:
    def first(trace):
        return trace

    def second(trace):
        return trace

    jitted = thunder.jit(lambda x: x, transforms=[first, second])
    assert thunder.list_transforms(jitted) == [first, second]
    assert thunder.list_transforms(thunder.jit(lambda x: x)) == []


def test_last_interpreted_instructions_and_interpreter_log() -> None:
    def fn(x):
        y = torch.exp(x)
        return y + len([1, 2])

    jitted = thunder.jit(fn)
    jitted(torch.ones(2))
    instructions = thunder.last_interpreted_instructions(jitted)
    mine = [
        record
        for record in instructions
        if record[0] == "test_last_interpreted_instructions_and_interpreter_log.<locals>.fn"
    ]
    assert mine and all(len(record) == 5 for record in instructions)
    assert mine[-1][3] in ("RETURN_VALUE", "RETURN_CONST") and mine[0][2] >= fn.__code__.co_firstlineno
    log = thunder.last_interpreter_log(jitted)
    events = [record for record in log if type(record) is not tuple]
    assert any(e.kind == "lookaside" and "exp" in e.detail for e in events)
    assert any(e.kind == "opaque call" and "len" in e.detail for e in events)
    assert [record for record in log if type(record) is tuple] == instructions
    jitted(torch.ones(2))  # a cache hit interprets nothing and keeps the log of the last miss
    assert thunder.last_interpreted_instructions(jitted) == instructions


def test_last_compile_options_prints_each_option(capsys: pytest.CaptureFixture) -> None:
    jitted = thunder.jit(lambda x: x, fallback=False)
    thunder.last_compile_options(jitted)
    assert "fallback=False: not used" in capsys.readouterr().out  # nothing compiled yet
    jitted(torch.ones(2))
    thunder.last_compile_options(jitted)
    assert "fallback=False: used" in capsys.readouterr().out


def test_compile_is_the_older_name_of_jit() -> None:
    jitted = thunder.compile(lambda x: x * 2)
    torch.testing.assert_close(jitted(torch.ones(2)), torch.full((2,), 2.0))
    assert thunder.cache_misses(jitted) == 1
    model = torch.nn.Linear(2, 2)
    assert isinstance(thunder.compile(model), thunder.ThunderModule)


def test_functional_jit_compiles_functions_only() -> None:
    import thunder.functional

    jitted = thunder.functional.jit(lambda x, y: x - y)
    torch.testing.assert_close(jitted(torch.ones(2), torch.ones(2)), torch.zeros(2))
    assert thunder.cache_misses(jitted) == 1
    with pytest.raises(TypeError, match="thunder.jit for modules"):
        thunder.functional.jit(torch.nn.Linear(2, 2))


def test_thunder_module_state_queries() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    jitted = thunder.jit(model)
    assert jitted.get_parameter("0.bias") is model[0].bias
    assert jitted.get_buffer("1.running_mean") is model[1].running_mean
    assert jitted.get_submodule("1") is model[1]
    assert [n for n, _ in jitted.named_buffers()] == [n for n, _ in model.named_buffers()]
    assert [n for n, _ in jitted.named_parameters(prefix="m")] == [
        "m.0.weight",
        "m.0.bias",
        "m.1.weight",
        "m.1.bias",
    ]
    state = jitted.state_dict()
    assert state.keys() == model.state_dict().keys()
    state["0.bias"] = torch.full((3,), 7.0)
    jitted.load_state_dict(state)
    assert model[0].bias.tolist() == [7.0, 7.0, 7.0]


# --- errors name the construct and the user's line ----------------------------------------------------


def test_unsupported_construct_names_it_and_the_users_line() -> None:
    async def coroutine(x):
        return x

    def fn(x):
        return coroutine(x)

    from thunder.interpreter.vm import InterpreterError

    with pytest.raises(InterpreterError, match=r"async functions.*test_jit.py:\d+"):
        thunder.jit(fn)(torch.ones(2))


def test_data_dependent_control_flow_names_the_users_line() -> None:
    def fn(x):
        if x.sum() > 0:  # needs the data
            return x
        return -x

    with pytest.raises(NotImplementedError, match=r"data-dependent.*test_jit.py:\d+: if x.sum\(\) > 0"):
        thunder.jit(fn)(torch.ones(2))


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale


def test_the_prologue_reads_module_state_from_the_module_tables() -> None:
    """``m._parameters['weight']`` instead of ``m.weight``: no nn.Module.__getattr__ call per fetch."""
    model, x = _Scaled(), torch.randn(2, 4)
    jitted = thunder.jit(model)
    torch.testing.assert_close(jitted(x), model(x))
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert "._modules" in prologue and "._parameters" in prologue and "._buffers" in prologue, prologue
    assert ".fc.weight" not in prologue


def test_module_state_replaced_or_removed_between_calls_is_seen() -> None:
    model, x = _Scaled(), torch.randn(2, 4)
    jitted = thunder.jit(model)
    jitted(x)
    model.fc.weight = torch.nn.Parameter(torch.randn(3, 4))  # a new parameter, same metadata
    model.scale = torch.tensor(5.0)  # a new buffer
    torch.testing.assert_close(jitted(x), model(x))
    del model.fc.bias  # now an ordinary attribute: the table no longer holds it, the call retraces
    model.fc.bias = torch.zeros(3)
    torch.testing.assert_close(jitted(x), model(x))


class _Shadowed(torch.nn.Module):
    """A property on the class wins over the parameter of the same name, as in Python."""

    def __init__(self) -> None:
        super().__init__()
        self._parameters["weight"] = torch.nn.Parameter(torch.ones(3))  # the property blocks registering

    @property
    def weight(self) -> torch.Tensor:  # type: ignore[override]
        return self._parameters["weight"] * 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def test_a_property_shadowing_a_parameter_is_read_as_the_property() -> None:
    model, x = _Shadowed(), torch.randn(3)
    jitted = thunder.jit(model)
    torch.testing.assert_close(jitted(x), model(x))


def test_an_unsupported_python_is_refused_naming_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import thunder.interpreter.version as version

    monkeypatch.setattr(version, "sys", types.SimpleNamespace(version_info=(3, 14, 0, "final", 0)))
    with pytest.raises(version.UnsupportedPythonError, match=r"3\.14\.0.*3\.10, 3\.11, 3\.12, 3\.13"):
        thunder.jit(lambda x: x + 1)(torch.ones(2))


def test_a_jitted_function_called_from_torch_compiled_code_runs_as_itself() -> None:
    """torch.compile around a thunder function (transformers' generate() does this to a forward that
    thunder compiled): Dynamo leaves thunder's call to run natively, through thunder's cache."""
    jitted = thunder.jit(lambda x: x * 2)

    @torch.compile(backend="eager")
    def outer(x: torch.Tensor) -> torch.Tensor:
        return jitted(x + 1) - 1

    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(outer(x), (x + 1) * 2 - 1)
    assert thunder.cache_misses(jitted) == 1 and thunder.cache_hits(jitted) == 1
