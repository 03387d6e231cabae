"""Listing executors, the defaults chosen by device and what is installed, and choosing by name or object."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest
import torch

import thunder
import thunder.core.executor as executor_module
from thunder.core.executor import FusionExecutor, OperatorExecutor, resolve_executors
from thunder.executors import (
    nvfuser_executor,
    torch_compile_executor,
    torch_executor,
    triton_executor,
    triton_gemv_executor,
)

# the packages re-export their executor objects under the submodules' name ``executor``
nvfuser_module = sys.modules["thunder.executors.nvfuser.executor"]
triton_module = sys.modules["thunder.executors.triton.executor"]


def _set_available(monkeypatch: pytest.MonkeyPatch, executor: object, available: bool) -> None:
    reason = "" if available else "unavailable in this test"
    monkeypatch.setattr(executor, "is_available", lambda: (available, reason))


@pytest.fixture
def cuda_machine(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A CUDA machine without Triton's GEMV executor (``test_defaults_on_cuda_add_triton_gemv`` has it)."""
    monkeypatch.setattr(executor_module, "_cuda_available", lambda: True)
    _set_available(monkeypatch, triton_gemv_executor, False)
    return monkeypatch


def test_listing_names_kind_availability_and_reason() -> None:
    listing = thunder.list_executors()
    rows = {info.name: info for info in listing}
    assert {"torch", "triton", "nvfuser", "torchcompile"} <= set(rows)
    assert rows["torch"].kind == "operator" and rows["torch"].available and rows["torch"].default
    for name in ("triton", "nvfuser", "torchcompile"):
        assert rows[name].kind == "fusion"
    for info in listing:
        assert info.available == (info.reason == ""), info
    table = str(listing)
    assert table.splitlines()[0].split() == ["name", "kind", "version", "default", "available", "why", "not"]
    assert all(name in table for name in rows)
    assert thunder.executors.list_executors() == listing


def test_nvfuser_says_why_it_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvfuser_module, "_MODULES", ("no_such_module_for_this_test",))
    available, reason = nvfuser_executor.is_available()
    assert not available and "not installed" in reason and "thunder[nvfuser]" in reason

    monkeypatch.setattr(nvfuser_module, "_MODULES", ("json",))  # found, but its import will fail
    monkeypatch.setattr(nvfuser_module.torch.cuda, "is_available", lambda: False)
    assert nvfuser_executor.is_available() == (False, "no CUDA device (nvFuser generates CUDA kernels only)")

    def broken_import() -> None:
        raise ImportError("libnvrtc.so.13: cannot open shared object file")

    monkeypatch.setattr(nvfuser_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(nvfuser_module, "nvfuser_module", broken_import)
    available, reason = nvfuser_executor.is_available()
    assert not available
    assert reason.startswith("import json failed: ImportError: libnvrtc.so.13"), reason


def test_triton_says_to_set_triton_interpret_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_module, "interpret_mode", lambda: False)
    monkeypatch.setattr(triton_module.torch.cuda, "is_available", lambda: False)
    available, reason = triton_executor.is_available()
    if triton_module.importlib.util.find_spec("triton") is None:
        assert not available and "not installed" in reason
    else:
        assert not available and "no CUDA device" in reason and "TRITON_INTERPRET=1" in reason


def test_defaults_on_a_cpu_machine_are_torch_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "_cuda_available", lambda: False)
    for executor in (nvfuser_executor, triton_executor, torch_compile_executor, triton_gemv_executor):
        _set_available(monkeypatch, executor, True)  # installed and runnable changes nothing on a CPU
    assert thunder.get_default_executors() == [torch_executor]


def test_defaults_on_cuda_prefer_nvfuser_then_triton(cuda_machine: pytest.MonkeyPatch) -> None:
    _set_available(cuda_machine, nvfuser_executor, True)
    _set_available(cuda_machine, triton_executor, True)
    assert thunder.get_default_executors() == [nvfuser_executor, torch_executor]
    _set_available(cuda_machine, nvfuser_executor, False)
    assert thunder.get_default_executors() == [triton_executor, torch_executor]
    _set_available(cuda_machine, triton_executor, False)
    assert thunder.get_default_executors() == [torch_executor]


