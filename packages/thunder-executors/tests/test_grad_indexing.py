"""Gradient rules of the indexing, scan, sort and special-function prims, against eager autograd.

Each case calls a torch-language symbol whose decomposition reaches the prim under test; thunder's
autograd uses the prim's rule there. Inputs are float64; the cotangent is random; cases avoid ties
and duplicate indices where eager's gradient would depend on an implementation's choice.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder.executors.torchex as tx
import thunder.torch as ltorch
from thunder.core import pipeline
from thunder.core.direct_frontend import direct_frontend
from thunder.core.pytree import tree_flatten


def _rand(*shape: int, low: float = -2.0, high: float = 2.0) -> torch.Tensor:
    return (torch.rand(*shape, dtype=torch.float64) * (high - low) + low).requires_grad_()


def _positive(*shape: int) -> torch.Tensor:
    return _rand(*shape, low=0.5, high=3.0)


def _unit(*shape: int) -> torch.Tensor:
    return _rand(*shape, low=-0.9, high=0.9)


def _index(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape)


def _permutation_rows(rows: int, cols: int, high: int) -> torch.Tensor:
    """Each column a set of distinct indices below ``high`` (no duplicates, for scatter)."""
    return torch.stack([torch.randperm(high)[:rows] for _ in range(cols)], 1)


def _with_zeros() -> torch.Tensor:
    x = torch.rand(3, 6, dtype=torch.float64) + 0.5
    x[0, 2] = 0.0
    x[1, 1] = x[1, 4] = 0.0  # a second zero in the row gets no gradient
    return x.requires_grad_()


CASES: dict[str, tuple[Any, Callable[[], tuple]]] = {
    "gather": (torch.gather, lambda: (_rand(4, 5), 1, _index(5, 3, 3))),
    "take_along_dim": (torch.take_along_dim, lambda: (_rand(4, 5), _index(5, 4, 2), 1)),
    "scatter_add": (torch.scatter_add, lambda: (_rand(4, 5), 0, _index(4, 2, 5), _rand(2, 5))),
    "scatter": (torch.scatter, lambda: (_rand(6, 5), 0, _permutation_rows(3, 5, 6), _rand(3, 5))),
    "scatter_value": (torch.scatter, lambda: (_rand(6, 5), 0, _permutation_rows(3, 5, 6), 2.5)),
    "scatter_reduce_sum": (
        torch.scatter_reduce,
        lambda: (_rand(4, 5), 1, _index(5, 4, 3), _rand(4, 3), "sum"),
    ),
    "index_select": (torch.index_select, lambda: (_rand(4, 5), 1, _index(5, 7))),
    "index_add": (torch.index_add, lambda: (_rand(4, 5), 0, _index(4, 6), _rand(6, 5))),
    "index_copy": (torch.index_copy, lambda: (_rand(6, 5), 0, torch.randperm(6)[:3], _rand(3, 5))),
    "index_fill": (torch.index_fill, lambda: (_rand(4, 5), 1, torch.tensor([0, 3]), -1.0)),
    "getitem_tensor": (operator.getitem, lambda: (_rand(5, 4), _index(5, 3))),
    "getitem_mixed": (operator.getitem, lambda: (_rand(5, 4, 3), (_index(5, 2), slice(None), _index(3, 2)))),
    "getitem_list": (operator.getitem, lambda: (_rand(5, 4), (slice(1, None), [0, 2, 2]))),
    "index_put_accumulate": (torch.index_put, lambda: (_rand(5, 4), (_index(5, 6),), _rand(6, 4), True)),
    "index_put": (torch.index_put, lambda: (_rand(5, 4), (torch.randperm(5)[:3],), _rand(3, 4))),
    "index_put_broadcast": (torch.index_put, lambda: (_rand(5, 4), (torch.randperm(5)[:3],), _rand(4))),
    "masked_scatter": (torch.masked_scatter, lambda: (_rand(4, 5), torch.rand(4, 5) > 0.5, _rand(20))),
    "take": (torch.take, lambda: (_rand(4, 5), _index(20, 3, 2) - 10)),
    "put_accumulate": (torch.put, lambda: (_rand(4, 5), _index(20, 6), _rand(6), True)),
    "slice_scatter": (torch.slice_scatter, lambda: (_rand(6, 5), _rand(6, 2), 1, 1, 5, 2)),
    "select_scatter": (torch.select_scatter, lambda: (_rand(6, 5), _rand(5), 0, -2)),
    "diagonal_scatter": (torch.diagonal_scatter, lambda: (_rand(4, 5), _rand(4), 1)),
    "cumsum": (torch.cumsum, lambda: (_rand(3, 6), 1)),
    "cumprod": (torch.cumprod, lambda: (_rand(3, 6), 1)),
    "cumprod_zeros": (torch.cumprod, lambda: (_with_zeros(), 1)),
    "cummax": (torch.cummax, lambda: (_rand(3, 6), 1)),
    "sort": (torch.sort, lambda: (_rand(3, 6), 1, True)),
    "argsort_values": (torch.msort, lambda: (_rand(5, 3),)),
    "topk": (torch.topk, lambda: (_rand(3, 6), 2, 1)),
    "kthvalue": (torch.kthvalue, lambda: (_rand(3, 6), 2, 1)),
    "median": (torch.median, lambda: (_rand(3, 5), 1)),
    "flip": (torch.flip, lambda: (_rand(3, 4), (0, 1))),
    "roll": (torch.roll, lambda: (_rand(3, 4), 2, 1)),
    "unfold": (torch.Tensor.unfold, lambda: (_rand(3, 7), 1, 3, 2)),
    "diag_embed": (torch.diag_embed, lambda: (_rand(2, 3), -1)),
    "tril": (torch.tril, lambda: (_rand(4, 4), -1)),
    "narrow_tensor_start": (torch.narrow, lambda: (_rand(5, 4), 0, torch.tensor(1), 3)),
    "lgamma": (torch.lgamma, lambda: (_positive(8),)),
    "digamma": (torch.digamma, lambda: (_positive(8),)),
    "polygamma": (torch.polygamma, lambda: (2, _positive(8))),
    "erfinv": (torch.erfinv, lambda: (_unit(8),)),
    "i0": (torch.i0, lambda: (_rand(8),)),
    "i0e": (torch.special.i0e, lambda: (_rand(8),)),
    "i1": (torch.special.i1, lambda: (_rand(8),)),
    "i1e": (torch.special.i1e, lambda: (_rand(8),)),
    "ndtri": (torch.special.ndtri, lambda: (_rand(8, low=0.05, high=0.95),)),
    "log_ndtr": (torch.special.log_ndtr, lambda: (_rand(8),)),
    "erfcx": (torch.special.erfcx, lambda: (_rand(8),)),
    "acosh": (torch.acosh, lambda: (_rand(8, low=1.5, high=3.0),)),
    "asinh": (torch.asinh, lambda: (_rand(8),)),
    "atanh": (torch.atanh, lambda: (_unit(8),)),
    "log10": (torch.log10, lambda: (_positive(8),)),
    "xlogy": (torch.xlogy, lambda: (_rand(8), _positive(8))),
    "hypot": (torch.hypot, lambda: (_rand(8), _rand(8))),
    "copysign": (torch.copysign, lambda: (_rand(8), _rand(8))),
    "fmax": (torch.fmax, lambda: (_rand(8), _rand(8))),
    "igamma": (torch.igamma, lambda: (_positive(8).detach(), _positive(8))),
    "zeta": (torch.special.zeta, lambda: (3.0, _positive(8))),
    "logaddexp": (torch.logaddexp, lambda: (_rand(8), _rand(8))),
    "logsumexp": (torch.logsumexp, lambda: (_rand(3, 4), 1)),
    "vector_norm": (torch.linalg.vector_norm, lambda: (_rand(3, 4), 3.0, 1)),
    "std_mean": (torch.std_mean, lambda: (_rand(3, 4), 1)),
    "vector_norm_at_zero": (
        torch.linalg.vector_norm,
        lambda: (torch.zeros(3, 4, dtype=torch.float64, requires_grad=True), 2, 1),
    ),  # fmt: skip
    "vector_norm_inf_ties": (
        torch.linalg.vector_norm,
        lambda: (torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64, requires_grad=True), float("inf")),
    ),  # fmt: skip
    "scatter_reduce_amax": (
        torch.scatter_reduce,
        lambda: (_rand(4, 5), 1, _index(5, 4, 3), _rand(4, 3), "amax"),
    ),
    "scatter_reduce_mean": (
        torch.scatter_reduce,
        lambda: (_rand(4, 5), 1, _index(5, 4, 3), _rand(4, 3), "mean"),
    ),
}


def _symbol(torch_fn: Any) -> Any:
    return ltorch.getitem if torch_fn is operator.getitem else ltorch.symbol_for(torch_fn)


def _vjp(fn: Callable, args: tuple) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    output = fn(*args)
    outputs = [o for o in tree_flatten(output)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    inputs = [x for x in tree_flatten(args)[0] if isinstance(x, torch.Tensor) and x.requires_grad]
    generator = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    return [o.detach() for o in outputs], [
        torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)
    ]


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_eager(name: str) -> None:
    torch_fn, make_args = CASES[name]
    symbol = _symbol(torch_fn)
    assert symbol is not None, f"no thunder symbol for {torch_fn}"
    torch.manual_seed(0)
    args = make_args()

    def fn(*xs: Any) -> Any:
        return symbol(*xs)

    jitted = pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])
    expected_out, expected_grads = _vjp(torch_fn, args)
    actual_out, actual_grads = _vjp(jitted, args)
    torch.testing.assert_close(actual_out, expected_out)
    torch.testing.assert_close(actual_grads, expected_grads)


def test_undifferentiable_special_function_says_so() -> None:
    jitted = pipeline.jit(lambda x: ltorch.bessel_j0(x), frontend=direct_frontend, executors=[tx.executor])
    with pytest.raises(NotImplementedError, match="bessel_j0"):
        jitted(_rand(4)).sum().backward()
