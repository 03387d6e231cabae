"""``out=`` over the memory of an operand.

thunder computes the result functionally and writes it into ``out`` afterwards; eager's kernels read
the operands while they write ``out``. ``torch.cat(tensors, out=o)``, the stacks, index_select, take,
take_along_dim, gather, outer and (but for the tensor they add to) addr, index_add, index_copy and
scatter_add check ATen's ``assert_no_overlap`` and raise a RuntimeError where ``out`` shares memory
with an operand; elementwise kernels raise it for a partial overlap. Reductions and matrix products
read what they already wrote (eager's ``torch.mm(x, x, out=x)`` gives zeros): thunder refuses those
with a NotImplementedError naming the construct, as it does any overlap for the other kernels, whose
way of reading is not known (``torch.linalg.cross``), and for ops it runs through its fallback to
PyTorch (``torch.linalg.matrix_power(x, 2, out=x)`` gives zeros in eager). thunder answered all of them before
(``_check_out_apart`` in thunder/torch/inplace.py). Each case runs one jitted function twice, with
new inputs, against eager.
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
    "index_copy_source_is_out": lambda x, v, w: torch.index_copy(x, 0, INDEX.flip(0), x, out=x),
    "scatter_add_source_views_out": lambda x, v, w: torch.scatter_add(x, 0, INDEX.view(1, 4), x[:1], out=x),
    # elementwise: a partial overlap
    "add_transposed": lambda x, v, w: torch.add(x, x.t(), out=x),
    "mul_transposed": lambda x, v, w: torch.mul(x.t(), 2, out=x),
    "add_broadcast_row": lambda x, v, w: torch.add(x, x[0], out=x),
    "where_transposed": lambda x, v, w: torch.where(x > 5, x, x.t(), out=x),
}

# eager answers with what it reads after writing part of out: thunder refuses
ORDER_DEPENDENT: dict[str, Callable[..., Any]] = {
    "mm": lambda x, v, w: torch.mm(x, x, out=x),
    "matmul": lambda x, v, w: torch.matmul(x, x, out=x),
    "addmm": lambda x, v, w: torch.addmm(x, x, x, out=x),
    "bmm": lambda x, v, w: torch.bmm(x.view(1, 4, 4), x.view(1, 4, 4), out=x.view(1, 4, 4)),
    "mv": lambda x, v, w: torch.mv(x, x[0], out=x[0]),
    "kron": lambda x, v, w: torch.kron(x[:2, :2], x[:2, :2], out=x),
    "sum_into_a_row": lambda x, v, w: torch.sum(x, 0, out=x[1]),
    "sum_over_a_unit_dim": lambda x, v, w: torch.sum(x.view(4, 4, 1), 2, out=x),
    "mean_into_a_column": lambda x, v, w: torch.mean(x, 1, True, out=x[:, :1]),
    "amax_into_a_row": lambda x, v, w: torch.amax(x, 0, out=x[3]),
    "stack_into_interleaved_rows": lambda x, v, w: torch.stack([x[0], x[1]], out=x.t()[2:]),
    # ops thunder runs through its fallback to PyTorch (no symbol of its own): any overlap is refused
    "matrix_power_into_its_input": lambda x, v, w: torch.linalg.matrix_power(x, 2, out=x),
    "cross_into_an_overlapping_view": lambda x, v, w: torch.linalg.cross(x[:, :3], x[:, 1:], out=x[:, :3]),
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
    "index_copy_input_is_out": lambda x, v, w: torch.index_copy(x, 0, INDEX.flip(0), torch.ones(4, 4), out=x),
    "scatter_add_input_is_out": lambda x, v, w: torch.scatter_add(
        x, 0, INDEX.view(1, 4), v.view(1, 4), out=x
    ),
    "add_same_view": lambda x, v, w: torch.add(x, x, out=x),
    "clamp_same_view": lambda x, v, w: torch.clamp(x, 3.0, out=x),
    "exp_of_a_row_into_it": lambda x, v, w: torch.exp(x[0] / 16, out=x[0]),
    "add_into_other_rows": lambda x, v, w: torch.add(x[:2], 1, out=x[2:]),
    "sin_into_another_row": lambda x, v, w: torch.sin(x[0], out=x[1]),
    "mm_into_other_memory": lambda x, v, w: torch.mm(x[:2, :2], x[:2, 2:], out=x[2:, :2]),
    "sum_into_a_new_tensor": lambda x, v, w: torch.sum(x, 0, out=torch.empty(4)),
    "mm_into_a_new_tensor": lambda x, v, w: torch.mm(x, x, out=torch.empty(4, 4)),
    "matrix_power_into_a_new_tensor": lambda x, v, w: torch.linalg.matrix_power(x, 2, out=torch.empty(4, 4)),
    "cross_into_other_columns": lambda x, v, w: torch.linalg.cross(
        x[:2, :3], x[2:, :3], out=torch.empty(2, 3)
    ),
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


@pytest.mark.parametrize("name", list(ORDER_DEPENDENT))
def test_out_read_while_written_is_refused_by_name(name: str) -> None:
    fn = ORDER_DEPENDENT[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        fn(*_inputs(call))  # eager answers
        x, v, w = _inputs(call)
        with pytest.raises(NotImplementedError, match=r"\(v, out=x\) where v is a view of x's memory"):
            jfn(x, v, w)
        torch.testing.assert_close((x, v, w), _inputs(call), rtol=0, atol=0)


@pytest.mark.parametrize("name", list(ANSWERED))
def test_out_apart_from_the_operands_matches_eager(name: str) -> None:
    fn = ANSWERED[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        ours, theirs = _inputs(call), _inputs(call)
        torch.testing.assert_close(jfn(*ours), fn(*theirs), rtol=0, atol=0)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
