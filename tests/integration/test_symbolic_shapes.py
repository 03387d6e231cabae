"""Symbolic tensor sizes (core/symbolic_shapes.py): one compile for every length of a changing dim.

Each test calls one jitted function many times with changing shapes and compares every result with
eager PyTorch, then checks the cache counters: a dim whose size changed is symbolic from the next
compile on, so later sizes hit that entry, unless the program decided something on the size (a
branch, a specialization), in which case the entry's guards send the call to a new compile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch

import thunder
from thunder.core.pipeline import compile_stats


def _calls(fn: Callable, inputs: Iterable[tuple], **options: Any) -> Callable:
    jitted = thunder.jit(fn, **options)
    for args in inputs:
        torch.testing.assert_close(jitted(*args), fn(*args))
    assert compile_stats(jitted).dynamic_fallbacks == []
    return jitted


def _computation(jitted: Callable) -> str:
    return str(thunder.last_traces(jitted)[-1])


def _prologue(jitted: Callable) -> str:
    return str(thunder.last_prologue_traces(jitted)[-1])


def test_elementwise_and_broadcast_compile_twice_for_any_length() -> None:
    def fn(x, y, bias):
        return (x * 2 + y).relu() + bias

    bias = torch.randn(3)
    jitted = _calls(fn, [(torch.randn(n, 3), torch.randn(n, 3), bias) for n in (2, 3, 4, 9, 17)])
    assert thunder.cache_misses(jitted) == 2  # static, then symbolic
    computation, prologue = _computation(jitted), _prologue(jitted)
    assert 'x: "cpu f32[s0, 3]"' in computation and "s0 = x.shape[0]" in prologue
    assert "if not (s0 >= 2): raise GuardFailure" in prologue  # 0 and 1 are never symbolic
    assert "if not (s1 == s0): raise GuardFailure" in prologue  # x + y equated the two lengths


def test_cat_reshape_view_and_matmul_with_a_symbolic_dim() -> None:
    def fn(x, cache, w):
        keys = torch.cat([cache, x], dim=1)  # [B, S + 1, D]
        heads = keys.view(keys.shape[0], keys.shape[1], 2, -1).transpose(1, 2)  # [B, 2, S + 1, D / 2]
        scores = heads @ heads.transpose(-1, -2)
        return scores.softmax(-1).reshape(keys.shape[0], -1) @ torch.ones(2 * keys.shape[1] ** 2, 3), keys @ w

    w = torch.randn(8, 5)
    inputs = [(torch.randn(2, 1, 8), torch.randn(2, s, 8), w) for s in (3, 4, 5, 6, 10)]
    jitted = _calls(fn, inputs)
    assert thunder.cache_misses(jitted) == 2
    assert "1 + s0" in _computation(jitted)


def test_slices_index_arange_and_reductions_over_a_symbolic_dim() -> None:
    def fn(x):
        n = x.shape[1]
        positions = torch.arange(n, 2 * n)
        return x[:, -1], x[:, 1:], x[:, : n - 1].sum(1), x.mean(1), x.amax(1), x * positions, x[:, n // 2]

    jitted = _calls(fn, [(torch.randn(3, n),) for n in (4, 5, 6, 7, 12)])
    assert thunder.cache_misses(jitted) == 2


def test_a_size_used_as_a_number() -> None:
    def fn(x):
        n = x.shape[0]
        return x * n + (n - 1) / 2, x.sum() / n

    jitted = _calls(fn, [(torch.randn(n),) for n in (2, 3, 4, 8)])
    assert thunder.cache_misses(jitted) == 2
    computation = _computation(jitted)
    assert "torch.mul(x, s0)" in computation


def test_a_branch_on_a_size_retraces_on_either_side_of_the_threshold() -> None:
    def fn(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    sizes = (2, 3, 5, 6, 3, 4, 8, 12, 2)
    jitted = _calls(fn, [(torch.randn(n, 3),) for n in sizes])
    # 2 static; 3 symbolic with s0 <= 4 (4 hits it); 5 symbolic with 4 < s0 (6, 8, 12 hit it); 2 hits static
    assert thunder.cache_misses(jitted) == 3
    prologues = [str(entry.prologue_traces[-1]) for entry in thunder.core.pipeline._jitted(jitted)._cache]
    assert any("if not (s0 <= 4): raise GuardFailure" in p for p in prologues)
    assert any("if not (4 < s0): raise GuardFailure" in p or "if not (s0 > 4)" in p for p in prologues)


def test_sizes_0_and_1_stay_specialized() -> None:
    def fn(x):
        return x.sum(0) + x.shape[0]

    jitted = _calls(fn, [(torch.randn(n, 2),) for n in (3, 4, 1, 0, 5, 1, 0, 7)])
    assert thunder.cache_misses(jitted) == 4  # 3 static, then symbolic, 1 and 0 static each


def test_a_size_that_decides_a_python_value_specializes_and_is_checked() -> None:
    def fn(x):
        return x.reshape(-1)[: int(x.shape[0]) * 2] + len(range(x.shape[0]))  # int() and range read the value

    jitted = _calls(fn, [(torch.randn(n, 3),) for n in (2, 3, 4, 5)])
    assert thunder.cache_misses(jitted) == 4  # every size specialized: one entry each, none stale


def test_symbolic_sizes_are_left_to_operator_executors() -> None:
    def fn(x):
        return x.exp() + 1

    jitted = _calls(fn, [(torch.randn(n),) for n in (2, 3, 4)])
    traces = thunder.last_traces(jitted)
    assert any("s0" in str(t) for t in traces)


def test_training_stays_static_and_matches_eager() -> None:
    def fn(x, w):
        return (x @ w).tanh().sum()

    jitted = thunder.jit(fn)
    for n in (2, 3, 4, 5):
        w = torch.randn(3, 2, requires_grad=True)
        x = torch.randn(n, 3)
        expected_w = w.detach().clone().requires_grad_()
        loss = jitted(x, w)
        loss.backward()
        fn(x, expected_w).backward()
        torch.testing.assert_close(w.grad, expected_w.grad)
    stats = compile_stats(jitted)
    assert thunder.cache_misses(jitted) == 4
    # traced once with symbols, then static at once: a training step is not traced twice per compile
    assert len(stats.dynamic_fallbacks) == 1 and "autograd" in stats.dynamic_fallbacks[0]


def test_dynamic_false_and_true() -> None:
    def fn(x):
        return x * 2

    inputs = [(torch.randn(n),) for n in (2, 3, 4)]
    assert thunder.cache_misses(_calls(fn, inputs, dynamic=False)) == 3
    assert thunder.cache_misses(_calls(fn, inputs, dynamic=True)) == 1


def test_no_grad_inference_of_a_module_with_changing_batch_and_length() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16)).eval()
    jitted = thunder.jit(model)
    with torch.no_grad():
        for batch, length in ((2, 3), (2, 5), (3, 5), (4, 7), (2, 9)):
            x = torch.randn(batch, length, 8)
            torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == 3  # static; length symbolic; batch and length symbolic


@pytest.mark.parametrize("size", [2, 3, 7])
def test_printed_traces_run_for_other_sizes(size: int) -> None:
    """The execution trace is a program over the size inputs: run with another size, it is right."""

    def fn(x):
        return torch.cat([x, x[:, :1]], 1).reshape(-1)

    jitted = _calls(fn, [(torch.randn(2, n),) for n in (4, 5)])
    computation = thunder.last_traces(jitted)[-1].python_callable()
    x = torch.randn(2, size)
    (result,) = computation(x, size) if isinstance(computation(x, size), tuple) else (computation(x, size),)
    torch.testing.assert_close(result, fn(x))


def test_a_size_turned_into_text_specializes() -> None:
    """``str`` of a SymInt prints its symbol, without a guard: code keyed on the text would be baked in."""
    table = {"3": 1.0, "4": 2.0, "5": 3.0}

    def fn(x):
        return x * table[str(x.shape[0])] + table[f"{x.shape[0]}"] + table[format(x.shape[0], "d")]

    jitted = _calls(fn, [(torch.randn(n),) for n in (3, 4, 5, 4, 3)])
    assert thunder.cache_misses(jitted) == 3  # one per size: each text is a guarded value


def test_cuda_graph_key_holds_the_sizes() -> None:
    """A graph captured for one length is never replayed for another: the sizes are number inputs of the
    computation, part of ``GraphedFunction``'s key by value (core/cuda_graphs.py)."""
    from thunder.core.cuda_graphs import _InputPlan

    def fn(x):
        return x * 2

    jitted = _calls(fn, [(torch.randn(n),) for n in (3, 4)])
    computation = thunder.last_traces(jitted)[-1]
    assert [a.name for a in computation.args] == ["x", "s0"]
    plan = _InputPlan((torch.randn(4), 4), frozenset())
    assert plan.key((torch.randn(4), 4)) != plan.key((torch.randn(5), 5))


