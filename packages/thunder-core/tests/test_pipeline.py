"""The compile pipeline: claiming, decomposition, fusion regions, DCE, deletes, caching."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers import PythonFusionExecutor, make_prims_executor

import thunder.torch as ltorch
from thunder.core import pipeline
from thunder.core.direct_frontend import direct_frontend
from thunder.core.executor import OperatorExecutor, get_executor, register_executor, resolve_executors
from thunder.core.fusion_fallback import ExecutorFallbackWarning
from thunder.core.symbol import make_composite
from thunder.core.transforms.claim_executors import UnclaimedSymbolError


def _jit(fn, executors):
    jitted = pipeline.jit(fn, frontend=direct_frontend)
    jitted._compile_data.executors = list(executors)  # only these: core registers no default executor
    return jitted


def _fn(a, b):
    return ltorch.sum(ltorch.exp(ltorch.add(a, b)) * 2, 1)


def test_unclaimed_symbols_decompose_to_prims_and_match_eager() -> None:
    a, b = torch.randn(3, 4), torch.randn(4)
    jitted = _jit(_fn, [make_prims_executor()])
    torch.testing.assert_close(jitted(a, b), torch.sum(torch.exp(a + b) * 2, 1))
    execution = str(pipeline.compile_stats(jitted).last_traces[-1])
    assert "ltorch" not in execution and "torch.exp(" in execution


def test_cache_hits_misses_and_new_entries_for_new_shapes() -> None:
    jitted = _jit(_fn, [make_prims_executor()])
    stats = pipeline.compile_stats(jitted)
    jitted(torch.randn(3, 4), torch.randn(4))
    jitted(torch.randn(3, 4), torch.randn(4))
    assert (stats.cache_hits, stats.cache_misses) == (1, 1)
    jitted(torch.randn(5, 4), torch.randn(4))
    jitted(torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64))
    assert (stats.cache_hits, stats.cache_misses) == (1, 3)
    jitted(torch.randn(5, 4), torch.randn(4))
    assert stats.cache_hits == 2


def test_python_values_are_guarded() -> None:
    jitted = _jit(lambda a, n: ltorch.mul(a, n), [make_prims_executor()])
    a = torch.ones(2)
    assert jitted(a, 2).tolist() == [2.0, 2.0]
    assert jitted(a, 3).tolist() == [3.0, 3.0]  # a changed number is a new entry, never the stale one
    assert pipeline.compile_stats(jitted).cache_misses == 2


def test_a_symbol_nobody_can_run_is_an_error() -> None:
    with pytest.raises(UnclaimedSymbolError, match="prims.cos"):
        _jit(lambda a: ltorch.cos(a), [make_prims_executor()])(torch.randn(2))


def test_fusion_executor_groups_neighbouring_claims_into_regions() -> None:
    fuser = PythonFusionExecutor()

    def fn(a, b):
        c = ltorch.sin(a) * b + 1.0  # elementwise: one region
        d = ltorch.sum(c, 0)  # a reduction breaks the region
        return ltorch.exp(d) * 2.0

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    torch.testing.assert_close(jitted(a, b), torch.exp(torch.sum(torch.sin(a) * b + 1.0, 0)) * 2.0)
    execution = str(pipeline.compile_stats(jitted).last_traces[-1])
    assert "PyFusion0(" in execution and "PyFusion1(" in execution
    assert "# t" in execution and "prims.sin" in execution  # the fused prims print as comments
    assert len(fuser.fused_regions) == 2


def test_fusion_regions_group_by_data_dependence_across_unfused_work() -> None:
    fuser = PythonFusionExecutor()

    def fn(a, b):
        s = ltorch.sin(a)
        m = ltorch.linear(b, b)  # not fusible, and independent of s: s and c still share a region
        c = ltorch.exp(a) + s
        return c, m

    a, b = torch.randn(3, 3), torch.randn(3, 3)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    c, m = jitted(a, b)
    torch.testing.assert_close(c, torch.exp(a) + torch.sin(a))
    torch.testing.assert_close(m, torch.nn.functional.linear(b, b))
    assert len(fuser.fused_regions) == 1
    assert [b.symbol.name for b in fuser.fused_regions[0]] == ["sin", "exp", "add"]


_SIN_PLUS_ONE = make_composite(
    "sin_plus_one_for_test", lambda a: ltorch.add(ltorch.sin(a), 1.0), module="test"
)


def _kernel_executor(name: str, *, beats_fusion: bool, defers_to_fusion: bool = False) -> OperatorExecutor:
    """An operator executor whose kernel for ``_SIN_PLUS_ONE`` takes 2-D inputs only."""
    kernel = OperatorExecutor(name)
    operator = kernel.register_operator("sin_plus_one", fn=lambda a: torch.sin(a) + 1.0, like=_SIN_PLUS_ONE)
    kernel.register_implementation(
        _SIN_PLUS_ONE,
        operator,
        checker=lambda a: a.ndim == 2,
        beats_fusion=beats_fusion,
        defers_to_fusion=defers_to_fusion,
    )
    return kernel


@pytest.mark.parametrize("beats_fusion", [True, False])
def test_a_kernel_that_beats_fusion_runs_where_its_checker_accepts(beats_fusion: bool) -> None:
    fuser = PythonFusionExecutor()
    kernel = _kernel_executor(f"kernel_beats_{beats_fusion}", beats_fusion=beats_fusion)
    jitted = _jit(lambda a: _SIN_PLUS_ONE(a) * 2.0, [fuser, kernel, make_prims_executor()])
    for shape in ((3, 4), (2, 3, 4)):  # the checker accepts the first only
        a = torch.randn(shape)
        torch.testing.assert_close(jitted(a), (torch.sin(a) + 1.0) * 2.0)
        execution = str(pipeline.compile_stats(jitted).last_traces[-1])
        by_kernel = beats_fusion and len(shape) == 2
        assert ("sin_plus_one(" in execution) == by_kernel, execution
        assert ("prims.sin" in execution) == (not by_kernel), execution


def test_an_operator_executor_listed_before_the_fusion_executor_keeps_its_claim() -> None:
    first, second = _kernel_executor("first_kernel", beats_fusion=False), PythonFusionExecutor()
    jitted = _jit(lambda a: _SIN_PLUS_ONE(a), [first, second, make_prims_executor()])
    a = torch.randn(3, 4)
    torch.testing.assert_close(jitted(a), torch.sin(a) + 1.0)
    assert "sin_plus_one(" in str(pipeline.compile_stats(jitted).last_traces[-1])
    assert not second.fused_regions


def test_an_implementation_cannot_both_defer_to_fusion_and_beat_it() -> None:
    with pytest.raises(ValueError, match="not both"):
        _kernel_executor("confused_kernel", beats_fusion=True, defers_to_fusion=True)


def test_fusion_regions_never_form_a_cycle() -> None:
    fuser = PythonFusionExecutor()

    def fn(a, w):
        s = ltorch.sin(a)
        m = ltorch.linear(s, w)  # depends on s, and the next region depends on m
        return ltorch.exp(m) + ltorch.sin(a) * 2.0

    a, w = torch.randn(3, 3), torch.randn(3, 3)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    expected = torch.exp(torch.nn.functional.linear(torch.sin(a), w)) + torch.sin(a) * 2.0
    torch.testing.assert_close(jitted(a, w), expected)
    # the sin that the linear reads and the exp of the linear's output cannot share a region
    execution = pipeline.compile_stats(jitted).last_traces[-1]
    (linear,) = [b for b in execution.bound_symbols if "linear" in b.symbol.name]
    linear_input = linear.args[0].name
    for region in fuser.fused_regions:
        names = {b.symbol.name for b in region}
        outputs = {p.name for b in region for p in b.proxy_outputs()}
        assert not ("exp" in names and linear_input in outputs), names
    assert len(fuser.fused_regions) == 2


def test_dead_code_is_removed_and_intermediates_deleted() -> None:
    def fn(a):
        unused = ltorch.exp(a)  # noqa: F841
        b = ltorch.sin(a)
        return ltorch.mul(b, b)

    jitted = _jit(fn, [make_prims_executor()])
    jitted(torch.randn(2))
    execution = str(pipeline.compile_stats(jitted).last_traces[-1])
    assert "exp" not in execution
    assert "del [t" in execution


def test_executor_registry_and_resolution() -> None:
    executor = register_executor(OperatorExecutor("registry_test"))
    assert get_executor("registry_test") is executor
    assert resolve_executors(["registry_test"])[0] is executor
    with pytest.raises(ValueError, match="no executor named 'nope'"):
        get_executor("nope")


def test_executor_plugins_load_from_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    import thunder.core.executor as executor_module

    class FakeEntryPoint:
        name, value = "fake_plugin", "fake:executor"

        def load(self):
            return lambda: OperatorExecutor("fake_plugin")

    monkeypatch.setattr(executor_module, "_entry_points_loaded", False)
    monkeypatch.setattr(
        metadata, "entry_points", lambda group: [FakeEntryPoint()] if group == "thunder.executors" else []
    )
    assert get_executor("fake_plugin").name == "fake_plugin"


def test_printed_execution_trace_runs_on_its_own() -> None:
    jitted = _jit(_fn, [make_prims_executor()])
    a, b = torch.randn(3, 4), torch.randn(4)
    expected = jitted(a, b)
    namespace: dict = {}
    source = str(pipeline.compile_stats(jitted).last_traces[-1])
    if "bound when compiled" in source:
        pytest.fail(f"the execution trace refers to objects it does not import:\n{source}")
    exec(compile(source, "printed", "exec"), namespace)
    torch.testing.assert_close(namespace["computation"](a, b), expected)


class _ViewFusingExecutor(PythonFusionExecutor):
    """Also claims shape prims, as nvFuser and Triton do."""

    def can_fuse(self, bound_symbol) -> bool:
        return super().can_fuse(bound_symbol) or (
            "shape" in bound_symbol.symbol.tags and bound_symbol.symbol.is_leaf
        )


def test_views_whose_results_only_leave_a_region_run_outside_it() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a, w):
        r = ltorch.reshape(ltorch.sin(a), (4, 3))  # only the linear reads the reshape
        return ltorch.linear(r, w)

    a, w = torch.randn(3, 4), torch.randn(2, 3)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    torch.testing.assert_close(jitted(a, w), torch.nn.functional.linear(torch.sin(a).reshape(4, 3), w))
    assert [[b.symbol.name for b in region] for region in fuser.fused_regions] == [["sin"]]
    execution = pipeline.compile_stats(jitted).last_traces[-1]
    names = [b.symbol.name for b in execution.bound_symbols]
    assert names.index("reshape") > names.index("PyFusion0")  # the view of the region's output, after it


def test_a_reshape_of_a_transpose_stays_in_its_region() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a, w):  # outside the region, the reshape of the transposed sin would copy it
        r = ltorch.reshape(ltorch.transpose(ltorch.sin(a), 0, 1), (3, 8))
        return ltorch.linear(r, w)

    a, w = torch.randn(2, 3, 4), torch.randn(5, 8)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    with pytest.warns(ExecutorFallbackWarning):  # the test fuser runs elementwise prims only
        result = jitted(a, w)
    torch.testing.assert_close(
        result, torch.nn.functional.linear(torch.sin(a).transpose(0, 1).reshape(3, 8), w)
    )
    assert [[b.symbol.name for b in region] for region in fuser.fused_regions] == [
        ["sin", "transpose", "reshape"]
    ]


def test_views_read_inside_their_region_stay_in_it() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a):
        r = ltorch.reshape(ltorch.sin(a), (4, 3))
        return ltorch.exp(r) + 1.0, r

    a = torch.randn(3, 4)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    out, r = jitted(a)
    torch.testing.assert_close(out, torch.exp(torch.sin(a).reshape(4, 3)) + 1.0)
    torch.testing.assert_close(r, torch.sin(a).reshape(4, 3))
    assert "reshape" in [b.symbol.name for b in fuser.fused_regions[0]]


def _swiglu_like(a, b, w):
    """a and b are bf16; the float32 values the last line reads come from the first region."""
    a32, b32 = ltorch.to(a, torch.float32), ltorch.to(b, torch.float32)
    s = ltorch.exp(a32) * b32
    h = ltorch.to(a32 * s, torch.bfloat16)
    m = ltorch.to(ltorch.linear(h, w), torch.float32)  # the regions are on either side of the linear
    return m * s + ltorch.sin(a32) * b32


def _region_inputs(region) -> dict[str, Any]:
    produced = {p.name for b in region for p in b.proxy_outputs()}
    return {p.name: p for b in region for p in b.proxy_args() if p.name not in produced}


def test_a_region_recomputes_cheap_values_instead_of_reading_them_from_another() -> None:
    fuser = PythonFusionExecutor()
    a, b = torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16)
    w = torch.randn(8, 8, dtype=torch.bfloat16)
    jitted = _jit(_swiglu_like, [fuser, make_prims_executor()])
    a32, b32 = a.float(), b.float()
    s = torch.exp(a32) * b32
    expected = torch.nn.functional.linear((a32 * s).bfloat16(), w).float() * s + torch.sin(a32) * b32
    torch.testing.assert_close(jitted(a, b, w), expected)
    first, second = fuser.fused_regions
    made_by_first = {p.name for b in first for p in b.proxy_outputs()}
    handed = [p for name, p in _region_inputs(second).items() if name in made_by_first]
    assert handed == []  # without recomputation: the float32 s, a32 and b32
    inputs = list(_region_inputs(second).values())
    assert [p.dtype.torch_dtype for p in inputs] == [torch.bfloat16] * 3  # the linear's output, a and b


def test_a_region_reads_what_is_cheaper_to_hand_over_than_to_recompute_from() -> None:
    fuser = PythonFusionExecutor()

    def fn(a, w):  # recomputing g would read the float32 a, twice g's size
        h, g = ltorch.to(ltorch.sin(a), torch.bfloat16), ltorch.to(ltorch.exp(a), torch.bfloat16)
        return ltorch.linear(h, w) * g

    a, w = torch.randn(4, 8), torch.randn(8, 8, dtype=torch.bfloat16)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    expected = torch.nn.functional.linear(torch.sin(a).bfloat16(), w) * torch.exp(a).bfloat16()
    torch.testing.assert_close(jitted(a, w), expected)
    first, second = fuser.fused_regions
    assert "exp" in [b.symbol.name for b in first] and "exp" not in [b.symbol.name for b in second]


def test_a_reshape_of_a_transposed_region_input_is_peeled_as_a_view() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a, w, v):  # the transposed linear output, reshaped: a view outside, a copy inside a region
        r = ltorch.reshape(ltorch.transpose(ltorch.linear(a, w), 0, 1), (3, 10))
        return ltorch.linear(ltorch.sin(a), w), ltorch.linear(r, v)

    a, w, v = torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(6, 10)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    first, second = jitted(a, w, v)
    reshaped = torch.nn.functional.linear(a, w).transpose(0, 1).reshape(3, 10)
    torch.testing.assert_close(second, torch.nn.functional.linear(reshaped, v))
    torch.testing.assert_close(first, torch.nn.functional.linear(torch.sin(a), w))
    assert [[b.symbol.name for b in region] for region in fuser.fused_regions] == [["sin"]]


def test_transposes_and_splitting_reshapes_of_region_inputs_run_before_it_as_views() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a, w):  # attention's heads: split the linear's output, then transpose
        q = ltorch.transpose(ltorch.reshape(ltorch.linear(a, w), (2, 3, 2, 4)), 1, 2)
        return ltorch.sin(q) * 2.0

    a, w = torch.randn(2, 3, 5), torch.randn(8, 5)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    expected = torch.sin(torch.nn.functional.linear(a, w).reshape(2, 3, 2, 4).transpose(1, 2)) * 2.0
    torch.testing.assert_close(jitted(a, w), expected)
    assert [[b.symbol.name for b in region] for region in fuser.fused_regions] == [["sin", "mul"]]


def test_a_merging_reshape_of_a_region_input_stays_in_the_region() -> None:
    fuser = _ViewFusingExecutor()

    def fn(a, w):  # the transpose is a view outside; reshaping it merges strided dims: a copy outside
        return ltorch.sin(ltorch.reshape(ltorch.transpose(ltorch.linear(a, w), 0, 1), (3, 10)))

    a, w = torch.randn(2, 3, 4), torch.randn(5, 4)
    jitted = _jit(fn, [fuser, make_prims_executor()])
    with pytest.warns(ExecutorFallbackWarning):  # the test fuser runs elementwise prims only
        result = jitted(a, w)
    torch.testing.assert_close(
        result, torch.sin(torch.nn.functional.linear(a, w).transpose(0, 1).reshape(3, 10))
    )
    assert [[b.symbol.name for b in region] for region in fuser.fused_regions] == [["reshape", "sin"]]
