"""Sharding a module's parameters across processes, for FSDP.

Each parameter is split along dim 0 into ``world_size`` equal shards, after padding dim 0 with
zero rows up to a multiple of ``world_size``; process ``rank`` keeps shard ``rank`` as the
module's parameter (a new ``nn.Parameter``, so an optimizer made afterwards steps the shards).
A parameter shared by several modules (tied embeddings) is sharded once and stays shared.
Parameters without a dim 0 (scalars) are not sharded: they stay whole on every process, and
their gradients are all-reduced.

While thunder traces the module it needs the full shapes: ``full_size_parameters`` swaps each
shard for a stand-in of the full shape that holds no data (one element, expanded).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

__all__ = ["ShardInfo", "shard_parameters", "full_size_parameters", "broadcast_from_rank0"]


@dataclass(frozen=True)
class ShardInfo:
    full_shape: tuple[int, ...]
    rows: int  # dim 0 of a shard; rows * world_size >= full_shape[0]
    world_size: int

    @property
    def shard_shape(self) -> tuple[int, ...]:
        return (self.rows, *self.full_shape[1:])

    @property
    def padding(self) -> int:
        return self.rows * self.world_size - self.full_shape[0]


def _places(module: torch.nn.Module) -> dict[int, list[tuple[torch.nn.Module, str]]]:
    """For each parameter (by id), the (module, attribute name) pairs that hold it."""
    places: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for submodule in module.modules():
        for name, param in submodule._parameters.items():
            if param is not None:
                places.setdefault(id(param), []).append((submodule, name))
    return places


def broadcast_from_rank0(module: torch.nn.Module) -> None:
    """Start every process from process 0's parameters and buffers."""
    import torch.distributed as torch_dist

    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            torch_dist.broadcast(tensor.data, src=0)


def shard_parameters(
    module: torch.nn.Module, rank: int, world_size: int
) -> dict[int, tuple[torch.nn.Parameter, ShardInfo]]:
    """Replace the module's parameters by this process's shards; returns them by id with their info."""
    shards: dict[int, tuple[torch.nn.Parameter, ShardInfo]] = {}
    for places in _places(module).values():
        holder, name = places[0]
        param = holder._parameters[name]
        assert param is not None
        if param.ndim == 0:
            continue
        info = ShardInfo(tuple(param.shape), -(-param.shape[0] // world_size), world_size)
        with torch.no_grad():
            full = param.detach()
            if info.padding:
                full = torch.cat([full, full.new_zeros((info.padding, *full.shape[1:]))])
            shard = full[rank * info.rows : (rank + 1) * info.rows].clone()
        new = torch.nn.Parameter(shard, requires_grad=param.requires_grad)
        for holder, name in places:
            holder._parameters[name] = new
        shards[id(new)] = (new, info)
    return shards


@contextlib.contextmanager
def full_size_parameters(
    module: torch.nn.Module, shards: dict[int, tuple[torch.nn.Parameter, ShardInfo]]
) -> Iterator[dict[int, ShardInfo]]:
    """Inside, the module holds data-less stand-ins of the full shapes; yields their infos by id."""
    places = _places(module)
    stand_ins: dict[int, ShardInfo] = {}
    swapped: list[tuple[torch.nn.Module, str, torch.nn.Parameter]] = []
    for shard_id, (shard, info) in shards.items():
        stand_in = torch.nn.Parameter(
            shard.new_empty(1).expand(info.full_shape), requires_grad=shard.requires_grad
        )
        stand_ins[id(stand_in)] = info
        for holder, name in places.get(shard_id, []):
            holder._parameters[name] = stand_in
            swapped.append((holder, name, shard))
    try:
        yield stand_ins
    finally:
        for holder, name, shard in swapped:
            holder._parameters[name] = shard
