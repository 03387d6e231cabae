"""Diagnostics of a compile (core/diagnostics): trace files, progress lines, pictures, error hints."""

from __future__ import annotations

import ast
import logging
import re

import pytest
import torch
from helpers import PythonFusionExecutor, make_prims_executor

import thunder.torch as ltorch
from thunder.core import pipeline
from thunder.core.diagnostics import PROGRESS_LOGGER, trace_to_dot, trace_to_html
from thunder.core.diagnostics.hints import user_location
from thunder.core.diagnostics.trace_files import SAVE_TRACES_VARIABLE
from thunder.core.direct_frontend import direct_frontend


def _jit(fn, executors, **options):
    jitted = pipeline.jit(fn, frontend=direct_frontend, **options)
    jitted._compile_data.executors = list(executors)
    return jitted


def _fn(a, b):
    return ltorch.sum(ltorch.exp(ltorch.add(a, b)) * 2, 1)


def test_save_traces_writes_one_numbered_python_file_per_trace(tmp_path) -> None:
    jitted = _jit(_fn, [make_prims_executor()], save_traces=str(tmp_path))
    jitted(torch.randn(3, 4), torch.randn(4))
    jitted(torch.randn(3, 4), torch.randn(4))  # a cache hit writes nothing
    jitted(torch.randn(5, 4), torch.randn(4))  # a second compile, a second folder
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders == ["fn-1", "fn-2"]
    files = sorted((tmp_path / "fn-1").iterdir())
    stats = pipeline.compile_stats(jitted)
    assert len(files) == len(stats.last_prologue_traces) + len(stats.last_traces)
    assert files[0].name.startswith("00_prologue") and files[1].name.startswith("01_computation")
    assert [f.name[:2] for f in files] == [f"{i:02d}" for i in range(len(files))]
    for path in files:
        ast.parse(path.read_text(), filename=str(path))  # valid Python
    assert (tmp_path / "fn-2" / files[-1].name).read_text() == str(stats.last_traces[-1])
    assert "save_traces" in pipeline.compile_data(jitted).used_options


def test_save_traces_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(SAVE_TRACES_VARIABLE, str(tmp_path / "env"))
    _jit(_fn, [make_prims_executor()])(torch.randn(3, 4), torch.randn(4))
    assert len(list((tmp_path / "env" / "fn-1").glob("*.py"))) >= 3


def test_progress_line_when_over_the_threshold_only(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=PROGRESS_LOGGER.name)
    _jit(_fn, [make_prims_executor()], progress_threshold=0)(torch.randn(3, 4), torch.randn(4))
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER.name]
    assert len(lines) == 1 and re.match(r"thunder: _fn compiled in \d+\.\d+ s \(frontend .* s, dce", lines[0])
    caplog.clear()
    _jit(_fn, [make_prims_executor()], progress_threshold=60)(torch.randn(3, 4), torch.randn(4))
    assert not [r for r in caplog.records if r.name == PROGRESS_LOGGER.name]


def test_progress_watcher_reports_a_slow_stage(caplog, monkeypatch) -> None:
    import time

    def slow(a):
        time.sleep(0.35)
        return ltorch.exp(a)

    monkeypatch.setenv("THUNDER_PROGRESS_THRESHOLD", "0.1")
    caplog.set_level(logging.WARNING, logger=PROGRESS_LOGGER.name)
    _jit(slow, [make_prims_executor()])(torch.randn(2))
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER.name]
    assert any(line.startswith("thunder: still compiling slow after") for line in lines), lines
    assert lines[-1].startswith("thunder: slow compiled in")


def test_progress_threshold_must_be_a_number_of_seconds() -> None:
    with pytest.raises(ValueError, match="progress_threshold"):
        _jit(_fn, [make_prims_executor()], progress_threshold=-1)(torch.randn(3, 4), torch.randn(4))


def test_errors_name_the_user_line_and_what_to_try() -> None:
    def bad(a, b):
        return ltorch.matmul(a, b)  # the line the note must name

    with pytest.raises(RuntimeError) as info:  # eager's type for a shape mismatch
        _jit(bad, [make_prims_executor()])(torch.randn(3, 3), torch.randn(4, 5))
    line = bad.__code__.co_firstlineno + 1
    note = info.value.__notes__[-1]
    assert f"test_diagnostics.py:{line}" in note and "What to try:" in note
    assert user_location(info.value).endswith(f"test_diagnostics.py:{line}")


def _fused_trace():
    def fn(a, b):
        c = ltorch.sin(a) * b + 1.0
        return ltorch.exp(ltorch.sum(c, 0))

    jitted = _jit(fn, [PythonFusionExecutor(), make_prims_executor()])
    jitted(torch.randn(3, 4), torch.randn(3, 4))
    return pipeline.compile_stats(jitted).last_traces[-1]


def test_dot_has_every_operation_and_a_cluster_per_fusion() -> None:
    trace = _fused_trace()
    dot = trace_to_dot(trace)
    assert dot.startswith('digraph "computation" {') and dot.rstrip().endswith("}")
    assert "subgraph cluster_" in dot and "pyfuser" in dot
    for name in ("prims.sin", "prims.mul", "prims.add", "return"):
        assert name in dot
    for proxy in trace.args:
        assert f'"{proxy.name}' in dot
    assert dot.count("{") == dot.count("}")


def test_html_is_self_contained_and_shows_the_trace() -> None:
    trace = _fused_trace()
    page = trace_to_html(trace)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</html>" in page
    assert "<script" not in page and "src=" not in page and "href=" not in page  # loads nothing
    assert "Fusion regions" in page and "prims.sin" in page
    fusion = next(b for b in trace.bound_symbols if b.subsymbols)
    assert fusion.symbol.name in page
