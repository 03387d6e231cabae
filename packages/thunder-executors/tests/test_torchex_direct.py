"""Prims the torch executor runs as torch calls in the trace instead of through its adapters
(torchex._DIRECT, torchex._direct_binary), and the arguments that keep the adapter: each result
against the adapter's own (the prim's semantics), bit for bit, with the call the trace shows."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder
import thunder.executors.torchex as tx
from thunder.core import pipeline, prims
from thunder.core.direct_frontend import direct_frontend


def _run(fn: Callable, *args: object) -> tuple[torch.Tensor, str]:
    jitted = pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])
    return jitted(*args), str(thunder.last_traces(jitted)[-1])


_F32 = torch.randn(2, 3, 4)
_INT = torch.randint(-5, 5, (2, 3, 4), dtype=torch.int32)
_BF16 = torch.randn(2, 3, 4, dtype=torch.bfloat16)

# (name, prim call, its inputs, the adapter computing the same, the call the trace shows)
CASES = [
    ("add", lambda a, b: prims.add(a, b), (_F32, _F32 + 1), lambda a, b: tx.prim_add(a, b), "torch.add("),
    ("sub number first", lambda a: prims.sub(1.5, a), (_F32,), lambda a: tx.prim_sub(1.5, a), "torch.sub(1.5,"),
    ("mul number first int", lambda a: prims.mul(3, a), (_INT,), lambda a: tx.prim_mul(3, a), "torch.mul(3,"),
    ("sub number first bf16", lambda a: prims.sub(0.1, a), (_BF16,), lambda a: tx.prim_sub(0.1, a), "prim_sub("),
    ("pow number first", lambda a: prims.pow(2.0, a), (_F32,), lambda a: tx.prim_pow(2.0, a), "prim_pow("),
    ("sum float", lambda a: prims.sum(a, (0, 2)), (_F32,), lambda a: tx.sum(a, (0, 2)), "torch.sum("),
    ("sum int", lambda a: prims.sum(a, (0, 2)), (_INT,), lambda a: tx.sum(a, (0, 2)), "= sum("),
    ("sum no dims", lambda a: prims.sum(a, ()), (_F32,), lambda a: tx.sum(a, ()), "= sum("),
    ("amax", lambda a: prims.amax(a, (1,)), (_INT,), lambda a: tx.amax(a, (1,)), "torch.amax("),
    ("div float", lambda a: prims.div(a, 3.0), (_F32,), lambda a: tx.div(a, 3.0), "torch.true_divide("),
    ("div int", lambda a: prims.div(a, 2), (_INT,), lambda a: tx.div(a, 2), "= div("),
    (
        "broadcast leading dims", lambda a: prims.broadcast_in_dim(a, (5, 3, 4), (1, 2)), (_F32[0],),
        lambda a: tx.broadcast_in_dim(a, (5, 3, 4), (1, 2)), "torch.Tensor.expand(",
    ),
    (
        "broadcast inner dim", lambda a: prims.broadcast_in_dim(a, (3, 5, 4), (0, 2)), (_F32[0],),
        lambda a: tx.broadcast_in_dim(a, (3, 5, 4), (0, 2)), "torch.reshape(",
    ),
    (
        "broadcast reshape only", lambda a: prims.broadcast_in_dim(a, (3, 1, 4), (0, 2)), (_F32[0],),
        lambda a: tx.broadcast_in_dim(a, (3, 1, 4), (0, 2)), "torch.reshape(",
    ),
    (
        "slice one dim", lambda a: prims.slice_prim(a, (0, 0, 2), (2, 3, 4), (1, 1, 1)), (_F32,),
        lambda a: tx.slice_prim(a, (0, 0, 2), (2, 3, 4), (1, 1, 1)), "torch.narrow(",
    ),
    (
        "slice two dims", lambda a: prims.slice_prim(a, (0, 1, 2), (2, 3, 4), (1, 1, 1)), (_F32,),
        lambda a: tx.slice_prim(a, (0, 1, 2), (2, 3, 4), (1, 1, 1)), "slice_prim(",
    ),
    (
        "slice strided", lambda a: prims.slice_prim(a, (0, 0, 0), (2, 3, 4), (1, 1, 2)), (_F32,),
        lambda a: tx.slice_prim(a, (0, 0, 0), (2, 3, 4), (1, 1, 2)), "slice_prim(",
    ),
    (
        "pad", lambda a: prims.pad(a, 0.0, ((0, 0, 0), (1, 2, 0), (3, 0, 0))), (_F32,),
        lambda a: tx.pad(a, 0.0, ((0, 0, 0), (1, 2, 0), (3, 0, 0))), "torch.nn.functional.pad(",
    ),
    (
        "pad by nothing", lambda a: prims.pad(a, 0.0, ((0, 0, 0), (0, 0, 0), (0, 0, 0))), (_F32,),
        lambda a: tx.pad(a, 0.0, ((0, 0, 0), (0, 0, 0), (0, 0, 0))), "= pad(",
    ),
    (
        "pad interior", lambda a: prims.pad(a, 0.0, ((0, 0, 0), (0, 0, 1), (0, 0, 0))), (_F32,),
        lambda a: tx.pad(a, 0.0, ((0, 0, 0), (0, 0, 1), (0, 0, 0))), "= pad(",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_direct_call_computes_what_the_adapter_does(case) -> None:
    _, fn, inputs, adapter, shown = case
    actual, trace = _run(fn, *inputs)
    expected = adapter(*inputs)
    assert shown in trace, trace
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
