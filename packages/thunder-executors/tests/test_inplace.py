"""Functionalization of in-place ops (thunder/core/inplace.py) with the direct frontend and torch executor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder.executors.torchex as tx
from thunder.core import pipeline
from thunder.core.direct_frontend import direct_frontend


def _jit(fn: Callable) -> Any:
    return pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])


def _check(fn: Callable, *args: torch.Tensor) -> str:
    eager_args, jit_args = [a.clone() for a in args], [a.clone() for a in args]
    jitted = _jit(fn)
    torch.testing.assert_close(jitted(*jit_args), fn(*eager_args))
    for jit_arg, eager_arg in zip(jit_args, eager_args):
        torch.testing.assert_close(jit_arg, eager_arg)
    return str(pipeline.compile_stats(jitted).last_traces[0])


def test_trace_is_functional_and_ends_with_the_epilogue() -> None:
    def fn(x, y):
        x.mul_(y)
        x += 1
        return x * 2

    trace = _check(fn, torch.randn(3), torch.randn(3))
    lines = [line.strip() for line in trace.splitlines() if not line.strip().startswith("#")]
    copies = [i for i, line in enumerate(lines) if line.startswith("inplace.copy_(")]
    assert copies == [len(lines) - 2]  # one write-back into the input, just before the return
    assert "mul_" not in trace and "add_" not in trace


def test_views_chain_through_transpose_slice_and_reshape() -> None:
    def fn(x):
        y = x + 0
        y.t()[::2, 1:].mul_(-1)
        y.reshape(-1)[3:5].fill_(9.0)
        y.unsqueeze(0)[0, 1].zero_()
        return y

    _check(fn, torch.randn(4, 6))


def test_expanded_views_are_refused_like_eager() -> None:
    def fn(x):
        x.expand(3, 4).add_(1)
        return x

    with pytest.raises(RuntimeError, match="more than one element"):
        _jit(fn)(torch.randn(1, 4))


def test_shape_changing_inplace_methods_are_refused() -> None:
    def fn(x):
        x.unsqueeze_(0)
        return x

    with pytest.raises(NotImplementedError, match="unsqueeze_"):
        _jit(fn)(torch.randn(3))


def test_broadcasting_into_a_smaller_tensor_is_refused_like_eager() -> None:
    def fn(x, y):
        x.add_(y)
        return x

    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        _jit(fn)(torch.randn(3), torch.randn(2, 3))
