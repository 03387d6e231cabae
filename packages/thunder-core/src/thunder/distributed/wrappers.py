"""PyTorch's own data-parallel wrappers and thunder: which order works, and a clear error otherwise.

``DistributedDataParallel(thunder.jit(model))`` and ``fully_shard(thunder.jit(model))`` work: the
ThunderModule's parameters are the model's, its backward accumulates into them through PyTorch's
autograd (so DDP's reducer hooks fire), and FSDP2's hooks swap the model's parameters before each
call, which the prologue fetches anew. The other order cannot work: thunder would have to trace
the wrappers' forward, which drives communication through hooks and Python side effects.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["reject_torch_wrappers"]


def _wrapper_types() -> dict[type, str]:
    import torch.distributed as torch_dist

    types: dict[type, str] = {torch.nn.parallel.DistributedDataParallel: "DistributedDataParallel"}
    if torch_dist.is_available():
        from torch.distributed import fsdp

        types[fsdp.FullyShardedDataParallel] = "FullyShardedDataParallel"
        if hasattr(fsdp, "FSDPModule"):
            types[fsdp.FSDPModule] = "fully_shard"
    return types


_outside = {
    "DistributedDataParallel": "DistributedDataParallel(thunder.jit(model))",
    "FullyShardedDataParallel": "torch.distributed.fsdp.fully_shard(thunder.jit(model))",
    "fully_shard": "fully_shard(thunder.jit(model))",
}


def reject_torch_wrappers(fn: Any) -> None:
    """Raise if ``fn`` is a module wrapped by PyTorch's DDP or FSDP, saying what to do instead."""
    if not isinstance(fn, torch.nn.Module):
        return
    for wrapper, name in _wrapper_types().items():
        if isinstance(fn, wrapper):
            raise TypeError(
                f"thunder.jit cannot compile a module wrapped by {name}: its forward communicates through "
                f"hooks and Python side effects that thunder does not trace. Wrap the compiled module "
                f"instead ({_outside[name]}), or use thunder.distributed.ddp / fsdp"
            )
