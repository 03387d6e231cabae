"""Bounded resources: an LRU cache per function, memory that plateaus, no cycles keeping modules alive.

Memory is measured (tracemalloc, gc object counts) across rounds of compiling and dropping
functions; what is asserted is that the growth stops, never a time.
"""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
import tracemalloc
import weakref
from pathlib import Path

import pytest
import torch

import thunder
from thunder.core.pipeline import DEFAULT_CACHE_SIZE


def _fn(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2


def test_cache_is_an_lru_bounded_by_cache_size() -> None:
    jitted = thunder.jit(_fn, cache_size=2, dynamic=False)  # an entry per shape (no symbolic size)
    a, b, c = torch.randn(1), torch.randn(2), torch.randn(3)
    for x in (a, b, a, c):  # a was used after b: c evicts b
        torch.testing.assert_close(jitted(x), _fn(x))
    stats = thunder.compile_stats(jitted)
    assert (stats.cache_misses, stats.cache_hits, stats.cache_evictions) == (3, 1, 1)
    torch.testing.assert_close(jitted(a), _fn(a))  # still cached
    assert (stats.cache_misses, stats.cache_hits) == (3, 2)
    torch.testing.assert_close(jitted(b), _fn(b))  # evicted: compiled again, evicting c
    assert (stats.cache_misses, stats.cache_evictions) == (4, 2)


def test_cache_size_default_and_validation() -> None:
    jitted = thunder.jit(_fn, dynamic=False)  # an entry per shape (no symbolic size)
    assert thunder.compile_data(jitted).cache_size == DEFAULT_CACHE_SIZE == 32
    for size in range(DEFAULT_CACHE_SIZE + 3):
        jitted(torch.randn(size + 1))
    assert thunder.compile_stats(jitted).cache_evictions == 3
    unbounded = thunder.jit(_fn, cache_size=None)
    assert thunder.compile_data(unbounded).cache_size is None
    for bad in (0, -1, 1.5, "8"):
        with pytest.raises(ValueError, match="cache_size"):
            thunder.jit(_fn, cache_size=bad)


def _compile_and_drop(count: int) -> None:
    for index in range(count):
        scale = float(index)

        def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (x * scale + y).tanh().sum(0)

        x = torch.randn(2, 3, requires_grad=index % 2 == 0)
        jitted = thunder.jit(fn)
        out = jitted(x, torch.randn(2, 3))
        if out.requires_grad:
            out.sum().backward()
        del jitted, fn, out, x


def _retained_after(rounds: int, per_round: int) -> tuple[list[int], list[int]]:
    gc.collect()
    sizes, objects = [], []
    tracemalloc.start()
    try:
        for _ in range(rounds):
            _compile_and_drop(per_round)
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
            objects.append(len(gc.get_objects()))
    finally:
        tracemalloc.stop()
    return sizes, objects


def _assert_plateau(sizes: list[int], objects: list[int], per_round: int) -> None:
    # The first round may fill caches that are bounded (lazily built symbols, imports); after it,
    # what is retained must not grow with the number of functions compiled and dropped.
    growth = [after - before for before, after in zip(sizes[1:], sizes[2:])]
    object_growth = [after - before for before, after in zip(objects[1:], objects[2:])]
    assert max(growth) < 200 * per_round, (sizes, growth)  # under 200 bytes per dropped function
    assert max(object_growth) < per_round, (objects, object_growth)


def _retained_in_fresh_process(rounds: int, per_round: int) -> tuple[list[int], list[int]]:
    """``_retained_after`` in a new interpreter: in a pytest worker, other tests' leftovers (their
    objects freed late, background threads) would be counted as this measurement's growth."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_resources as t; "
        f"print(t._retained_after({rounds}, {per_round}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_compiling_and_dropping_functions_does_not_grow_memory() -> None:
    per_round = 25
    sizes, objects = _retained_in_fresh_process(rounds=4, per_round=per_round)
    _assert_plateau(sizes, objects, per_round)


@pytest.mark.slow
def test_compiling_and_dropping_a_thousand_functions_does_not_grow_memory() -> None:
    per_round = 200
    sizes, objects = _retained_in_fresh_process(rounds=5, per_round=per_round)
    _assert_plateau(sizes, objects, per_round)


def _closure_over(weight: torch.Tensor):  # noqa: ANN202
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * weight

    return fn


def test_a_dropped_jitted_function_releases_the_function_and_its_closure() -> None:
    weight = torch.randn(3)
    fn = _closure_over(weight)
    jitted = thunder.jit(fn)
    torch.testing.assert_close(jitted(torch.ones(3)), weight)
    references = [weakref.ref(fn), weakref.ref(weight), weakref.ref(jitted)]
    del fn, weight, jitted
    gc.collect()
    assert [r() for r in references] == [None, None, None]


def _mlp() -> torch.nn.Module:
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2)
    )
    model.register_buffer("steps", torch.zeros(()))
    return model


@pytest.mark.parametrize("train", [False, True])
def test_a_dropped_thunder_module_releases_the_users_module(train: bool) -> None:
    model = _mlp()
    jmodel = thunder.jit(model)
    x = torch.randn(5, 6)
    if train:
        optimizer = torch.optim.SGD(jmodel.parameters(), lr=0.1)
        loss = jmodel(x).square().mean()
        loss.backward()
        optimizer.step()
        torch.testing.assert_close(jmodel(x), model(x))  # shared parameters, after the step
        del optimizer, loss
    else:
        with torch.no_grad():
            torch.testing.assert_close(jmodel(x), model(x))
    references = [weakref.ref(model), weakref.ref(model[0].weight), weakref.ref(jmodel)]
    del model, jmodel
    gc.collect()
    assert [r() for r in references] == [None, None, None]


def test_the_users_module_stays_alive_while_the_thunder_module_does() -> None:
    jmodel = thunder.jit(_mlp())
    reference = weakref.ref(jmodel._model)
    gc.collect()
    assert reference() is not None
    jmodel.eval()
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(jmodel(x), reference()(x))
