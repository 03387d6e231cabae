"""The torch executor's collectives: ``thunder.distributed.prims`` run through torch.distributed.

Every collective is started with ``async_op=True`` and returns a ``Pending`` (the ``Work`` handle
and the output tensor); ``wait`` blocks on the handle and returns the tensor. On NCCL, waiting
makes the current CUDA stream wait for the communication stream, so the compute issued between a
collective and its wait overlaps the communication.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as torch_dist

from thunder.core.executor import OperatorExecutor
from thunder.distributed import prims as dist

__all__ = [
    "Pending",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "wait",
    "pack",
    "unpack",
    "pack_shards",
    "unpack_shards",
    "register_distributed",
]


# newer torch renames these (and warns about the old names); the GPU machine's torch has the old ones
_reduce_scatter_tensor = (
    getattr(torch_dist, "reduce_scatter_single", None) or torch_dist.reduce_scatter_tensor
)
_all_gather_tensor = getattr(torch_dist, "all_gather_single", None) or torch_dist.all_gather_into_tensor


@dataclass
class Pending:
    """A started collective: its handle, and the tensor that holds the result once it is done."""

    work: Any
    result: torch.Tensor
    keep_alive: torch.Tensor | None = None  # an input torch.distributed reads until the work is done
    divide_by: int = 1  # applied to the result once it is there


def _check_world_size(world_size: int) -> None:
    actual = torch_dist.get_world_size()
    if actual != world_size:
        raise RuntimeError(
            f"this trace was built for a world of {world_size} processes, but the default process "
            f"group has {actual}"
        )


def all_reduce(a: torch.Tensor, op: str, world_size: int) -> Pending:
    """In place: ``a`` is a bucket nothing else reads. A mean divides first (gloo has no AVG)."""
    _check_world_size(world_size)
    if op == "mean":
        a.div_(world_size)
    return Pending(torch_dist.all_reduce(a, op=torch_dist.ReduceOp.SUM, async_op=True), a)


def all_gather(a: torch.Tensor, world_size: int) -> Pending:
    _check_world_size(world_size)
    a = a.contiguous()
    out = a.new_empty((a.shape[0] * world_size, *a.shape[1:]))
    return Pending(_all_gather_tensor(out, a, async_op=True), out, a)


def reduce_scatter(a: torch.Tensor, op: str, world_size: int) -> Pending:
    _check_world_size(world_size)
    a = a.contiguous()
    out = a.new_empty((a.shape[0] // world_size, *a.shape[1:]))
    work = _reduce_scatter_tensor(out, a, op=torch_dist.ReduceOp.SUM, async_op=True)
    # A mean divides the result, never the input, which other parts of the backward may still read.
    return Pending(work, out, a, world_size if op == "mean" else 1)


def wait(pending: Pending) -> torch.Tensor:
    pending.work.wait()
    if pending.divide_by != 1:
        pending.result.div_(pending.divide_by)
    return pending.result


def pack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def unpack(flat: torch.Tensor, shapes: Sequence[Sequence[int]]) -> tuple[torch.Tensor, ...]:
    pieces = flat.split([math.prod(shape) for shape in shapes])
    return tuple(piece.view(shape) for piece, shape in zip(pieces, shapes))


def pack_shards(
    tensors: Sequence[torch.Tensor], world_size: int, shard_shapes: Sequence[Sequence[int]]
) -> torch.Tensor:
    """One ``cat`` kernel (plus a pad for each tensor whose dim 0 is not a multiple of the world)."""
    blocks = []
    for t, shard_shape in zip(tensors, shard_shapes):
        missing = shard_shape[0] * world_size - t.shape[0]
        if missing:
            t = torch.nn.functional.pad(t, (0, 0) * (t.ndim - 1) + (0, missing))
        blocks.append(t.reshape(world_size, -1))
    return torch.cat(blocks, dim=1).view(-1)


def unpack_shards(
    flat: torch.Tensor,
    world_size: int,
    shard_shapes: Sequence[Sequence[int]],
    shapes: Sequence[Sequence[int]],
) -> tuple[torch.Tensor, ...]:
    """One ``split_with_sizes_copy`` kernel gathers each tensor's rows from every rank's block, into
    one new buffer (one allocation per bucket, not per tensor)."""
    sizes = [math.prod(shape) for shape in shard_shapes]
    buffer = flat.new_empty(flat.shape)
    outs = [
        piece.view(world_size, size)
        for piece, size in zip(buffer.split([s * world_size for s in sizes]), sizes)
    ]
    torch.split_with_sizes_copy(flat.view(world_size, -1), sizes, dim=1, out=outs)
    return tuple(
        _whole(out, world_size, shard, shape) for out, shard, shape in zip(outs, shard_shapes, shapes)
    )


def _whole(
    out: torch.Tensor, world_size: int, shard_shape: Sequence[int], shape: Sequence[int]
) -> torch.Tensor:
    """The gathered shards viewed as the whole tensor, without the padding rows."""
    padded = out.view(world_size * shard_shape[0], *shard_shape[1:])
    return padded if padded.shape[0] == shape[0] else padded.narrow(0, 0, shape[0])


def register_distributed(executor: OperatorExecutor) -> None:
    """Claim the collective and bucket-packing symbols for ``executor`` (the torch executor)."""
    for symbol, fn in (
        (dist.all_reduce, all_reduce),
        (dist.all_gather, all_gather),
        (dist.reduce_scatter, reduce_scatter),
        (dist.wait, wait),
        (dist.pack, pack),
        (dist.unpack, unpack),
        (dist.pack_shards, pack_shards),
        (dist.unpack_shards, unpack_shards),
    ):
        operator = executor.register_operator(fn.__name__, fn=fn, like=symbol)
        executor.register_implementation(symbol, operator)
