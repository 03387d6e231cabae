"""BatchNorm with ``momentum=None`` (a cumulative moving average) trains as in eager.

Its forward reads ``1.0 / float(self.num_batches_tracked)``, which raised an unclear TypeError
(``float()`` of a proxy). ``float(t)`` of a tensor is now a number kept in the trace
(``thunder/torch/tensor_numbers.py``) that the running-statistics update takes as its momentum;
any use of it that needs the value raises the data-dependence error.
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core.proxies import DataDependentError


@pytest.mark.parametrize("cls, shape", [(torch.nn.BatchNorm1d, (8, 4)), (torch.nn.BatchNorm2d, (4, 4, 3, 3))])
def test_cumulative_average_over_several_calls(cls, shape) -> None:
    torch.manual_seed(0)
    module, eager = cls(4, momentum=None), cls(4, momentum=None)
    jitted = thunder.jit(module)
    for _ in range(4):
        x = torch.randn(*shape)
        torch.testing.assert_close(jitted(x), eager(x))
        torch.testing.assert_close(module.running_mean, eager.running_mean)
        torch.testing.assert_close(module.running_var, eager.running_var)
        assert module.num_batches_tracked.item() == eager.num_batches_tracked.item()
    assert thunder.cache_misses(jitted) == 1
    module.eval()
    eager.eval()
    x = torch.randn(*shape)
    torch.testing.assert_close(jitted(x), eager(x))


def test_cumulative_average_with_gradients() -> None:
    torch.manual_seed(0)
    module, eager = torch.nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    jitted = thunder.jit(module)
    for _ in range(2):
        x = torch.randn(5, 3)
        jitted(x).sum().backward()
        eager(x).sum().backward()
    torch.testing.assert_close(module.weight.grad, eager.weight.grad)
    torch.testing.assert_close(module.running_var, eager.running_var)


def test_a_number_read_from_a_tensor_used_as_a_value_is_refused() -> None:
    with pytest.raises(DataDependentError, match=r"float\(Tensor\)"):
        thunder.jit(lambda x: x * 2 if float(x.sum()) > 0 else x)(torch.ones(3))
    with pytest.raises(DataDependentError, match=r"float\(Tensor\)"):
        thunder.jit(lambda x: x * float(x.sum()))(torch.ones(3))


def test_int_of_a_tensor_raises_the_data_dependence_error() -> None:
    with pytest.raises(DataDependentError, match=r"int\(Tensor\)"):
        thunder.jit(lambda x: x * int(x.sum()))(torch.ones(3))
    assert thunder.jit(lambda x, n: x * int(n))(torch.ones(3), 2.0).tolist() == [2.0, 2.0, 2.0]
