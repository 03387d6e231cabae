"""Errors of thunder.jit as a user sees them: eager's types and messages, the user's frames in the
traceback, and data-dependent constructs named with the way to run them (issue 27)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import thunder
from thunder.core.proxies import DataDependentError


def _eager_error(fn: Callable, *args: object) -> BaseException:
    with pytest.raises(Exception) as info:  # noqa: PT011 -- whatever eager raises is the oracle
        fn(*args)
    return info.value


# ---------------------------------------------------------------------------------------------
# 1. eager's exception types and messages


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def test_shape_mismatch_raises_eagers_runtime_error_and_message() -> None:
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    expected = _eager_error(_matmul, a, b)
    with pytest.raises(RuntimeError) as info:  # `except RuntimeError` written for eager catches it
        thunder.jit(_matmul)(a, b)
    assert type(info.value) is type(expected)
    assert str(info.value) == str(expected)  # mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)


def test_dtype_names_in_messages_are_torchs() -> None:
    a, b = torch.randn(2, 3), torch.randn(3, 2, dtype=torch.float64)
    assert isinstance(_eager_error(_matmul, a, b), RuntimeError)
    with pytest.raises(RuntimeError) as info:
        thunder.jit(_matmul)(a, b)
    message = str(info.value)
    assert "torch.float32" in message and "torch.float64" in message, message
    assert "dtypes." not in message


def test_number_where_eager_needs_a_tensor_is_a_type_error() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + torch.clamp_min(2, 1)

    assert isinstance(_eager_error(fn, torch.ones(2)), TypeError)
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        thunder.jit(fn)(torch.ones(2))


def _closing_note(error: BaseException) -> str:
    return next(note for note in error.__notes__ if note.startswith("thunder: compiling"))


def test_the_programs_error_is_not_called_a_thunder_bug() -> None:
    with pytest.raises(RuntimeError) as info:
        thunder.jit(_matmul)(torch.randn(2, 3), torch.randn(4, 5))
    note = _closing_note(info.value)
    assert f"failed at {__file__}:{_matmul.__code__.co_firstlineno + 1} (your code)" in note, note
    assert "eager PyTorch raises the same error" in note and "thunder bug" not in note


def test_an_error_in_thunders_code_may_be_a_thunder_bug_and_is_not_the_users() -> None:
    # a transform compiled from a string, as generated code or an exec'd copy of a thunder module is
    namespace: dict = {}
    exec(
        compile("def transform(trace):\n    assert False, 'internal'\n", "copy_of_a_pass", "exec"), namespace
    )
    with pytest.raises(AssertionError) as info:
        thunder.jit(lambda x: x + 1, transforms=[namespace["transform"]])(torch.ones(2))
    note = _closing_note(info.value)
    assert note.startswith("thunder: compiling <lambda> failed. What to try:"), note
    assert "(your code)" not in note and "thunder bug worth reporting" in note


def test_an_error_in_the_users_transform_names_its_line() -> None:
    def transform(trace: thunder.Trace) -> thunder.Trace:
        raise RuntimeError("the user's transform failed")

    with pytest.raises(RuntimeError) as info:
        thunder.jit(lambda x: x + 1, transforms=[transform])(torch.ones(2))
    note = _closing_note(info.value)
    assert f"failed at {__file__}:{transform.__code__.co_firstlineno + 1} (your code)" in note, note
    assert "thunder bug worth reporting" in note  # not raised while tracing: may be thunder's fault


# ---------------------------------------------------------------------------------------------
# 2. tracebacks: the user's frames, not thunder's

_SCRIPT = """\
import torch, thunder

def inner(a, b):
    c = a + 1
    return c @ b

def outer(a, b):
    return inner(a, b) * 2