def test_defaults_on_cuda_add_triton_gemv_after_the_fusion_executor(cuda_machine: pytest.MonkeyPatch) -> None:
    _set_available(cuda_machine, nvfuser_executor, True)
    _set_available(cuda_machine, triton_gemv_executor, True)
    assert thunder.get_default_executors() == [nvfuser_executor, triton_gemv_executor, torch_executor]
    _set_available(cuda_machine, nvfuser_executor, False)
    _set_available(cuda_machine, triton_executor, False)
    assert thunder.get_default_executors() == [triton_gemv_executor, torch_executor]


def test_user_fusion_executor_replaces_the_default_one(cuda_machine: pytest.MonkeyPatch) -> None:
    _set_available(cuda_machine, nvfuser_executor, True)
    _set_available(cuda_machine, triton_executor, True)
    assert resolve_executors(None) == [nvfuser_executor, torch_executor]
    assert resolve_executors(["triton"]) == [triton_executor, torch_executor]
    plugin = OperatorExecutor("registry_test_operator")
    # an operator executor of the user's goes first; the default fusion executor still follows
    assert resolve_executors([plugin]) == [plugin, nvfuser_executor, torch_executor]
    assert resolve_executors(["torch", "triton"]) == [torch_executor, triton_executor]


def test_names_and_objects_are_accepted_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "_cuda_available", lambda: False)  # defaults: torch alone
    assert resolve_executors(["torchcompile", torch_executor]) == [torch_compile_executor, torch_executor]
    assert resolve_executors("torch") == [torch_executor]
    with pytest.raises(TypeError, match="by name or as Executor objects"):
        resolve_executors([42])  # type: ignore[list-item]


def test_unknown_name_lists_what_is_available() -> None:
    with pytest.raises(ValueError, match="no executor named 'nvfuzer'") as error:
        thunder.jit(lambda x: x + 1, executors=["nvfuzer"])
    assert "available here: " in str(error.value) and "torch" in str(error.value).split("available here: ")[1]
    assert "entry-point group" in str(error.value)


def test_unavailable_executor_says_why_and_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_available(monkeypatch, nvfuser_executor, False)
    with pytest.raises(
        RuntimeError, match="'nvfuser' is not available here: unavailable in this test"
    ) as error:
        thunder.jit(lambda x: x + 1, executors=["nvfuser"])
    assert "(available: " in str(error.value) and "torch" in str(error.value)


def test_broken_plugin_is_listed_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class BrokenEntryPoint:
        name, value = "broken_plugin", "broken_plugin:executor"

        def load(self) -> None:
            raise ModuleNotFoundError("No module named 'broken_plugin'")

    monkeypatch.setattr(executor_module, "_entry_points_loaded", False)
    monkeypatch.setattr(executor_module, "_broken_entry_points", {})
    monkeypatch.setattr(
        metadata, "entry_points", lambda group: [BrokenEntryPoint()] if group == "thunder.executors" else []
    )
    rows = {info.name: info for info in thunder.list_executors()}
    assert rows["broken_plugin"].kind == "broken" and not rows["broken_plugin"].available
    assert "No module named 'broken_plugin'" in rows["broken_plugin"].reason
    with pytest.raises(ValueError, match="could not be loaded"):
        thunder.jit(lambda x: x, executors=["broken_plugin"])


def test_set_default_executors_and_restore() -> None:
    class NegFusion(FusionExecutor):
        pass

    try:
        thunder.set_default_executors(["torchcompile", "torch"])
        assert thunder.get_default_executors() == [torch_compile_executor, torch_executor]
        assert [e.name for e in resolve_executors(None)] == ["torchcompile", "torch"]
    finally:
        thunder.set_default_executors(None)
    assert torch_compile_executor not in thunder.get_default_executors()
    assert executor_module.executor_kind(NegFusion("x")) == "fusion"


def test_jit_with_an_executor_object_runs() -> None:
    fn = lambda x: torch.sin(x) * 2
    jitted = thunder.jit(fn, executors=[torch_executor])
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), fn(x))