def test_a_size_written_to_python_state_is_replayed_by_the_epilogue() -> None:
    """``self.seen = x.shape[0] + 1`` (Mistral's cache counts tokens this way): the epilogue writes the
    value the computation returns for it, computed from the size inputs."""

    class Counter:
        seen = 0

    counter = Counter()

    def fn(x, counter):
        counter.seen = x.shape[0] + 1
        return x * 2

    jitted = _calls(fn, [(torch.randn(n), counter) for n in (2, 3, 4)])
    for n in (5, 9):
        jitted(torch.randn(n), counter)
        assert counter.seen == n + 1
    assert thunder.cache_misses(jitted) == 2


def test_the_disk_cache_does_not_store_programs_with_symbolic_sizes(tmp_path, monkeypatch) -> None:
    """The prologue of a symbolic program checks guards the transforms and executors added to its sizes;
    a program loaded from disk would come without them, so such programs are not cached there."""
    monkeypatch.setenv("THUNDER_DISK_CACHE", "1")
    monkeypatch.setenv("THUNDER_CACHE_DIR", str(tmp_path))

    def fn(x):
        return x * 2

    jitted = _calls(fn, [(torch.randn(n),) for n in (3, 4, 5)], disk_cache=True)
    stats = compile_stats(jitted)
    assert thunder.cache_misses(jitted) == 2 and stats.disk_cache_skips == 1
    assert "symbolic sizes" in stats.disk_cache_skip_reason


