"""First contact (issue 27): mistakes a new user makes are caught at once and explained.

Wrong arguments of ``thunder.jit``, jitting a jitted function or module, ``py.typed`` in every
distribution, the execution trace's first line, and Python side effects that run only while tracing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import io
import logging
import random
import re
import time
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

import thunder
from thunder.core.options import COMPILE_OPTIONS
from thunder.interpreter import TraceTimeSideEffectWarning


def _fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w).tanh().sum()


# --- arguments of thunder.jit are checked when it is called ---------------------------------------------


@pytest.mark.parametrize("not_callable", [42, "fn", None, [1, 2]])
def test_jit_of_something_not_callable_is_a_type_error_at_once(not_callable: object) -> None:
    with pytest.raises(TypeError, match=f"not {type(not_callable).__name__}"):
        thunder.jit(not_callable)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        thunder.compile(not_callable)  # type: ignore[arg-type]


def test_an_unknown_option_is_a_type_error_naming_it_and_the_valid_ones() -> None:
    with pytest.raises(TypeError, match="unknown option 'some_bogus_option'") as error:
        thunder.jit(_fn, some_bogus_option=3)
    for name in COMPILE_OPTIONS:
        assert name in str(error.value)
    with pytest.raises(TypeError, match="did you mean 'fallback'"):
        thunder.jit(_fn, falback=False)
    with pytest.raises(TypeError, match="unknown option"):
        thunder.compile(_fn, some_bogus_option=3)


def test_every_option_the_pipeline_reads_is_declared() -> None:
    """An option read anywhere (``options.get("x")``, ``used_options.add("x")``) must be in the table,
    or checking options would reject it."""
    root = Path(__file__).resolve().parents[2]
    read = re.compile(
        r"""(?:options\.get\(|used_options\.add\(|used_options\.update\(\{)\s*["']([a-z_]+)["']"""
    )
    found = {
        match.group(1)
        for source in root.glob("packages/*/src/thunder/**/*.py")
        for match in read.finditer(source.read_text(encoding="utf-8"))
    }
    assert {"fallback", "cuda_graphs", "save_traces", "progress_threshold"} <= found
    assert found <= set(COMPILE_OPTIONS), found - set(COMPILE_OPTIONS)
    for name, option in COMPILE_OPTIONS.items():
        assert option.name == name and option.doc


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("cache", "sometimes", "'constant values', 'symbolic values', 'no caching'"),
        ("cache_size", 0, "positive int"),
        ("fallback", "no", "True or False"),
        ("cuda_graphs", 1, "True or False"),
        ("progress_threshold", -1, "seconds >= 0"),
        ("save_traces", 3, "folder"),
        ("transforms", [3], "callables"),
    ],
)
def test_an_impossible_value_is_a_value_error_saying_what_is_expected(
    option: str, value: object, expected: str
) -> None:
    with pytest.raises(ValueError, match=f"{option}=") as error:
        thunder.jit(_fn, **{option: value})
    assert expected in str(error.value)


def test_an_unknown_executor_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="nvfuzer") as error:
        thunder.jit(_fn, executors=["nvfuzer"])
    assert "torch" in str(error.value)


def test_valid_options_are_accepted(tmp_path) -> None:
    jitted = thunder.jit(
        _fn, executors=["torch"], cache="no caching", cache_size=4, fallback=True, cuda_graphs=False,
        save_traces=tmp_path, progress_threshold=10,
    )  # fmt: skip
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    torch.testing.assert_close(jitted(x, w), _fn(x, w))


def test_thunder_compiler_checks_its_thunder_options_at_once() -> None:
    from thunder.dynamo import ThunderCompiler

    with pytest.raises(TypeError, match="ThunderCompiler\\(\\) got an unknown option 'bogus'"):
        ThunderCompiler(bogus=1)
    with pytest.raises(ValueError, match="cache="):
        ThunderCompiler(cache="sometimes")
    assert ThunderCompiler(cache="no caching", torch_inductor_options={}).thunder_options == {
        "cache": "no caching"
    }


# --- jitting what thunder.jit returned -------------------------------------------------------------------


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)


def _gradients_match_eager(compiled, eager, *inputs: torch.Tensor) -> None:
    expected = eager(*inputs)
    expected_grads = torch.autograd.grad(expected, inputs)
    actual = compiled(*inputs)
    actual_grads = torch.autograd.grad(actual, inputs)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grads, expected_grads)


def test_jit_of_a_jitted_function_without_new_options_is_the_same_object() -> None:
    jitted = thunder.jit(_fn, fallback=False)
    again = thunder.jit(jitted)
    assert again is jitted
    assert thunder.jit(jitted, fallback=False) is jitted  # the options it has already
    _gradients_match_eager(again, _fn, *_inputs())
    assert thunder.cache_misses(jitted) == 1