thunder.jit(outer)(torch.randn(2, 3), torch.randn(4, 5))
"""


def _run_script(tmp_path: Path, **environment: str) -> str:
    script = tmp_path / "user_script.py"
    script.write_text(_SCRIPT)
    env = {key: value for key, value in os.environ.items() if key != "THUNDER_FULL_TRACEBACK"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env={**env, **environment}, timeout=120
    )
    assert result.returncode == 1
    return result.stderr


def test_traceback_shows_the_users_frames_and_hides_thunders(tmp_path: Path) -> None:
    stderr = _run_script(tmp_path)
    script = str(tmp_path / "user_script.py")
    frames = [line.strip() for line in stderr.splitlines() if line.strip().startswith('File "')]
    users = [
        f'File "{script}", line 10, in <module>',
        f'File "{script}", line 8, in outer',
        f'File "{script}", line 5, in inner',
    ]
    if sys.version_info >= (3, 11):
        assert frames == users, stderr  # as eager's traceback: no frame of thunder's
    else:  # 3.10 re-raises with one entry of thunder's, the pipeline's `raise error`
        assert frames[:1] + frames[2:] == users and "pipeline.py" in frames[1], stderr
    assert "    return c @ b\n" in stderr and "    return inner(a, b) * 2\n" in stderr  # the source lines
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)" in stderr
    assert "thunder: in " not in stderr  # the interpreter's frame notes are frames now
    assert len(stderr.splitlines()) <= 12, stderr  # was 76 lines


def test_full_traceback_under_the_environment_variable(tmp_path: Path) -> None:
    stderr = _run_script(tmp_path, THUNDER_FULL_TRACEBACK="1")
    assert "thunder/interpreter/vm/" in stderr and "prims/core.py" in stderr
    assert len(stderr.splitlines()) > 40


def test_user_frames_in_traceback_objects() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b  # the failing line

    with pytest.raises(RuntimeError) as info:
        thunder.jit(fn)(torch.randn(2, 3), torch.randn(4, 5))
    summary = traceback.extract_tb(info.value.__traceback__)
    last = summary[-1]
    assert (last.filename, last.lineno, last.name) == (__file__, fn.__code__.co_firstlineno + 1, "fn")
    assert last.line == "return a @ b  # the failing line"
    assert not any("/thunder/interpreter/" in frame.filename for frame in summary)


# ---------------------------------------------------------------------------------------------
# 3. data-dependent control flow


def branch_on_data(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x + 1
    return x - 1


def call_item(x: torch.Tensor) -> torch.Tensor:
    return x * x.sum().item()


def call_numpy(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(x.numpy() * 2)


def numpy_function(x: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(np.sin(x))


DATA_DEPENDENT = {
    "if": (branch_on_data, "The truth value of a tensor (an `if` or `while` on a tensor"),
    "item": (call_item, "Tensor.item() depends on the tensor's data"),
    "numpy": (call_numpy, "Tensor.numpy() depends on the tensor's data"),
    "np.sin": (numpy_function, "numpy.sin() on a tensor depends on the tensor's data"),
}


@pytest.mark.parametrize("construct", list(DATA_DEPENDENT))
def test_data_dependent_message_names_construct_place_and_thunder_compiler(construct: str) -> None:
    fn, what = DATA_DEPENDENT[construct]
    with pytest.raises(DataDependentError) as info:
        thunder.jit(fn)(torch.randn(3))
    message = str(info.value)
    assert what in message, message
    line = next(
        fn.__code__.co_firstlineno + i
        for i, text in enumerate(textwrap.dedent(_source(fn)).splitlines())
        if ("x.sum() > 0" in text or "item()" in text or "numpy()" in text or "np.sin" in text)
    )
    assert f"{__file__}:{line}" in message, message
    assert "torch.compile(fn, backend=ThunderCompiler())" in message
    assert "from thunder.dynamo import ThunderCompiler" in message
    assert "FakeTensor" not in message and "thunder bug" not in message
    assert isinstance(info.value, NotImplementedError)  # what thunder cannot do, as before
    notes = "".join(getattr(info.value, "__notes__", ()))
    assert "thunder bug worth reporting" not in notes


def test_data_dependent_error_is_public() -> None:
    assert thunder.DataDependentError is DataDependentError and "DataDependentError" in thunder.__all__
    with pytest.raises(thunder.DataDependentError):
        thunder.jit(branch_on_data)(torch.randn(3))


def _source(fn: Callable) -> str:
    import inspect

    return inspect.getsource(fn)


@pytest.mark.parametrize("construct", list(DATA_DEPENDENT))
def test_thunder_compiler_runs_the_data_dependent_program(construct: str) -> None:
    from thunder.dynamo import ThunderCompiler

    fn, _ = DATA_DEPENDENT[construct]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=ThunderCompiler())
    for x in (torch.randn(3), -torch.rand(3) - 1, torch.rand(3) + 1):  # both branches of the `if`
        torch.testing.assert_close(compiled(x), fn(x))


# ---------------------------------------------------------------------------------------------
# 4. effects a compiled program would not reproduce are refused, never dropped

_WEIGHT = torch.randn(3, requires_grad=True)


def _autograd_backward(x: torch.Tensor) -> torch.Tensor:
    loss = (x * _WEIGHT).sum()
    torch.autograd.backward(loss)
    return loss


def _autograd_grad(x: torch.Tensor) -> torch.Tensor:
    return torch.autograd.grad((x * _WEIGHT).sum(), _WEIGHT)[0]


@pytest.mark.parametrize(
    ("fn", "construct"),
    [
        (_autograd_backward, "torch.autograd.backward()"),
        (_autograd_grad, "torch.autograd.grad()"),
    ],
)
def test_autograd_functions_inside_a_jitted_function_are_refused_with_the_way_out(
    fn: Callable, construct: str
) -> None:
    # they used to fall back to PyTorch inside the compiled forward, computing nothing
    # (loss.backward() records its gradients into the program: test_backward_inside_jit.py)
    _WEIGHT.grad = None
    with pytest.raises(NotImplementedError) as info:
        thunder.jit(fn)(torch.randn(3))
    message = str(info.value)
    assert construct in message and "loss.backward()" in message and "test_error_messages.py" in message
    assert "ThunderCompiler" in message
    assert _WEIGHT.grad is None


def test_thunder_compiler_runs_a_whole_training_step_like_eager() -> None:
    # the way out the message names: forward, loss.backward(), AdamW step and zero_grad, several steps
    from thunder.dynamo import ThunderCompiler

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)

    def make_step(net: torch.nn.Module) -> Callable:
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss.detach()

        return step

    compiled = torch.compile(make_step(model), backend=ThunderCompiler())
    eager = make_step(reference)
    for _ in range(3):
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        torch.testing.assert_close(compiled(x, y), eager(x, y))
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
        assert p.grad is None and q.grad is None


def test_a_torch_operator_called_for_its_effect_does_not_fall_back() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        torch._assert_async(x.sum() > 0)  # returns None: only its effect (a device-side check) matters
        return x * 2

    with pytest.raises(thunder.core.fallback.UnsupportedTorchFunctionError, match="returns nothing"):
        thunder.jit(fn)(torch.ones(3))
