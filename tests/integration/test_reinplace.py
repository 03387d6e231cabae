"""In-place ops instead of copy-backs (core/transforms/reinplace.py), against eager PyTorch.

Each program runs several times with new inputs, and its results and every tensor it updates are
compared with eager's. The execution trace shows what was reinplaced: an update written in place
prints as ``torch.Tensor.index_copy_(cache, ...)`` and leaves no ``inplace.copy_`` of that input.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import thunder
from thunder.core.inplace import copy_symbol


def _execution(jitted: Any) -> Any:
    return thunder.last_traces(jitted)[-1]


def _in_place_writes(jitted: Any) -> list[tuple[str, str]]:
    """(method, written proxy) of each in-place op of the execution trace."""
    return [
        (b.symbol.name, b.args[0].name)
        for b in _execution(jitted).bound_symbols
        if "writes_input" in b.symbol.tags
    ]


def _copied_back(jitted: Any) -> list[str]:
    return [b.args[0].name for b in _execution(jitted).bound_symbols if b.symbol is copy_symbol()]


def _check_calls(
    fn: Callable, make_inputs: Callable[[int], tuple], calls: int = 3, jitted: Any = None
) -> Any:
    """``fn`` jitted and eager on equal inputs (fresh each call), results and inputs compared after each."""
    jitted = jitted or thunder.jit(fn)
    for call in range(calls):
        inputs = make_inputs(call)
        expected_inputs = copy.deepcopy(inputs)
        actual = jitted(*inputs)
        expected = fn(*expected_inputs)
        torch.testing.assert_close(actual, expected)
        for ours, eager in zip(inputs, expected_inputs):
            if isinstance(ours, torch.Tensor):
                torch.testing.assert_close(ours, eager)
    return jitted


# --- a StaticCache-style decode step --------------------------------------------------------------


class KVCache(torch.nn.Module):
    """A decode step's attention over a static cache that each call writes one position of."""

    def __init__(self, spelling: str = "index_copy") -> None:
        super().__init__()
        self.spelling = spelling
        shape = (8, 2, 3, 4) if spelling == "index_put" else (2, 3, 8, 4)  # (batch, heads, positions, dim)
        self.register_buffer("keys", torch.zeros(shape))
        self.register_buffer("values", torch.zeros(shape))

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, position: torch.Tensor
    ) -> torch.Tensor:
        if self.spelling == "index_copy":  # transformers' StaticLayer.update
            self.keys.index_copy_(2, position, k)
            self.values.index_copy_(2, position, v)
            keys, values = self.keys, self.values
        elif self.spelling == "setitem":  # StaticLayer.update's fallback: index_put, None for ``:``
            self.keys[:, :, position] = k
            self.values[:, :, position] = v
            keys, values = self.keys, self.values
        else:  # ``cache[position] = k`` (positions first): index_put
            self.keys[position] = k.permute(2, 0, 1, 3)
            self.values[position] = v.permute(2, 0, 1, 3)
            keys, values = self.keys.permute(1, 2, 0, 3), self.values.permute(1, 2, 0, 3)
        scores = (q @ keys.transpose(-1, -2)).softmax(-1)  # reads the cache after the write
        return scores @ values


def _decode_inputs(call: int) -> tuple:
    generator = torch.Generator().manual_seed(call)
    q, k, v = (torch.randn(2, 3, 1, 4, generator=generator) for _ in range(3))
    return q, k, v, torch.tensor([call])


