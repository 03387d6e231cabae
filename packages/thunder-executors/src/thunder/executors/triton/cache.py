"""Compiling generated kernels and running them, cached per input layout.

Generated sources are written to a per-process folder and imported from there: ``triton.jit``
reads a kernel's source from its file, and the files let a user read what ran. A kernel is compiled
once per (dtype, strides) of its inputs; shapes are fixed by the trace.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from typing import Any

import torch

from thunder.core import disk_cache
from thunder.executors.triton.codegen import KernelSource, generate_kernel, iteration_strides
from thunder.executors.triton.plan import KernelPlan, RegionPlan, ViewStep

__all__ = ["KernelRunner", "RegionRunner", "interpret_mode", "kernel_folder", "use_thunder_cache_dir"]

_folder: str | None = None
_modules: dict[str, Any] = {}


def interpret_mode() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``), e.g. on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def kernel_folder() -> str:
    """Where this process writes the kernels it generates."""
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix="thunder_triton_")
    return _folder


def use_thunder_cache_dir() -> None:
    """Triton keeps the kernels it compiles in ``<THUNDER_CACHE_DIR>/triton``, beside thunder's own
    entries (core/disk_cache.py), unless ``TRITON_CACHE_DIR`` names another folder or the disk cache
    is off (``THUNDER_DISK_CACHE=0``). Triton reads the variable when it compiles, so setting it before
    the first kernel is enough; it then holds for the rest of the process."""
    if "TRITON_CACHE_DIR" not in os.environ and disk_cache.enabled(None):
        os.environ["TRITON_CACHE_DIR"] = os.path.join(disk_cache.cache_dir(), "triton")


def _compile(kernel: KernelSource) -> Any:
    use_thunder_cache_dir()
    digest = hashlib.sha256(kernel.source.encode()).hexdigest()[:16]
    module = _modules.get(digest)
    if module is None:
        path = os.path.join(kernel_folder(), f"{kernel.name}_{digest}.py")
        with open(path, "w") as file:
            file.write(kernel.source)
        spec = importlib.util.spec_from_file_location(f"thunder_triton_{digest}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _modules[digest] = module
    return getattr(module, kernel.name)


class KernelRunner:
    """Runs one kernel of a plan, generating and compiling it for each new input layout."""

    def __init__(self, plan: KernelPlan, name: str):
        self.plan = plan
        self.name = name
        self.compiled: dict[tuple, tuple[Any, KernelSource]] = {}

    def __getstate__(self) -> dict:
        # kept on disk without its compiled kernels (Triton's own cache keeps those): core/disk_cache.py
        return {**self.__dict__, "compiled": {}}

    def layouts(self, inputs: list[torch.Tensor]) -> tuple:
        plan = self.plan
        return tuple(
            (t.dtype, iteration_strides(t, plan.shape, plan.reduce_dims, plan.kinds[p.name]))
            for p, t in zip(plan.inputs, inputs)
        )

    def __call__(self, env: dict[str, Any]) -> None:
        plan = self.plan
        inputs = [env[p.name] for p in plan.inputs]
        device = inputs[0].device if inputs else plan.outputs[0].device.torch_device
        outputs = [torch.empty(p.shape, dtype=p.dtype.torch_dtype, device=device) for p in plan.outputs]
        key = self.layouts(inputs)
        entry = self.compiled.get(key)
        if entry is None:
            output_strides = [
                iteration_strides(t, plan.shape, plan.reduce_dims, plan.kinds[p.name])
                for p, t in zip(plan.outputs, outputs)
            ]
            source = generate_kernel(plan, key, output_strides, name=self.name, interpret=interpret_mode())
            entry = self.compiled[key] = (_compile(source), source)
        function, source = entry
        function[source.grid](*inputs, *outputs, num_warps=source.num_warps)
        env.update({p.name: t for p, t in zip(plan.outputs, outputs)})


def _run_view(step: ViewStep, env: dict[str, Any]) -> None:
    b = step.bound_symbol
    x = env[b.args[0].name]
    if b.symbol.name == "reshape":
        env[b.output.name] = x.reshape(tuple(b.args[1]))
        return
    shape, dims = tuple(b.args[1]), tuple(b.args[2])
    view = [1] * len(shape)
    for size, d in zip(x.shape, dims):
        view[d] = size
    env[b.output.name] = x.reshape(view).expand(shape)


class RegionRunner:
    """The callable of a ``TritonFusion`` bound symbol: its views and kernels, in order."""

    def __init__(self, plan: RegionPlan, name: str):
        self.plan = plan
        self.steps: list[KernelRunner | ViewStep] = [
            KernelRunner(step, f"{name}_k{i}") if isinstance(step, KernelPlan) else step
            for i, step in enumerate(plan.steps)
        ]

    def __call__(self, *args: Any) -> tuple:
        env: dict[str, Any] = {p.name: a for p, a in zip(self.plan.inputs, args)}
        for step in self.steps:
            if isinstance(step, ViewStep):
                _run_view(step, env)
            else:
                step(env)
        return tuple(env[p.name] for p in self.plan.outputs)
