"""Fusion regions never form a cycle, however fusible and unfusible work interleave.

A region runs all its members at once, so a region entered through a late member and left through
an early one can close a cycle that no pair of symbols shows (HF Llama's bf16 training step on the
GPU: "fusion regions form a cycle"). The fusion executor here claims elementwise prims; matmuls
stay outside regions and connect them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from helpers import PythonFusionExecutor
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder


def _regions(jitted: Callable) -> list[str]:
    return [b.symbol.name for b in thunder.last_traces(jitted)[-1].bound_symbols if "Fusion" in b.symbol.name]


def late_member_reads_a_path_out_of_an_early_one(x, c, w, w2):
    a = x.exp()  # region A
    b = torch.sin(a @ w)  # region B: A -> matmul -> B
    r = c.exp()  # independent: joins B, the latest region
    s = (r @ w2) * a  # reads B (through a matmul) and A: in A, B -> A -> B would be a cycle
    return b, s


def test_a_join_that_would_close_a_cycle_through_an_earlier_member_opens_a_region() -> None:
    fuser = PythonFusionExecutor()
    jitted = thunder.jit(late_member_reads_a_path_out_of_an_early_one, executors=[fuser])
    args = [torch.randn(4, 4) for _ in range(4)]
    torch.testing.assert_close(jitted(*args), late_member_reads_a_path_out_of_an_early_one(*args))
    assert len(_regions(jitted)) == 3  # A, B (with the independent exp), and the product on its own


# A random program: each step applies one op to earlier values (inputs included), picked by position.
_UNARY = {"sin": torch.sin}
_BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "matmul": torch.matmul}

_steps = st.lists(
    st.tuples(st.sampled_from(sorted({*_UNARY, *_BINARY})), st.integers(0, 63), st.integers(0, 63)),
    min_size=8,
    max_size=30,
)


def _program(steps: list[tuple[str, int, int]]) -> Callable:
    def program(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values = list(inputs)
        for name, first, second in steps:
            a, b = values[first % len(values)], values[second % len(values)]
            if name in _UNARY:
                values.append(_UNARY[name](a))
            elif name == "matmul":
                values.append(torch.matmul(a, b) * 0.25)  # keeps values small
            else:
                values.append(_BINARY[name](a, b))
        return tuple(values[len(inputs) :])

    return program


@settings(max_examples=200, deadline=None, derandomize=True)
@given(steps=_steps, inputs=st.integers(1, 4))
def test_random_programs_of_fusible_and_unfusible_ops_give_eager_results(
    steps: list[tuple[str, int, int]], inputs: int
) -> None:
    program = _program(steps)
    args = [torch.randn(4, 4) for _ in range(inputs)]
    jitted = thunder.jit(program, executors=[PythonFusionExecutor()])
    torch.testing.assert_close(jitted(*args), program(*args))