@pytest.mark.parametrize("spelling", ["index_copy", "index_put", "setitem"])
def test_a_decode_loop_writes_its_cache_in_place(spelling: str) -> None:
    module, reference = KVCache(spelling), KVCache(spelling)
    jitted = thunder.jit(module)
    for call in range(4):
        inputs = _decode_inputs(call)
        torch.testing.assert_close(jitted(*inputs), reference(*inputs))
        torch.testing.assert_close(module.keys, reference.keys)
        torch.testing.assert_close(module.values, reference.values)
    assert thunder.cache_misses(jitted) == 1
    method = "index_put_" if spelling == "setitem" else f"{spelling}_"
    assert _in_place_writes(jitted) == [(method, "keys"), (method, "values")]
    assert _copied_back(jitted) == []  # no cache-sized copy, no cache-sized temporary
    module_name = "inplace" if spelling == "setitem" else "torch.Tensor"
    assert f"{module_name}.{method}(keys" in str(_execution(jitted))


def test_a_read_of_the_old_cache_through_a_view_after_the_write_keeps_the_copy_back() -> None:
    """The update is computed out of place, the old cache is read (through a transpose) after it, and only
    then written: the write must stay after that read, so nothing is reinplaced."""

    def step(cache: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        new = cache.index_copy(2, position, k)
        old_scores = cache.transpose(-1, -2).sum(-1)  # the old cache, read after the new one exists
        cache.copy_(new)
        return old_scores + new.sum(-2)

    def inputs(call: int) -> tuple:
        return torch.randn(2, 3, 8, 4), torch.randn(2, 3, 1, 4), torch.tensor([call])

    jitted = _check_calls(step, inputs)
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["cache"]


def test_a_clone_of_the_old_cache_returned() -> None:
    def step(cache: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> tuple:
        old = cache.clone()  # copied before the write: the write may be in place
        cache.index_copy_(0, position, k)
        return old, cache * 2

    jitted = _check_calls(step, lambda call: (torch.randn(5, 3), torch.randn(1, 3), torch.tensor([call])))
    assert _in_place_writes(jitted) == [("index_copy_", "cache")]


def test_a_source_computed_from_the_cache_is_read_before_the_write() -> None:
    def step(cache: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, position, cache[:1] * 2)
        return cache.sum()

    jitted = _check_calls(step, lambda call: (torch.randn(6, 3), torch.tensor([call])))
    assert _in_place_writes(jitted) == [("index_copy_", "cache")]


def test_an_update_whose_source_is_a_view_of_the_memory_it_writes_keeps_the_copy_back() -> None:
    """Out of place, eager reads the source whole before writing; in place it would refuse the overlap."""

    def step(cache: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        cache.copy_(cache.index_copy(0, position, cache[2:3]))
        return cache.sum()

    jitted = _check_calls(step, lambda call: (torch.randn(6, 3), torch.tensor([call])))
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["cache"]


class SliceCache(torch.nn.Module):
    """A user's KV cache: ``cache[:, :, start:end] = k`` (and transformers' caches that slice)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("keys", torch.zeros(2, 3, 8, 4))

    def forward(self, q: torch.Tensor, k: torch.Tensor, start: int) -> torch.Tensor:
        self.keys[:, :, start : start + k.shape[2]] = k
        self.keys[:, :, -1] = k[:, :, 0] * 2  # an int index: a slice and a reshape
        return (q @ self.keys.transpose(-1, -2)).softmax(-1)


def test_slice_writes_into_a_cache_run_in_place() -> None:
    module, reference = SliceCache(), SliceCache()
    jitted = thunder.jit(module)
    for start in (0, 1, 3, 1):
        q, k = torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4)
        torch.testing.assert_close(jitted(q, k, start), reference(q, k, start))
        torch.testing.assert_close(module.keys, reference.keys)
    writes = _in_place_writes(jitted)
    assert [method for method, _ in writes] == ["write_slice_"] * 2 and writes[0][1] == "keys"
    assert _copied_back(jitted) == []
    assert "inplace.write_slice_(keys, k, [0, 0, 1, 0], [2, 3, 3, 4], [1, 1, 1, 1])" in str(
        _execution(jitted)
    )


def test_a_slice_write_of_a_slice_of_the_same_tensor_keeps_the_copy_back() -> None:
    def step(cache: torch.Tensor) -> torch.Tensor:
        cache[3:5] = cache[0:2]  # the source aliases the cache (another part): kept out of place
        return cache.sum(0)

    jitted = _check_calls(step, lambda call: (torch.randn(5, 3),))
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["cache"]


def test_an_update_of_a_slice_computed_from_it() -> None:
    def step(cache: torch.Tensor, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, position, x)
        cache[-1].add_(1)  # a length counted in place: reads the slice, then writes it
        return cache.sum(0) * 2

    jitted = _check_calls(step, lambda call: (torch.randn(5, 3), torch.randn(1, 3), torch.tensor([call])))
    assert [method for method, _ in _in_place_writes(jitted)] == ["index_copy_", "write_slice_"]
    assert _copied_back(jitted) == []


# --- several writes, views, aliases ---------------------------------------------------------------


def test_two_writes_to_one_buffer_in_one_call_are_both_in_place() -> None:
    def step(cache: torch.Tensor, a: torch.Tensor, b: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, position, a)
        between = cache.sum(0)  # the first write's value, read before the second write
        cache.index_copy_(0, position + 1, b)
        return between * cache.sum(0)

    def inputs(call: int) -> tuple:
        return torch.randn(6, 3), torch.randn(1, 3), torch.randn(1, 3), torch.tensor([call])

    jitted = _check_calls(step, inputs)
    assert _in_place_writes(jitted) == [("index_copy_", "cache"), ("index_copy_", "t0")]
    assert _copied_back(jitted) == []


def test_the_first_writes_value_read_after_the_second_write_keeps_the_copy_back() -> None:
    def step(cache: torch.Tensor, a: torch.Tensor, b: torch.Tensor, position: torch.Tensor) -> tuple:
        first = cache.index_copy(0, position, a)
        second = first.index_copy(0, position + 1, b)
        scores = first.t().sum(0)  # the first value, through a view, after the second exists
        cache.copy_(second)
        return scores, cache.sum(0)

    def inputs(call: int) -> tuple:
        return torch.randn(6, 3), torch.randn(1, 3), torch.randn(1, 3), torch.tensor([call])

    jitted = _check_calls(step, inputs)
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["cache"]


def test_a_write_through_a_view_of_a_buffer() -> None:
    def step(cache: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        layer = cache[1]  # one layer of a stacked cache
        layer.index_copy_(1, position, k)
        return cache.sum((0, 2)) + layer.sum()

    jitted = _check_calls(step, lambda call: (torch.randn(2, 3, 8), torch.randn(3, 1), torch.tensor([call])))
    # the layer's update is made out of place (layer-sized), then written into its slice of the cache
    assert _in_place_writes(jitted) == [("write_slice_", "cache")] and _copied_back(jitted) == []


def test_the_same_tensor_passed_twice() -> None:
    def step(
        cache: torch.Tensor, same: torch.Tensor, k: torch.Tensor, position: torch.Tensor
    ) -> torch.Tensor:
        cache.index_copy_(0, position, k)
        return same * 2  # eager: the write shows through the other argument

    jitted = thunder.jit(step)
    for call in range(3):
        cache, expected_cache = torch.randn(5, 3), None
        expected_cache = cache.clone()
        k, position = torch.randn(1, 3), torch.tensor([call])
        torch.testing.assert_close(
            jitted(cache, cache, k, position), step(expected_cache, expected_cache, k, position)
        )
        torch.testing.assert_close(cache, expected_cache)
    other = torch.randn(5, 3)  # two tensors now: another compile, and the other one is left alone
    cache, expected_cache, expected_other = torch.randn(5, 3), None, other.clone()
    expected_cache = cache.clone()
    k, position = torch.randn(1, 3), torch.tensor([2])
    torch.testing.assert_close(
        jitted(cache, other, k, position), step(expected_cache, expected_other, k, position)
    )
    torch.testing.assert_close(cache, expected_cache)
    torch.testing.assert_close(other, expected_other)


def test_a_buffer_read_after_the_write_and_returned() -> None:
    def step(cache: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> tuple:
        cache.index_copy_(0, position, k)
        return cache * 2, cache  # eager returns the cache itself

    jitted = thunder.jit(step)
    for call in range(3):
        cache, k, position = torch.randn(5, 3), torch.randn(1, 3), torch.tensor([call])
        expected_cache = cache.clone()
        doubled, returned = jitted(cache, k, position)
        expected_doubled, _ = step(expected_cache, k, position)
        torch.testing.assert_close(doubled, expected_doubled)
        assert returned is cache
        torch.testing.assert_close(cache, expected_cache)
    assert _in_place_writes(jitted) == [("index_copy_", "cache")] and _copied_back(jitted) == []


@pytest.mark.parametrize(
    "update",
    [
        lambda x, s, i, m: x.scatter_(1, i, s),
        lambda x, s, i, m: x.scatter_add_(1, i, s),
        lambda x, s, i, m: x.masked_fill_(m, 3.0),
        lambda x, s, i, m: x.index_put_((i[:, 0],), s[:, 0], accumulate=True),
        lambda x, s, i, m: x.index_add_(0, i[:, 0], s),
        lambda x, s, i, m: x.index_fill_(1, i[0], -1.0),
    ],
    ids=["scatter_", "scatter_add_", "masked_fill_", "index_put_accumulate", "index_add_", "index_fill_"],
)
def test_other_indexed_updates_run_in_place(update: Callable) -> None:
    def step(x: torch.Tensor, s: torch.Tensor, i: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        update(x, s, i, m)
        return x.sum(1)

    def inputs(call: int) -> tuple:
        generator = torch.Generator().manual_seed(call)
        x, s = torch.randn(4, 4, generator=generator), torch.randn(4, 4, generator=generator)
        i = torch.randint(0, 4, (4, 4), generator=generator)
        return x, s, i, torch.rand(4, 4, generator=generator) > 0.5

    jitted = _check_calls(step, inputs)
    assert [name for _, name in _in_place_writes(jitted)] == ["x"] and _copied_back(jitted) == []


# --- elementwise updates ----------------------------------------------------------------------------


def _state_update(exp_avg: torch.Tensor, step: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    exp_avg.mul_(0.9).add_(grad, alpha=0.1)  # a chain of two updates of one tensor
    step += 1
    return exp_avg / (1 - 0.9**step)


def _state_inputs(call: int) -> tuple:
    return torch.randn(4, 3), torch.tensor(float(call)), torch.randn(4, 3)


def test_elementwise_updates_of_a_state_run_in_place() -> None:
    jitted = _check_calls(_state_update, _state_inputs)
    assert _in_place_writes(jitted) == [("mul_", "exp_avg"), ("add_", "t0"), ("add_", "step")]
    assert _copied_back(jitted) == []
    assert "torch.Tensor.add_(t0, grad, alpha=0.1)" in str(_execution(jitted))


def test_elementwise_updates_a_fusion_executor_claims_stay_functional() -> None:
    """nvFuser fuses the update with its neighbours: reading and writing once in a kernel, unchanged."""
    from test_hf_regions import NvFuserClaimsOnCpu

    fuser = NvFuserClaimsOnCpu()
    jitted = thunder.jit(_state_update, executors=[fuser, "torch"])
    _check_calls(_state_update, _state_inputs, jitted=jitted)
    assert _in_place_writes(jitted) == [] and sorted(_copied_back(jitted)) == ["exp_avg", "step"]
    assert fuser.regions > 0


def test_a_whole_adamw_step_updates_its_state_in_place() -> None:
    from test_backward_inside_jit import whole_step_of

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.01)
    jitted, eager = whole_step_of(model, optimizer), whole_step_of(reference, reference_optimizer)
    jitted = thunder.jit(jitted)
    for _ in range(4):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jitted(x), eager(x))
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
        for ours, theirs in zip(optimizer.state.values(), reference_optimizer.state.values()):
            for key in theirs:
                torch.testing.assert_close(ours[key], theirs[key])
    written = {name for _, name in _in_place_writes(jitted)}
    assert {name for name in written if name.endswith("exp_avg")} == {
        "weight_exp_avg",
        "bias_exp_avg",
        "weight_1_exp_avg",
        "bias_1_exp_avg",
    }
    assert sorted(_copied_back(jitted)) == ["bias", "bias_1", "weight", "weight_1"]  # parameters require grad


# --- where it must not apply ----------------------------------------------------------------------


def test_a_training_forward_keeps_its_copy_backs() -> None:
    """With autograd, the forward is not reinplaced: its saved tensors could be the next call's writes."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    reference = copy.deepcopy(module)
    jitted = thunder.jit(module)
    for _ in range(2):
        x = torch.randn(8, 4)
        jitted(x).sum().backward()
        reference(x).sum().backward()
        torch.testing.assert_close(module[1].running_mean, reference[1].running_mean)
        for p, q in zip(module.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert _in_place_writes(jitted) == []


def test_an_update_a_fusion_executor_claims_stays_functional() -> None:
    """masked_fill is elementwise for nvFuser: fused with its neighbours, it keeps its copy-back."""
    from test_hf_regions import NvFuserClaimsOnCpu

    def step(x: torch.Tensor, m: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        x.masked_fill_(m, 0.0)
        x.index_copy_(0, position, k)
        return x * 2

    def inputs(call: int) -> tuple:
        return torch.randn(4, 3), torch.rand(4, 3) > 0.5, torch.randn(1, 3), torch.tensor([call])

    jitted = _check_calls(step, inputs, jitted=thunder.jit(step, executors=[NvFuserClaimsOnCpu(), "torch"]))
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["x"]


def test_a_decode_step_under_a_fusion_executor() -> None:
    """A region begun before an in-place op must not take in what reads its output: the op runs after
    every region begun before it (as a copy-back does), and the region would then wait for it."""
    from test_hf_regions import NvFuserClaimsOnCpu

    def step(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             position: torch.Tensor) -> torch.Tensor:  # fmt: skip
        q = (q * 2).tanh()  # a region begun before the writes
        keys.index_copy_(2, position, k.sin())
        values.index_copy_(2, position, v)  # reads no region: could be placed before any
        scale = values.float() * 0.5  # elementwise on the written cache: must not join q's region
        return (q @ keys.transpose(-1, -2)).softmax(-1) @ scale + q.sum()

    def inputs(call: int) -> tuple:
        generator = torch.Generator().manual_seed(call)
        q, k, v = (torch.randn(2, 3, 1, 4, generator=generator) for _ in range(3))
        return q, torch.zeros(2, 3, 8, 4), torch.zeros(2, 3, 8, 4), k, v, torch.tensor([call])

    fuser = NvFuserClaimsOnCpu()
    jitted = _check_calls(step, inputs, jitted=thunder.jit(step, executors=[fuser, "torch"]))
    assert _in_place_writes(jitted) == [("index_copy_", "keys"), ("index_copy_", "values")]
    assert fuser.regions > 0


def test_a_random_op_after_the_write_keeps_the_copy_back() -> None:
    """Copy-backs never move past a random op, and neither do in-place writes."""

    def step(cache: torch.Tensor, k: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, position, k)
        return torch.rand(3) * 0  # draws after the write

    jitted = thunder.jit(step)
    for call in range(2):
        cache, k, position = torch.randn(5, 3), torch.randn(1, 3), torch.tensor([call])
        expected_cache = cache.clone()
        step(expected_cache, k, position)
        jitted(cache, k, position)
        torch.testing.assert_close(cache, expected_cache)
    assert _in_place_writes(jitted) == [] and _copied_back(jitted) == ["cache"]


def test_a_decode_step_through_torch_compile_with_thunder_as_its_backend() -> None:
    from thunder.dynamo import ThunderCompiler

    module, reference = KVCache(), KVCache()
    backend = ThunderCompiler()
    compiled = torch.compile(module, backend=backend)
    for call in range(3):
        inputs = _decode_inputs(call)
        torch.testing.assert_close(compiled(*inputs), reference(*inputs))
        torch.testing.assert_close(module.keys, reference.keys)
        torch.testing.assert_close(module.values, reference.values)
    (jitted,) = [fn for info in backend.subgraph_infos for fn in info.thunder_compiled_fns]
    assert [method for method, _ in _in_place_writes(jitted)] == ["index_copy_", "index_copy_"]
    assert _copied_back(jitted) == []


def test_cuda_graphs_capture_an_input_written_in_place_at_its_address() -> None:
    """The reinplaced input counts as written (CUDA graphs then read and write the caller's tensor)."""
    from thunder.core.cuda_graphs import mutated_inputs

    jitted = thunder.jit(KVCache())
    jitted(*_decode_inputs(0))
    execution = _execution(jitted)
    positions = {p.name: i for i, p in enumerate(execution.args)}
    assert mutated_inputs(execution) == frozenset({positions["keys"], positions["values"]})


_DISK_CACHE_PROGRAM = textwrap.dedent(
    """
    import json, sys
    import torch, thunder
    sys.path.insert(0, sys.argv[1])
    from test_reinplace import KVCache, SliceCache, _decode_inputs

    results = []
    for module, reference, calls in (
        (KVCache(), KVCache(), [_decode_inputs(c) for c in range(3)]),
        (SliceCache(), SliceCache(), [(torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4), 1)] * 2),
    ):
        jitted = thunder.jit(module)
        for inputs in calls:
            torch.testing.assert_close(jitted(*inputs), reference(*inputs))
            torch.testing.assert_close(module.keys, reference.keys)
        stats = thunder.compile_stats(jitted)
        results.append([stats.disk_cache_hits, stats.disk_cache_writes, str(thunder.last_traces(jitted)[-1])])
    print(json.dumps(results))
    """
)


def test_reinplaced_programs_are_stored_and_loaded_by_the_disk_cache(tmp_path: Path) -> None:
    """The in-place symbols are stored by value; a second process loads them and matches eager."""
    script = tmp_path / "program.py"
    script.write_text(_DISK_CACHE_PROGRAM)
    env = {**os.environ, "THUNDER_CACHE_DIR": str(tmp_path / "cache"), "THUNDER_DISK_CACHE": "1"}

    def run() -> list:
        command = [sys.executable, str(script), str(Path(__file__).parent)]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert [(hits, writes) for hits, writes, _ in first] == [(0, 1), (0, 1)]
    assert [(hits, writes) for hits, writes, _ in second] == [(1, 0), (1, 0)]
    assert [trace for *_, trace in second] == [trace for *_, trace in first]
    assert "torch.Tensor.index_copy_(keys" in second[0][2] and "inplace.write_slice_(keys" in second[1][2]


# --- Hugging Face -----------------------------------------------------------------------------------


def test_llama_generate_with_a_static_cache_writes_it_in_place() -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (the `test` extra has it)")
    from test_hf_generation import VOCAB, llama

    torch.manual_seed(0)
    model = llama().eval()
    jitted = thunder.jit(model)
    for seed in (1, 2):
        prompt = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(seed))
        options = {"max_new_tokens": 6, "do_sample": False, "cache_implementation": "static"}
        with torch.no_grad():
            expected = model.generate(prompt, **options)
            actual = jitted.generate(prompt, **options)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jitted) == 2
    writes = _in_place_writes(jitted)  # the decode step's: each layer's keys and values, in place
    assert [method for method, _ in writes if method != "add_"] == ["index_copy_"] * 4
    assert _copied_back(jitted) == []  # and the cache's length (``cumulative_length``: add_)