def test_jit_of_a_jitted_function_with_new_options_compiles_the_original() -> None:
    jitted = thunder.jit(_fn, fallback=False)
    again = thunder.jit(jitted, cache="no caching")
    assert again is not jitted
    data = thunder.compile_data(again)
    assert data.fn is _fn  # the original, not the jitted function
    assert data.cache_option == "no caching" and data.options == {"fallback": False}  # old ones kept
    _gradients_match_eager(again, _fn, *_inputs())
    _gradients_match_eager(again, _fn, *_inputs())
    assert thunder.cache_misses(again) == 2 and thunder.cache_misses(jitted) == 0


def test_jit_of_a_thunder_module_forward_and_backward() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    jitted = thunder.jit(model)
    assert thunder.jit(jitted) is jitted
    again = thunder.jit(jitted, cache="symbolic values")
    assert isinstance(again, thunder.ThunderModule) and again is not jitted
    assert thunder.compile_data(again).fn is model
    assert again.get_parameter("0.weight") is model[0].weight  # parameters shared, not copied
    x = torch.randn(5, 4)
    for compiled in (thunder.jit(thunder.jit(model)), again):
        expected = model(x).sum()
        expected_grads = torch.autograd.grad(expected, list(model.parameters()))
        actual = compiled(x).sum()
        actual_grads = torch.autograd.grad(actual, list(model.parameters()))
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(actual_grads, expected_grads)


def test_compile_of_a_jitted_function_keeps_the_jitted_one_unpaired() -> None:
    jitted = thunder.jit(_fn)
    compiled = thunder.compile(jitted)
    assert compiled is not jitted
    assert (
        thunder.compile_data(compiled).pair_last_traces and not thunder.compile_data(jitted).pair_last_traces
    )
    assert thunder.compile(compiled) is compiled
    _gradients_match_eager(compiled, _fn, *_inputs())


def test_a_jitted_function_called_inside_a_jitted_function_is_traced_from_its_original() -> None:
    inner = thunder.jit(_fn)
    outer = lambda x, w: inner(x, w) * 3
    _gradients_match_eager(thunder.jit(outer), lambda x, w: _fn(x, w) * 3, *_inputs())
    assert thunder.cache_misses(inner) == 0  # traced through, never called compiled with proxies


def test_a_thunder_module_inside_a_jitted_module_forward_and_backward() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    model = torch.nn.Sequential(thunder.jit(layer), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    x = torch.randn(5, 4)
    expected = torch.nn.Sequential(layer, model[1], model[2])(x).sum()
    expected_grads = torch.autograd.grad(expected, list(model.parameters()))
    actual = thunder.jit(model)(x).sum()
    actual_grads = torch.autograd.grad(actual, list(model.parameters()))
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grads, expected_grads)


# --- py.typed: type checkers see thunder's annotations -----------------------------------------------------

# Each distribution ships a marker in every package it owns (PEP 561: namespace packages carry it in each
# portion's subpackage, never in the shared ``thunder/`` which only the meta package owns).
TYPED_PACKAGES = {
    ".": ["thunder/py.typed"],
    "packages/thunder-core": [
        "thunder/core/py.typed",
        "thunder/torch/py.typed",
        "thunder/distributed/py.typed",
    ],
    "packages/thunder-interpreter": ["thunder/interpreter/py.typed"],
    "packages/thunder-executors": ["thunder/executors/py.typed"],
    "packages/thunder-dynamo": ["thunder/dynamo/py.typed"],
}
DISTRIBUTIONS = {
    ".": "thunder",
    "packages/thunder-core": "thunder-core",
    "packages/thunder-interpreter": "thunder-interpreter",
    "packages/thunder-executors": "thunder-executors",
    "packages/thunder-dynamo": "thunder-dynamo",
}


@pytest.mark.parametrize("project", sorted(TYPED_PACKAGES))
def test_every_wheel_ships_py_typed(project: str, tmp_path: Path) -> None:
    wheel_builder = pytest.importorskip("hatchling.builders.wheel", reason="hatchling builds the wheels")
    root = Path(__file__).resolve().parents[2] / project
    (wheel,) = wheel_builder.WheelBuilder(str(root)).build(directory=str(tmp_path), versions=["standard"])
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert set(TYPED_PACKAGES[project]) <= names, set(TYPED_PACKAGES[project]) - names


@pytest.mark.parametrize("project", sorted(TYPED_PACKAGES))
def test_installed_distributions_have_py_typed(project: str) -> None:
    """Installed regularly, the marker is in the distribution's file list; installed editable (the file
    list holds only a .pth), it is beside the sources the distribution points to."""
    files = importlib.metadata.files(DISTRIBUTIONS[project]) or []
    listed = {str(path).replace("\\", "/") for path in files}
    for marker in TYPED_PACKAGES[project]:
        if marker in listed:
            continue
        package = marker.rpartition("/")[0].replace("/", ".")
        folders = importlib.import_module(package).__path__
        assert any((Path(folder) / "py.typed").is_file() for folder in folders), (marker, listed)


