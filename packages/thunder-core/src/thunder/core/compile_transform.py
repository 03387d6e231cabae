"""Compile transforms: transforms that see more of a compile than the computation trace.

A plain transform (``thunder.jit(fn, transforms=[f])``) maps the computation trace to a new one
before autograd. Some transforms need more: data parallelism changes what the prologue fetches
(FSDP's parameter shards), where the backward communicates (after autograd has made it), and how
the module behaves under ``no_sync()``. A ``CompileTransform`` in the ``transforms`` list is
consulted by the pipeline at each of those points; its default methods change nothing.

The pipeline also takes them from the module being compiled: ``thunder.distributed.ddp(model)``
puts its transform in ``model._thunder_compile_transforms``, which ``jit`` appends to the
user's ``transforms``.

Gradient synchronization can be switched off for a while (``ThunderModule.no_sync``): backward
calls made meanwhile run the backward trace of ``no_sync_backward`` instead of the usual one
(compiled along with it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from thunder.core.trace import Trace
    from thunder.core.transforms.autograd import ForwardBackward

__all__ = [
    "CompileTransform",
    "compile_transforms",
    "trace_transforms",
    "MODULE_ATTRIBUTE",
    "skip_grad_sync",
    "grad_sync_skipped",
    "backward_choosing_sync",
]

MODULE_ATTRIBUTE = "_thunder_compile_transforms"

# A process-wide depth, not a context variable: on a GPU, PyTorch runs backwards in its own threads.
_skip_grad_sync_depth = 0


class CompileTransform:
    """Abstract: hooks into the compile pipeline; every method's default leaves things as they are."""

    def tracing(self) -> contextlib.AbstractContextManager[Any]:
        """A context the frontend runs in (FSDP shows it full-size parameters there)."""
        return contextlib.nullcontext()

    def transform_traced(
        self, prologue: Trace, computation: Trace, args: tuple, kwargs: dict
    ) -> tuple[Trace, Trace]:
        """The frontend's prologue and computation, changed; runs inside ``tracing()``."""
        return prologue, computation

    def transform_computation(self, computation: Trace) -> Trace:
        """The computation when no backward is needed (grad mode off or nothing requires grad)."""
        return computation

    def transform_split(self, split: ForwardBackward) -> ForwardBackward:
        """The forward and backward after autograd and rematerialization."""
        return split

    def no_sync_backward(self, split: ForwardBackward) -> Trace | None:
        """The backward to run under ``no_sync()``, from the split before ``transform_split``; None: same."""
        return None

    def enter_no_sync(self, module: torch.nn.Module) -> None:
        """Called when ``no_sync()`` starts on a module compiled with this transform."""

    def exit_no_sync(self, module: torch.nn.Module) -> None:
        """Called when ``no_sync()`` ends (DDP synchronizes the gradients accumulated meanwhile)."""

    def __call__(self, computation: Trace) -> Trace:
        # In a ``transforms`` list the pipeline calls plain transforms on the computation.
        return self.transform_computation(computation)


def compile_transforms(transforms: Sequence[Callable]) -> list[CompileTransform]:
    return [t for t in transforms if isinstance(t, CompileTransform)]


def trace_transforms(transforms: Sequence[Callable]) -> list[Callable]:
    """The plain ``Trace -> Trace`` transforms, applied before autograd."""
    return [t for t in transforms if not isinstance(t, CompileTransform)]


@contextlib.contextmanager
def skip_grad_sync() -> Iterator[None]:
    global _skip_grad_sync_depth
    _skip_grad_sync_depth += 1
    try:
        yield
    finally:
        _skip_grad_sync_depth -= 1


def grad_sync_skipped() -> bool:
    return _skip_grad_sync_depth > 0


def backward_choosing_sync(synchronizing: Callable, unsynchronized: Callable) -> Callable:
    """A backward that runs ``synchronizing``, or ``unsynchronized`` inside ``no_sync()``."""

    def backward(*args: Any) -> Any:
        return (unsynchronized if grad_sync_skipped() else synchronizing)(*args)

    return backward
