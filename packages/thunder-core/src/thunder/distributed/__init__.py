"""Data-parallel training with thunder: DDP and FSDP as trace transforms over torch.distributed.

``ddp(model)`` and ``fsdp(model)`` prepare a module and return it; ``thunder.jit`` of the result
compiles traces with the collectives in them (``dist.all_reduce``, ``dist.all_gather``,
``dist.reduce_scatter``, ``dist.wait``), run by the torch executor through torch.distributed.
The default process group must be initialized first (``torch.distributed.init_process_group``).

Example::

    torch.distributed.init_process_group("nccl")
    model = thunder.jit(thunder.distributed.fsdp(GPT().cuda()))
    optimizer = torch.optim.AdamW(model.parameters())  # steps this process's shards
    model(idx, targets).backward()
    optimizer.step()
    print(thunder.last_backward_traces(model)[-1])   # the reduce-scatters between the matmuls
"""

from __future__ import annotations

import torch

from thunder.core.compile_transform import MODULE_ATTRIBUTE, CompileTransform
from thunder.distributed import prims
from thunder.distributed.ddp import DDPTransform, all_reduce_gradients, synchronize_gradients
from thunder.distributed.fsdp import (
    SHARDING_STRATEGIES,
    FSDPTransform,
    gather_parameters,
    reduce_scatter_gradients,
)
from thunder.distributed.sharding import ShardInfo, broadcast_from_rank0

__all__ = [
    "ddp",
    "fsdp",
    "prims",
    "DDPTransform",
    "FSDPTransform",
    "SHARDING_STRATEGIES",
    "ShardInfo",
    "all_reduce_gradients",
    "gather_parameters",
    "reduce_scatter_gradients",
    "synchronize_gradients",
]


def _world() -> tuple[int, int]:
    import torch.distributed as torch_dist

    if not torch_dist.is_available() or not torch_dist.is_initialized():
        raise RuntimeError(
            "thunder.distributed needs torch.distributed's default process group: call "
            "torch.distributed.init_process_group first (torchrun sets up the environment for it)"
        )
    return torch_dist.get_rank(), torch_dist.get_world_size()


def _attach(model: torch.nn.Module, transform: CompileTransform) -> torch.nn.Module:
    if getattr(model, MODULE_ATTRIBUTE, None):
        raise ValueError(f"{type(model).__name__} is already prepared by thunder.distributed")
    object.__setattr__(model, MODULE_ATTRIBUTE, [transform])
    return model


def ddp(
    model: torch.nn.Module, *, bucket_size_in_mb: float = 25.0, broadcast: bool = True
) -> torch.nn.Module:
    """Prepare ``model`` for data-parallel training under ``thunder.jit``.

    Args:
        model: the module; every process passes an identically built one.
        bucket_size_in_mb: gradients are all-reduced in buckets of about this size.
        broadcast: start every process from process 0's parameters and buffers.

    Returns:
        ``model`` itself, marked so that ``thunder.jit(model)`` averages the parameters' gradients
        over the processes in its backward (overlapped with the rest of the backward).
        ``ThunderModule.no_sync()`` skips the averaging and does it on exit.

    Example::

        jmodel = thunder.jit(thunder.distributed.ddp(model))
        loss_fn(jmodel(x), y).backward()  # model's .grad: the average over the processes
    """
    _, world_size = _world()
    if broadcast:
        broadcast_from_rank0(model)
    return _attach(model, DDPTransform(model, world_size, bucket_size_in_mb))


def fsdp(
    model: torch.nn.Module,
    *,
    sharding_strategy: str = "ZERO3",
    bucket_size_in_mb: float = 25.0,
    prefetch: int = 1,
    broadcast: bool = True,
) -> torch.nn.Module:
    """Shard ``model``'s parameters across the processes, for ``thunder.jit``.

    Args:
        model: the module, on this process's device; every process passes an identically built one.
        sharding_strategy: ``"ZERO3"`` (parameters gathered for the forward and again for the
            backward) or ``"ZERO2"`` (gathered once; the forward saves them for the backward).
        bucket_size_in_mb: parameters are all-gathered, and gradients reduce-scattered, in buckets
            of about this size (of the full parameters).
        prefetch: how many buckets ahead of its use a bucket's all-gather starts.
        broadcast: shard process 0's parameters (so that every process starts from the same model).

    Returns:
        ``model`` itself, whose parameters are now this process's shards (dim 0 split in
        ``world_size`` parts, zero-padded): make the optimizer after this call. Run it through
        ``thunder.jit``; called directly it would see the shards.

    Example::

        jmodel = thunder.jit(thunder.distributed.fsdp(model, sharding_strategy="ZERO2"))
        optimizer = torch.optim.Adam(jmodel.parameters())
    """
    rank, world_size = _world()
    if broadcast:
        broadcast_from_rank0(model)
    return _attach(
        model, FSDPTransform(model, rank, world_size, sharding_strategy, bucket_size_in_mb, prefetch)
    )