# --- the execution trace prints as the program that runs -------------------------------------------------


def test_execution_traces_start_with_the_program_not_a_pass_name() -> None:
    jitted = thunder.jit(_fn)
    x, w = _inputs()
    jitted(x, w).backward()
    inference = thunder.jit(_fn)
    inference(x.detach(), w.detach())
    executed = [thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]]
    executed.append(thunder.last_traces(inference)[-1])
    for trace in executed:
        source = str(trace)
        first_line = source.splitlines()[0]
        assert first_line.startswith(("import ", "from ")), source  # no "# Delete last used" above it
        compile(source, "<execution trace>", "exec")  # still a Python program
    for trace in thunder.last_traces(jitted)[:-1]:  # the passes before it still say which pass made them
        assert str(trace).startswith(f"# {trace.header.splitlines()[0]}")


# --- Python side effects that run only while tracing --------------------------------------------------------


def _line_of(fn, text: str) -> int:
    """The line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    (index,) = [i for i, line in enumerate(lines) if text in line]
    return first + index


def _printing(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    print("y is", y)
    return y + 1


def test_print_while_tracing_warns_once_naming_the_line(capsys: pytest.CaptureFixture) -> None:
    jitted = thunder.jit(_printing)
    with pytest.warns(TraceTimeSideEffectWarning) as record:
        result = jitted(torch.ones(2, 3))
    torch.testing.assert_close(result, torch.full((2, 3), 3.0))
    (warning,) = [w for w in record if issubclass(w.category, TraceTimeSideEffectWarning)]
    line = _line_of(_printing, 'print("y is", y)')
    assert (warning.filename, warning.lineno) == (__file__, line)  # shown as the user's line warning
    message = str(warning.message)
    assert f"{__file__}:{line}" in message and "print()" in message and "does not repeat it" in message
    printed = capsys.readouterr().out
    # not a misleading value: what the tensor is, since its values do not exist while tracing
    assert "TensorProxy" not in printed and "shape=(2, 3), dtype=torch.float32" in printed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # later calls: no warning, and nothing printed
        jitted(torch.ones(2, 3))
    assert capsys.readouterr().out == ""


_user_logger = logging.getLogger("thunder_test_first_contact")


def _logging(x: torch.Tensor) -> torch.Tensor:
    _user_logger.debug("debug %s", x)
    _user_logger.info("value %s", x)
    return x.sin()


def test_logging_while_tracing_warns_only_for_lines_that_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_user_logger.name)
    with pytest.warns(TraceTimeSideEffectWarning) as record:
        thunder.jit(_logging)(torch.ones(3))
    warned = [w for w in record if issubclass(w.category, TraceTimeSideEffectWarning)]
    assert [w.lineno for w in warned] == [_line_of(_logging, '_user_logger.info("value')]  # debug is off
    assert "logger.info()" in str(warned[0].message)
    assert [r.getMessage() for r in caplog.records] == [
        "value TracedTensor(shape=(3,), dtype=torch.float32, device='cpu')"
    ]


def _clock_and_dice(x: torch.Tensor) -> torch.Tensor:
    start = time.perf_counter()
    noise = random.random()
    return x + noise + 0 * start


def test_clocks_and_random_numbers_while_tracing_warn_that_their_value_is_frozen() -> None:
    jitted = thunder.jit(_clock_and_dice)
    with pytest.warns(TraceTimeSideEffectWarning) as record:
        first = jitted(torch.zeros(1))
    messages = {
        w.lineno: str(w.message) for w in record if issubclass(w.category, TraceTimeSideEffectWarning)
    }
    clock, dice = (
        _line_of(_clock_and_dice, "time.perf_counter()"),
        _line_of(_clock_and_dice, "random.random()"),
    )
    assert set(messages) == {clock, dice}
    assert "time.perf_counter()" in messages[clock] and "random.random()" in messages[dice]
    kept = re.search(r"returned ([-0-9.e]+) while tracing", messages[dice])
    assert kept is not None and float(kept.group(1)) == pytest.approx(
        first.item(), rel=1e-6
    )  # the value kept
    torch.testing.assert_close(jitted(torch.zeros(1)), first)  # the frozen value, as the warning said


def _printing_into_its_own_buffer(x: torch.Tensor) -> tuple[torch.Tensor, str]:
    buffer = io.StringIO()
    print("shape", tuple(x.shape), file=buffer)
    return x + 1, buffer.getvalue()


def test_print_into_a_buffer_the_program_made_is_not_a_side_effect() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceTimeSideEffectWarning)
        result, text = thunder.jit(_printing_into_its_own_buffer)(torch.zeros(2))
    assert text == "shape (2,)\n"
