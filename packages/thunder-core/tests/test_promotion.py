"""``thunder.core.promotion.result_dtype`` against ``torch.result_type``.

Every pair of thunder dtypes (float8 aside) is combined as tensors with dimensions, 0-d tensors and
Python numbers of each kind, in both orders.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from thunder.core import dtypes
from thunder.core.promotion import result_dtype
from thunder.core.proxies import TensorProxy
from thunder.core.trace import Trace, tracectx

DTYPES = [d for d in dtypes.all_dtypes if "float8" not in d.name]
SCALARS: list[Any] = [True, 2, 2.5, 1 + 2j]
SHAPES = {"dim": (2,), "0d": ()}


def _pair(
    a: tuple[dtypes.dtype, tuple[int, ...]] | Any, b: tuple[dtypes.dtype, tuple[int, ...]] | Any
) -> None:
    """Checks one combination; tensor operands are (dtype, shape), others are Python numbers."""
    tensors = [torch.zeros(x[1], dtype=x[0].torch_dtype) if isinstance(x, tuple) else x for x in (a, b)]
    expected = torch.result_type(*tensors)
    with tracectx(Trace()):
        proxies = [
            TensorProxy(shape=x[1], dtype=x[0], device="cpu") if isinstance(x, tuple) else x for x in (a, b)
        ]
        if expected is torch.complex32:
            _assert_complex32_unsupported(*proxies)
            return
        actual = result_dtype(*proxies)
    assert actual.torch_dtype == expected, f"result_dtype({a}, {b}) is {actual}, torch says {expected}"


def _assert_complex32_unsupported(*operands: Any) -> None:
    """thunder has no complex32 (chalf): promotions that reach it must say so, not answer otherwise."""
    with pytest.raises(NotImplementedError, match="complex32"):
        result_dtype(*operands)


@pytest.mark.parametrize("shape_a", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("shape_b", SHAPES.values(), ids=SHAPES.keys())
def test_tensor_tensor(shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
    for dtype_a, dtype_b in itertools.product(DTYPES, DTYPES):
        _pair((dtype_a, shape_a), (dtype_b, shape_b))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_tensor_scalar(shape: tuple[int, ...], scalar: Any) -> None:
    for dtype in DTYPES:
        _pair((dtype, shape), scalar)
        _pair(scalar, (dtype, shape))


def _torch_joint_result(*operands: Any) -> torch.dtype:
    """torch.result_type takes two operands; PyTorch's reference promotion takes any number."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    _, dtype = elementwise_dtypes(*operands, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return dtype


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_three_tiers(scalar: Any) -> None:
    """A dimensioned tensor, a 0-d tensor and a number together."""
    for dtype_a, dtype_b in itertools.product(DTYPES, DTYPES):
        with tracectx(Trace()):
            a = TensorProxy(shape=(2,), dtype=dtype_a, device="cpu")
            b = TensorProxy(shape=(), dtype=dtype_b, device="cpu")
            ta, tb = torch.zeros(2, dtype=dtype_a.torch_dtype), torch.zeros((), dtype=dtype_b.torch_dtype)
            expected = _torch_joint_result(ta, tb, scalar)
            if expected is torch.complex32:
                _assert_complex32_unsupported(a, b, scalar)
                continue
            actual = result_dtype(a, b, scalar)
        assert actual.torch_dtype == expected, f"{dtype_a}, 0-d {dtype_b}, {scalar!r}: {actual} vs {expected}"
