"""The fallback to PyTorch for torch operators without a thunder symbol, and thunder.examine."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core.fallback import UnsupportedTorchFunctionError


def _fallback_model(x, w):
    # ops without a thunder symbol (at the time of writing): linalg.pinv, matrix_exp
    values = torch.linalg.pinv(x * w)
    return torch.matrix_exp(values @ x).sum() + x.renorm(2, 0, 1.0).sum()


def test_fallback_runs_visibly_and_matches_eager() -> None:
    x, w = torch.randn(5, 3), torch.randn(5, 3)
    jitted = thunder.jit(_fallback_model)
    torch.testing.assert_close(jitted(x, w), _fallback_model(x, w))
    first, last = (str(t) for t in (thunder.last_traces(jitted)[0], thunder.last_traces(jitted)[-1]))
    for trace in (first, last):
        assert "fallback.torch__C__linalg_linalg_pinv(" in trace and "fallback.torch_matrix_exp(" in trace
    assert "(t" in first and "cpu f32[3, 5]" in first  # metadata from meta tensors
    assert thunder.cache_hits(jitted) == 0
    jitted(x, w)
    assert thunder.cache_hits(jitted) == 1


def test_fallback_gradient_comes_from_pytorch_autograd() -> None:
    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(5, 3, requires_grad=True)
    jitted = thunder.jit(_fallback_model)
    jitted(x, w).backward()
    expected_x, expected_w = (t.detach().clone().requires_grad_() for t in (x, w))
    _fallback_model(expected_x, expected_w).backward()
    torch.testing.assert_close(x.grad, expected_x.grad)
    torch.testing.assert_close(w.grad, expected_w.grad)
    backward = str(thunder.last_backward_traces(jitted)[-1])
    assert (
        "fallback.torch__C__linalg_linalg_pinv_vjp(" in backward
        and "fallback.torch_matrix_exp_vjp(" in backward
    )


def test_fallback_off_makes_a_missing_op_an_error() -> None:
    jitted = thunder.jit(_fallback_model, fallback=False)
    with pytest.raises(UnsupportedTorchFunctionError, match="linalg_pinv .*fallback=False"):
        jitted(torch.randn(3, 2), torch.randn(3, 2))


def test_data_dependent_ops_cannot_fall_back() -> None:
    def fn(x):
        return torch.nonzero(x) + 1

    with pytest.raises(UnsupportedTorchFunctionError, match="torch.nonzero .*depends on the data"):
        thunder.jit(fn)(torch.randn(4))


def test_inplace_torch_op_without_symbol_is_functionalized_through_the_fallback() -> None:
    def fn(x):
        x.renorm_(2, 0, 1.0)
        x.uniform_(0, 1)  # random fills read nothing
        return x.shape

    x = torch.randn(3, 4)
    thunder.jit(fn)(x)
    assert 0 <= x.min() and x.max() <= 1


def test_fallback_view_sees_later_mutations_of_its_base() -> None:
    def fn(x):
        y = x * 1
        windows = y.unfold(0, 2, 1)
        y.add_(1)
        return windows * 1

    x = torch.randn(5)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(x))


def test_examine_reports_native_fallback_and_unsupported(capsys: pytest.CaptureFixture) -> None:
    def fn(x):
        y = torch.matrix_exp(x) + x.sin()
        return y, torch.nonzero(x)

    report = thunder.examine(fn, torch.randn(4, 4))
    assert report.native["torch.Tensor.sin"] == 1
    assert report.fallback["torch.matrix_exp"] == 1
    assert "torch.nonzero" in report.unsupported and not report.compiled
    assert "torch.matrix_exp" in capsys.readouterr().out


def test_examine_compares_with_eager_without_touching_the_inputs() -> None:
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    before = module[1].running_mean.clone()
    x = torch.randn(6, 4)
    report = thunder.examine(module, x, show=False)
    assert report.compiled and report.matches_eager and not report.unsupported and not report.fallback
    torch.testing.assert_close(module[1].running_mean, before)
