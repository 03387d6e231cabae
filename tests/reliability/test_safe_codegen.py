"""Safe code generation: names and strings from the user reach generated source only as safe identifiers
or as values (``repr`` of exact ``str``/``int``, or objects bound by name), never pasted as code.

Hostile names carry a payload that would create a marker file if it were executed; each test checks
the result against eager PyTorch and that the marker was never written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import thunder


def _hostile_names(marker: Path) -> list[str]:
    payload = f"open({str(marker)!r}, 'w')"  # no dot: torch refuses dots in module names
    return [
        "a; import os",
        f"x\n{payload}\n",
        f"x):\n  {payload}\ndef g(",
        f"'+{payload}+'",
        f'"; {payload}; "',
        "class", "import", "None", "lambda",  # keywords
        "ﬁ", "fi", "ｔorch", "é",  # unicode; "ﬁ" and "fi" are one identifier to Python (NFKC)
        "torch", "t0", "t1", "computation", "prologue", "prims", "ltorch", "args", "kwargs",  # trace internals
        "Tensor", "GuardFailure", "check_value", "_constant0", "_constant7", "sum", "prim_add",
        "int", "len", "isinstance", "_checked",  # names the prologue's inline checks use
        "0starts_with_digit", "", " ", "a-b", "a b",
    ]  # fmt: skip


class _Hostile(torch.nn.Module):
    """Parameters, buffers and submodules under hostile names, read through getattr as a user would."""

    def __init__(self, names: list[str]):
        super().__init__()
        self.names = [n for n in names if n]  # torch refuses the empty name
        self.layers = torch.nn.ModuleDict({n: torch.nn.Linear(3, 3) for n in self.names})
        for index, name in enumerate(self.names):
            target = torch.nn.Module()
            target.register_parameter(name, torch.nn.Parameter(torch.full((3,), float(index + 1))))
            setattr(self, f"holder{index}", target)
            if not hasattr(self, name):
                self.register_buffer(name, torch.full((3,), 0.5 * index))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        for index, name in enumerate(self.names):
            out = out * getattr(getattr(self, f"holder{index}"), name) / (index + 1)
            if name in self._buffers:
                out = out + getattr(self, name)
            if name in self.layers:
                out = self.layers[name](out).tanh()
        return out


def test_hostile_parameter_buffer_and_submodule_names(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    model = _Hostile(_hostile_names(marker))
    jmodel = thunder.jit(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jmodel(x), model(x))
    torch.testing.assert_close(jmodel(x), model(x))
    assert thunder.cache_hits(jmodel) == 1
    jmodel(x).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for actual_grad, parameter in zip(expected, model.parameters()):
        torch.testing.assert_close(actual_grad, parameter.grad)
    assert not marker.exists()


def test_parameter_and_buffer_names_with_dots(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Dotted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # torch refuses dots through register_*, but a module's dicts can hold them
            self._parameters["a.b"] = torch.nn.Parameter(torch.randn(3))
            self._buffers[f"c.open({str(marker)!r}, 'w')"] = torch.randn(3)
            self._modules["sub.module"] = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            buffer = getattr(self, f"c.open({str(marker)!r}, 'w')")
            return getattr(self, "sub.module")(x * getattr(self, "a.b") + buffer)

    model = Dotted()
    x = torch.randn(2, 3)
    jmodel = thunder.jit(model)
    torch.testing.assert_close(jmodel(x), model(x))
    torch.testing.assert_close(jmodel(x), model(x))
    assert thunder.cache_hits(jmodel) == 1 and not marker.exists()


def test_hostile_keyword_argument_names(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    def fn(x: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
        out = x
        for name, value in kwargs.items():
            out = out * value + len(name)
        return out

    kwargs = {name: torch.randn(3) for name in _hostile_names(marker)}
    jitted = thunder.jit(fn)
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x, **kwargs), fn(x, **kwargs))
    torch.testing.assert_close(jitted(x, **kwargs), fn(x, **kwargs))
    assert thunder.cache_hits(jitted) == 1
    del kwargs["a; import os"]  # another set of names: a new entry, still right
    torch.testing.assert_close(jitted(x, **kwargs), fn(x, **kwargs))
    assert not marker.exists()


def test_hostile_dict_keys_and_string_arguments(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    names = _hostile_names(marker)

    def fn(tensors: dict, label: str) -> torch.Tensor:
        out = torch.zeros(3)
        for key, value in tensors.items():
            out = out + value * (2 if key == label else 1) + len(key)
        return out * len(label)

    tensors = {name: torch.randn(3) for name in names}
    jitted = thunder.jit(fn)
    for label in names[:6]:
        torch.testing.assert_close(jitted(tensors, label), fn(tensors, label))
    assert thunder.cache_misses(jitted) == 6  # a string is checked by value: each label compiles once
    torch.testing.assert_close(jitted(tensors, names[0]), fn(tensors, names[0]))
    assert not marker.exists()


def test_hostile_strings_passed_to_torch_calls(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Sneaky(str):
        def __repr__(self) -> str:  # a str subclass's repr is user code: never pasted as source
            return f"open({str(marker)!r}, 'w')"

    def fn(x: torch.Tensor, reduction: str) -> torch.Tensor:
        return torch.nn.functional.mse_loss(x, torch.zeros_like(x), reduction=reduction)

    jitted = thunder.jit(fn)
    x = torch.randn(4)
    torch.testing.assert_close(jitted(x, Sneaky("sum")), fn(x, "sum"))
    with pytest.raises((ValueError, RuntimeError, NotImplementedError)):
        jitted(x, f"mean')\nopen({str(marker)!r}, 'w')\n('")
    assert not marker.exists()


def test_hostile_keyword_to_a_torch_function_is_passed_as_data(tmp_path: Path) -> None:
    """A keyword name that is not an identifier reaches the printed call as ``**{...}``, never as code."""
    from thunder.core.codegen import trace_to_python
    from thunder.core.proxies import TensorProxy
    from thunder.core.symbol import BoundSymbol, Symbol
    from thunder.core.trace import Trace, tracectx

    marker = tmp_path / "executed"
    trace = Trace()
    with tracectx(trace):
        x = TensorProxy("x", shape=(2,), dtype=torch.float32, device="cpu")
        trace.args.append(x)

    def record(value: torch.Tensor, **kwargs: object) -> torch.Tensor:
        return value + len(kwargs)

    symbol = Symbol(name="record", id="test.record", fn=record)
    hostile = f"k=1)\nopen({str(marker)!r}, 'w')\n("
    trace.bound_symbols.append(BoundSymbol(symbol, (x,), {hostile: 1, "ok": 2}, None))
    source = trace_to_python(trace)
    assert "**{" in source and "\nopen(" not in source
    trace.python_callable()(torch.ones(2))
    assert not marker.exists()
