"""Reproducer scripts: written per piece, standalone, and passing when run in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from thunder.dynamo import CompilerType, ThunderCompiler, reproducer_script
from thunder.dynamo.repro import TensorSpec, describe_inputs


def run_script(path: Path, *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=300, cwd=path.parent
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def foo(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.sin(x)
    return a + torch.sinc(a) + torch.cos(y)


def test_save_reproducer_to_folder_writes_runnable_scripts(
    needs_executor: None, without_symbol: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    without_symbol(torch.sinc)
    monkeypatch.setattr("torch._inductor.compile_fx.compile_fx", lambda gm, *args, **kwargs: gm.forward)
    backend = ThunderCompiler()
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    torch.compile(foo, backend=backend)(x, y)
    paths = backend.save_reproducer_to_folder(tmp_path / "repros")
    assert [p.name for p in paths] == ["graph0_thunder_0.py", "graph0_inductor_1.py", "graph0_thunder_2.py"]
    assert "default='inductor'" in paths[1].read_text()
    output = run_script(paths[2])
    assert output.startswith(
        "OK: thunder matches eager on piece thunder_2 of graph0 (1 outputs, 3 gradients)"
    )


def test_recorded_inputs_describe_the_first_call(needs_executor: None) -> None:
    backend = ThunderCompiler()
    ids = torch.tensor([[1, 5], [3, 2]])
    weight = torch.randn(8, 3, requires_grad=True).t()
    torch.compile(lambda i, w: w.sum() * i, backend=backend)(ids, weight)
    (inputs,) = backend.subgraph_infos[0].recorded_inputs.values()
    by_dtype = {spec.dtype: spec for spec in inputs}
    assert by_dtype[torch.int64] == TensorSpec((2, 2), (2, 1), torch.int64, "cpu", False, 1, 5)
    assert by_dtype[torch.float32].stride == (1, 3) and by_dtype[torch.float32].requires_grad


class WithParameter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 3))

    def forward(self, index: torch.Tensor, scale: int) -> torch.Tensor:
        return self.table[index].exp() * scale


def test_reproducer_script_of_a_piece_with_parameters(needs_executor: None, tmp_path: Path) -> None:
    piece = torch.fx.symbolic_trace(WithParameter())
    inputs = describe_inputs((torch.tensor([0, 9, 4]), 3))
    text = reproducer_script(
        piece, inputs, title="a piece with a parameter", filename="p.py", compiler=CompilerType.THUNDER
    )
    path = tmp_path / "p.py"
    path.write_text(text)
    assert "make_tensor((3,), (1,), torch.int64, 'cpu', requires_grad=False, low=0, high=9)" in text
    assert run_script(path).startswith(
        "OK: thunder matches eager on a piece with a parameter (1 outputs, 0 gradients)"
    )
