"""Fusion regions through the on-disk cache (thunder/core/disk_cache.py): stored, loaded again, and run.

Triton's regions run here in its interpreter without CUDA (conftest.py) and on the GPU with CUDA.
nvFuser's regions are built on the CPU (nothing runs nvFuser) and checked to come back whole; with
nvFuser and CUDA, a jitted function loaded from the cache runs and matches eager.
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import pytest
import torch

import thunder
from thunder.core import disk_cache
from thunder.core import executor as executor_registry
from thunder.core.symbol import BoundSymbol
from thunder.core.transforms.claim_executors import claim_executors
from thunder.executors.nvfuser.executor import NvFuserExecutor
from thunder.executors.torchex import executor as torch_executor


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("THUNDER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("THUNDER_DISK_CACHE", raising=False)
    return tmp_path / "cache"


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.tanh(x @ w) * 2.0, -1) + x.sum(-1, keepdim=True)


def _inputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 8, generator=generator), torch.randn(8, 8, generator=generator)
    return x.to(device).requires_grad_(), w.to(device).requires_grad_()


def _forward_backward(fn, x: torch.Tensor, w: torch.Tensor) -> tuple:
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    out = fn(x, w)
    out.square().sum().backward()
    return out, x.grad, w.grad


def _check_loaded_entry_runs(executors: list[str], device: str, region_prefix: str) -> None:
    x, w = _inputs(device)
    expected = _forward_backward(block, x, w)
    first = thunder.jit(block, executors=executors)
    torch.testing.assert_close(_forward_backward(first, x, w), expected)
    stats = thunder.compile_stats(first)
    assert (stats.disk_cache_misses, stats.disk_cache_writes) == (1, 1), stats.disk_cache_skip_reason
    second = thunder.jit(block, executors=executors)  # an empty memory cache: loaded from the disk
    torch.testing.assert_close(_forward_backward(second, x, w), expected)
    assert thunder.compile_stats(second).disk_cache_hits == 1
    names = [b.symbol.name for b in thunder.last_traces(second)[-1].bound_symbols]
    assert any(name.startswith(region_prefix) for name in names), names


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_regions_loaded_from_the_disk_run_as_eager() -> None:
    from thunder.executors.triton import executor as triton_executor

    available, reason = triton_executor.is_available()
    if not available:
        pytest.skip(reason)
    _check_loaded_entry_runs(
        ["triton", "torch"], "cuda" if torch.cuda.is_available() else "cpu", "TritonFusion"
    )


def test_nvfuser_regions_loaded_from_the_disk_run_as_eager() -> None:
    available, reason = executor_registry.get_executor("nvfuser").is_available()
    if not available:
        pytest.skip(reason)
    _check_loaded_entry_runs(["nvfuser", "torch"], "cuda", "nvFusion")


class AnyDeviceNvFuser(NvFuserExecutor):
    """nvFuser's regions without its CUDA-only check, built on the CPU (test_nvfuser_regions.py)."""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)


def test_nvfuser_regions_come_back_whole_from_the_disk_format(monkeypatch: pytest.MonkeyPatch) -> None:
    nvfuser = AnyDeviceNvFuser("nvfuser_on_cpu_for_disk")
    monkeypatch.setitem(executor_registry._registry, nvfuser.name, nvfuser)  # stored by its name
    jitted = thunder.jit(block, executors=["torch"])
    jitted(*(t.detach() for t in _inputs("cpu")))
    fused = claim_executors(thunder.last_traces(jitted)[0], [nvfuser, torch_executor])
    payload, _ = disk_cache._dumps(fused)
    loaded = pickle.loads(payload)
    assert str(loaded) == str(fused)
    regions = [
        (b, c)
        for b, c in zip(fused.bound_symbols, loaded.bound_symbols)
        if b.symbol.name.startswith("nvFusion")
    ]
    assert regions
    for original, copy in regions:
        assert copy.symbol.executor is nvfuser  # by name, the registered object itself
        runner, loaded_runner = original.symbol.fn.runner, copy.symbol.fn.runner
        assert [s.structure for s in loaded_runner.stages] == [s.structure for s in runner.stages]
        assert all(stage.definitions == {} for stage in loaded_runner.stages)  # defined again on first use
        assert (
            copy.symbol.fn.error is None and copy.symbol.fn.executor_name == original.symbol.fn.executor_name
        )
