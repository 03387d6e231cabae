"""ThunderModule: the module ``thunder.jit`` returns for an ``nn.Module``.

It holds the original module as ``_model``, so parameters and buffers are shared, not copied: an
optimizer stepping either one updates both. State queries are answered with the original module's
names (``fc1.weight``, not ``_model.fc1.weight``), so the two are interchangeable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["ThunderModule"]


class ThunderModule(torch.nn.Module):
    """A wrapper nn.Module subclass, returned by ``thunder.jit``; not meant to be built by hand."""

    def __init__(self, model: torch.nn.Module, compiled_model_call: Callable):
        super().__init__()
        self._model = model
        self._thunder_jitted = compiled_model_call

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._thunder_jitted(*args, **kwargs)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator:
        return self._model.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator:
        return self._model.named_buffers(prefix, recurse, remove_duplicate)

    def get_parameter(self, target: str) -> torch.nn.Parameter:
        return self._model.get_parameter(target)

    def get_buffer(self, target: str) -> torch.Tensor:
        return self._model.get_buffer(target)

    def get_submodule(self, target: str) -> torch.nn.Module:
        return self._model.get_submodule(target)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Disable gradient synchronization under data parallelism; without it, this has no effect.

        Backward calls inside run the backward trace without collectives, so gradients accumulate
        locally; on exit the accumulated gradients are synchronized (``thunder.distributed.ddp``:
        averaged over the processes). Use it around each group of accumulation steps.
        """
        from thunder.core.compile_transform import compile_transforms, skip_grad_sync
        from thunder.core.pipeline import compile_data

        transforms = compile_transforms(compile_data(self).transforms)
        for transform in transforms:
            transform.enter_no_sync(self._model)
        with skip_grad_sync():
            yield
        for transform in transforms:
            transform.exit_no_sync(self._model)