def test_advanced_indexing_with_symbolic_sizes() -> None:
    """transformers' padding mask indexes ``mask[batch_idx, kv_idx]`` with index tensors of the cache's length."""

    def fn(x, rows, cols):
        return x[rows], x[:, cols], x[rows[:, None], cols], x[rows, :, None][..., 0]

    def inputs(n: int) -> tuple:
        x = torch.randn(n, n + 1)
        return x, torch.arange(n).flip(0), torch.arange(n + 1) % n

    jitted = _calls(fn, [inputs(n) for n in (3, 4, 5, 9)])
    assert thunder.cache_misses(jitted) == 2


def test_advanced_indexing_of_dims_apart() -> None:
    def fn(x, rows, cols):
        return x[rows, :, cols], x[:, rows, cols]  # indexed dims apart (result dims in front) and adjacent

    inputs = [(torch.randn(n, n, n), torch.arange(n), torch.arange(n).flip(0)) for n in (3, 4, 6)]
    jitted = _calls(fn, inputs)
    assert thunder.cache_misses(jitted) == 2


def test_fusion_executors_take_only_the_static_ops_of_a_program_with_symbolic_sizes() -> None:
    """A fusion definition is built for one shape: an op that reads a symbolic size runs on the
    operator executors, ops of static sizes beside it are offered to the fusion executor as usual, and
    the execution trace's header says so."""
    from thunder.core.executor import FusionExecutor

    class RecordingFusion(FusionExecutor):
        def __init__(self) -> None:
            super().__init__("recordingfuser")
            self.asked: list[str] = []

        def can_fuse(self, bound_symbol: Any) -> bool:
            self.asked.append(bound_symbol.symbol.name)
            return False  # never fuses: only what it was asked matters here

    fuser = RecordingFusion()

    def fn(x, y):
        return x.exp() + 1, y.tanh()  # x's length changes, y's does not

    jitted = thunder.jit(fn, executors=[fuser, "torch"])
    jitted(torch.randn(3), torch.randn(2))
    assert "exp" in fuser.asked and "tanh" in fuser.asked  # the static compile offered it everything
    fuser.asked.clear()
    for n in (4, 5):
        x, y = torch.randn(n), torch.randn(2)
        for actual, expected in zip(jitted(x, y), fn(x, y)):
            torch.testing.assert_close(actual, expected)
    assert thunder.cache_misses(jitted) == 2
    assert "tanh" in fuser.asked and "exp" not in fuser.asked
    execution = next(t for t in thunder.last_traces(jitted) if "Transform for execution" in str(t))
    assert "symbolic sizes: ops that read them not given to recordingfuser" in str(execution)


def test_a_fusion_executor_fuses_the_static_part_of_a_symbolic_program(monkeypatch: Any) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton's interpreter on the CPU

    def fn(x, cache):
        return torch.cat([cache, x[None]], 0).sum(0) + (x.exp() * 2 + 1).tanh()

    jitted = thunder.jit(fn, executors=["triton", "torch"])
    for length in (2, 3, 5, 7):
        x, cache = torch.randn(4), torch.randn(length, 4)
        torch.testing.assert_close(jitted(x, cache), fn(x, cache))
    assert thunder.cache_misses(jitted) == 2
    trace = str(thunder.last_traces(jitted)[-1])
    assert "s0" in trace and "TritonFusion" in trace and "torch.cat(" in trace
