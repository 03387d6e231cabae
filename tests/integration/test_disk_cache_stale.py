"""The on-disk cache never serves a stale program (core/disk_cache.py): an audit's differential tests.

Each test compiles a program into a fresh cache folder, then compiles a variant that differs only in
something the key might miss (a global's value, a default argument, a module attribute, the training
flag, the default dtype, a user module's source) with a new jitted function (its memory cache
empty: the disk is all it can hit), and compares the variant's result with eager PyTorch. None of
these found a stale hit: the frontend runs on every process and its computation trace, which bakes
in every value it read, is part of the key. They stay as regression tests of that design.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import thunder


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("THUNDER_CACHE_DIR", str(folder))
    monkeypatch.delenv("THUNDER_DISK_CACHE", raising=False)
    return folder


def _run(fn: Callable, args: tuple, context: Callable[[], Any] = contextlib.nullcontext) -> Any:
    jitted = thunder.jit(fn)
    with context():
        result, expected = jitted(*args), fn(*args)
    torch.testing.assert_close(result, expected)
    return thunder.compile_stats(jitted)


SCALE = 2.0


def _global_scale(x):
    return x * SCALE


def _with_default(value: float) -> Callable:
    def fn(x, c=value):
        return x * c

    return fn


def _with_keyword_default(value: float) -> Callable:
    def fn(x, *, c=value):
        return x * c

    return fn


class _Scaled(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


def _layer_norm(eps: float) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.LayerNorm(8, eps=eps)


def _batch_norm(training: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.BatchNorm1d(8).train(training)


_VARIANTS = {
    "default argument": (lambda: _with_default(2.0), lambda: _with_default(3.0)),
    "keyword default": (lambda: _with_keyword_default(2.0), lambda: _with_keyword_default(3.0)),
    "module float attribute": (lambda: _Scaled(2.0), lambda: _Scaled(3.0)),
    "layer norm eps": (lambda: _layer_norm(1e-5), lambda: _layer_norm(10.0)),
    "training flag": (lambda: _batch_norm(False), lambda: _batch_norm(True)),
}


@pytest.mark.parametrize("make_first, make_second", _VARIANTS.values(), ids=_VARIANTS.keys())
def test_a_variant_of_a_stored_program_compiles_its_own(make_first: Callable, make_second: Callable) -> None:
    x = torch.randn(4, 8)
    assert _run(make_first(), (x,)).disk_cache_writes == 1
    assert _run(make_second(), (x,)).disk_cache_hits == 0


def test_a_changed_global_compiles_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(4, 8)
    assert _run(_global_scale, (x,)).disk_cache_writes == 1
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    assert _run(_global_scale, (x,)).disk_cache_hits == 0


def _matmul(x):
    return x.sin() @ x.t() + torch.ones(4, 4)


def test_the_default_dtype_compiles_its_own() -> None:
    x = torch.randn(4, 8)
    assert _run(_matmul, (x,)).disk_cache_writes == 1
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert _run(_matmul, (x,)).disk_cache_hits == 0  # torch.ones is float64 now
    finally:
        torch.set_default_dtype(previous)
    assert _run(_matmul, (x,)).disk_cache_hits == 1  # the first program again


_PROGRAM = textwrap.dedent(
    """
    import sys
    import torch
    import thunder
    sys.path.insert(0, sys.argv[1])
    import helper

    x = torch.randn(4, 4)
    jitted = thunder.jit(helper.program)
    torch.testing.assert_close(jitted(x), helper.program(x))
    print(thunder.compile_stats(jitted).disk_cache_hits)
    """
)


@pytest.mark.slow
def test_a_changed_user_module_in_another_process_compiles_its_own(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(_PROGRAM)
    helper = tmp_path / "helper.py"

    def run(body: str) -> int:
        helper.write_text(f"import torch\n\ndef program(x):\n    return {body}\n")
        # no bytecode files: Python itself would load a stale one for an edit of the same size and second
        environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=environment
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout.strip().splitlines()[-1])

    assert run("x.sin() * 2.0") == 0
    assert run("x.sin() * 2.0") == 1
    assert run("x.sin() * 3.0") == 0
    assert run("x.cos() * 3.0") == 0
