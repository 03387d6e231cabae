"""``out=`` over the memory of an operand, for the ops whose eager kernel refuses it.

``torch.cat(tensors, out=o)``, the stacks, index_select, take, take_along_dim, gather, outer and
(except for the tensor they add to) addr and index_add check ATen's ``assert_no_overlap`` between
``out`` and each operand, and raise a RuntimeError where they share memory. thunder computes the
result functionally and writes it into ``out`` afterwards, so it had an answer where eager has none;
it refuses as eager does now (``_check_out_apart`` in thunder/torch/inplace.py). Each case runs one
jitted function twice, with new inputs, against eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

INDEX = torch.tensor([0, 1, 2, 3])

# name: f(x, v, w) with x of shape (4, 4), v and w of shape (4,)
REFUSED: dict[str, Callable[..., Any]] = {
    "cat_out_is_an_operand": lambda x, v, w: torch.cat([x[:0], x], 0, out=x),
    "cat_of_two_out_is_the_first": lambda x, v, w: torch.cat([x, x[:0]], out=x),
    "cat_1d_empty_and_out": lambda x, v, w: torch.cat([torch.empty(0), x], 0, out=x),
    "cat_empty_view_is_out": lambda x, v, w: (lambda e: torch.cat([e], out=e))(x[:0]),
    "cat_out_is_a_view_of_an_operand": lambda x, v, w: torch.cat([x[:2], v.view(1, 4)], out=x[1:4]),
    "concat": lambda x, v, w: torch.concat([x[:0], x], out=x),
    "concatenate": lambda x, v, w: torch.concatenate([x[:0], x], out=x),
    "stack_out_views_an_operand": lambda x, v, w: torch.stack([x[0]], out=x[:1]),
    "hstack": lambda x, v, w: torch.hstack([x[:, :0], x], out=x),
    "vstack": lambda x, v, w: torch.vstack([x[:0], x], out=x),
    "index_select": lambda x, v, w: torch.index_select(x, 0, INDEX, out=x),
    "index_select_rows_overlap": lambda x, v, w: torch.index_select(x, 0, INDEX[:2], out=x[1:3]),
    "take": lambda x, v, w: torch.take(x, INDEX, out=x[0]),
    "take_along_dim": lambda x, v, w: torch.take_along_dim(x, INDEX.view(1, 4).expand(4, 4), 0, out=x),
    "gather": lambda x, v, w: torch.gather(x, 0, INDEX.view(1, 4).expand(4, 4), out=x),
    "outer": lambda x, v, w: torch.outer(x[0], w, out=x),
    "ger": lambda x, v, w: torch.ger(v, x[1], out=x),
    "addr_vector_is_out": lambda x, v, w: torch.addr(x, x[0], w, out=x),
    "index_add_source_is_out": lambda x, v, w: torch.index_add(torch.zeros(4, 4), 0, INDEX, x, out=x),
    "index_add_source_keyword": lambda x, v, w: torch.index_add(torch.zeros(4, 4), 0, INDEX, source=x, out=x),
}

# out= apart from the operands, or the one operand eager lets it be: eager's answer
ANSWERED: dict[str, Callable[..., Any]] = {
    "cat_into_a_new_tensor": lambda x, v, w: torch.cat([v, w], out=torch.empty(8)),
    "cat_into_x": lambda x, v, w: torch.cat([v, w, v, w], out=x.view(16)),
    "cat_of_rows_into_other_rows": lambda x, v, w: torch.cat([x[:2]], out=x[2:]),
    "cat_1d_empty_is_out": lambda x, v, w: (lambda e: torch.cat([e], out=e))(torch.empty(0)),
    "stack_of_rows_into_other_rows": lambda x, v, w: torch.stack([x[0], x[1]], out=x[2:]),
    "index_select_into_other_rows": lambda x, v, w: torch.index_select(x[:2], 0, INDEX[:1], out=x[3:]),
    "take_into_v": lambda x, v, w: torch.take(x, INDEX, out=v),
    "outer_into_x": lambda x, v, w: torch.outer(v, w, out=x),
    "addr_input_is_out": lambda x, v, w: torch.addr(x, v, w, out=x),
    "addr_input_keyword_is_out": lambda x, v, w: torch.addr(input=x, vec1=v, vec2=w, out=x),
    "index_add_input_is_out": lambda x, v, w: torch.index_add(x, 0, INDEX, torch.ones(4, 4), out=x),
}


def _inputs(call: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.arange(16.0).view(4, 4) + call, torch.arange(4.0) + 20 + call, torch.arange(4.0) + 40 + call


@pytest.mark.parametrize("name", list(REFUSED))
def test_out_overlapping_an_operand_is_refused_as_in_eager(name: str) -> None:
    fn = REFUSED[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            fn(*_inputs(call))
        x, v, w = _inputs(call)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            jfn(x, v, w)
        torch.testing.assert_close((x, v, w), _inputs(call), rtol=0, atol=0)  # nothing written


@pytest.mark.parametrize("name", list(ANSWERED))
def test_out_apart_from_the_operands_matches_eager(name: str) -> None:
    fn = ANSWERED[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        ours, theirs = _inputs(call), _inputs(call)
        torch.testing.assert_close(jfn(*ours), fn(*theirs), rtol=0, atol=0)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
