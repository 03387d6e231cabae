"""The layout rules of ``core/layouts.py`` that answer without a meta kernel, against eager."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

import thunder
from thunder.core import layouts


def _permuted(shape: tuple, order: tuple, device: str = "meta") -> torch.Tensor:
    """A tensor of ``shape`` laid out in memory in ``order`` (outermost dim first)."""
    outer = torch.empty([shape[d] for d in order], device=device)
    return outer.permute(*[order.index(d) for d in range(len(shape))])


def _random_operand(rng: random.Random, shape: list) -> torch.Tensor:
    """A CPU tensor broadcastable to ``shape``: some dims 1 or missing, dims in a random memory order,
    some sliced with a step or cut from a larger tensor."""
    own = [size if rng.random() < 0.8 else 1 for size in shape]
    own = own[rng.randint(0, len(own)) :] if rng.random() < 0.2 else own
    if not own:
        return torch.empty(())
    order = list(range(len(own)))
    rng.shuffle(order)
    larger = [own[d] * (rng.choice([1, 1, 2]) if own[d] > 1 else 1) for d in order]
    tensor = torch.empty(larger).permute(*[order.index(d) for d in range(len(own))])
    cut = tuple(
        slice(0, own[d]) if rng.random() < 0.5 else slice(None, None, max(1, tensor.shape[d] // own[d]))
        for d in range(len(own))
    )
    return tensor[cut]


def _inner_strides(tensor_or_strides, shape) -> list:  # size-1 dims' strides mean nothing
    strides = tensor_or_strides.stride() if isinstance(tensor_or_strides, torch.Tensor) else tensor_or_strides
    return [stride for stride, size in zip(strides, shape) if size != 1]


def test_elementwise_strides_are_eagers_on_random_layouts() -> None:
    rng = random.Random(0)
    compared = 0
    for _ in range(3000):
        shape = [rng.choice([1, 2, 3, 4, 5]) for _ in range(rng.randint(1, 4))]
        operands = [_random_operand(rng, shape) for _ in range(rng.randint(1, 3))]
        try:
            op = {1: torch.neg, 2: torch.add, 3: torch.addcmul}[len(operands)]
            result = op(*operands)
        except RuntimeError:
            continue  # shapes that do not broadcast
        rule = layouts.elementwise_strides(operands, tuple(result.shape))
        assert _inner_strides(rule, result.shape) == _inner_strides(result, result.shape), operands
        compared += 1
    assert compared > 1000


@pytest.mark.parametrize("op", [torch.neg, torch.sigmoid, torch.nn.functional.gelu, lambda x: x.pow(2)])
def test_a_rotary_half_of_transposed_heads_lays_out_as_eager(op) -> None:
    x = torch.randn(2, 6, 3, 8).transpose(
        1, 2
    )  # [batch, heads, tokens, dim] from [batch, tokens, heads, dim]
    half = x[..., 4:]
    cos = torch.randn(1, 1, 6, 4)
    for operands, result in (([half], op(half)), ([half, cos], half * cos), ([x, x], x + x)):
        rule = layouts.elementwise_strides(operands, tuple(result.shape))
        assert _inner_strides(rule, result.shape) == _inner_strides(result, result.shape)


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_cat_and_attention_of_permuted_operands_are_contiguous_where_the_rule_says(order: tuple) -> None:
    x = _permuted((2, 3, 4, 5), order)
    if not layouts._channels_last_like(x):
        assert torch.cat([x, x], -1).is_contiguous()
    q = _permuted((2, 3, 4, 8), order)
    assert torch.nn.functional.scaled_dot_product_attention(q, q, q).is_contiguous()


def test_attention_and_rotary_on_transposed_heads_view_as_eager() -> None:
    """GPT-2's attention and Llama's rotary: heads transposed in, the output transposed back and
    viewed; answered by the rules (no meta kernel), with eager's result."""

    def fn(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
        q = x.view(2, 5, 3, 4).transpose(1, 2)
        rotated = torch.cat((-q[..., 2:], q[..., :2]), dim=-1) * cos + q * cos
        out = torch.nn.functional.scaled_dot_product_attention(rotated, q, q, is_causal=True)
        return out.transpose(1, 2).reshape(2, 5, 12) + rotated.transpose(1, 2).reshape(2, 5, 12)

    x, cos = torch.randn(2, 5, 12), torch.randn(1, 1, 5, 4)
    torch.testing.assert_close(thunder.jit(fn)(x, cos), fn(x, cos))


def test_every_elementwise_op_is_laid_out_by_the_rule_or_left_to_its_meta_kernel() -> None:
    """Each torch function of an elementwise ``ltorch`` symbol, on a sliced and permuted input: eager's
    result strides are TensorIterator's (``elementwise_strides``), unless the symbol is listed as
    answered by its meta kernel instead."""
    from thunder.torch.registry import torch_callables

    x = torch.randn(3, 8, 5).transpose(0, 2)[1:, :, ::2]
    functions: dict[str, list] = {}
    for function, symbol in torch_callables().items():
        if "elementwise" in symbol.tags and symbol.module == "ltorch":
            functions.setdefault(symbol.name, []).append(function)
    checked, differ = 0, set()
    for name, candidates in functions.items():
        for function in candidates:
            for args in ((x,), (x, x), (x, 0.5), (x > 0, x, x), (x, x, x)):
                try:
                    result = function(*args)
                except Exception:  # noqa: BLE001 -- another signature
                    continue
                if isinstance(result, torch.Tensor):
                    tensors = [a for a in args if isinstance(a, torch.Tensor)]
                    rule = layouts.elementwise_strides(tensors, tuple(result.shape))
                    if _inner_strides(rule, result.shape) != _inner_strides(result, result.shape):
                        differ.add(name)
                    checked += 1
                break
    assert checked > 100
    assert differ <= layouts._NOT_TENSOR_ITERATOR, differ - layouts._NOT_TENSOR_ITERATOR
