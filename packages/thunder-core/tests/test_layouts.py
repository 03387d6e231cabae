"""The layout rules of ``core/layouts.py`` that answer without a meta kernel, against the meta kernels."""

from __future__ import annotations

import itertools

import pytest
import torch

import thunder
from thunder.core import layouts


def _permuted(shape: tuple, order: tuple) -> torch.Tensor:
    """A meta tensor of ``shape`` laid out in memory in ``order`` (outermost dim first)."""
    return torch.empty([shape[d] for d in order], device="meta").permute(
        *[order.index(d) for d in range(len(shape))]
    )


_ORDERS = list(itertools.permutations(range(4)))


@pytest.mark.parametrize("order", _ORDERS)
def test_an_elementwise_op_keeps_its_operands_common_dense_layout(order: tuple) -> None:
    x = _permuted((2, 3, 4, 5), order)
    assert layouts._dense(x)
    expected = torch.add(x, x * 2)
    assert expected.stride() == x.stride()  # the rule, as the meta kernel gives it


@pytest.mark.parametrize("order", _ORDERS)
def test_cat_and_attention_of_permuted_operands_are_contiguous_where_the_rule_says(order: tuple) -> None:
    x = _permuted((2, 3, 4, 5), order)
    if not layouts._channels_last_like(x):
        assert torch.cat([x, x], -1).is_contiguous()
    q = _permuted((2, 3, 4, 8), order)
    assert torch.nn.functional.scaled_dot_product_attention(q, q, q).is_contiguous()


def test_sliced_and_strided_tensors_are_not_dense() -> None:
    x = torch.empty(4, 6, device="meta")
    assert not layouts._dense(x[:, :3]) and not layouts._dense(x[::2]) and layouts._dense(x.t())
    assert not layouts._dense(torch.empty(3, device="meta").expand(4, 3))


def test_attention_on_transposed_heads_views_as_eager() -> None:
    """GPT-2's attention: heads transposed in, the output transposed back and viewed; answered by the
    rule (no meta kernel), with eager's result."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        q = x.view(2, 5, 3, 4).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        return out.transpose(1, 2).reshape(2, 5, 12) + torch.cat([q, q], -1).sum()

    x = torch.randn(2, 5, 12)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(x))
