"""Collective symbols: what data parallelism adds to traces, printed as ``dist.<name>(...)``.

Each collective is *asynchronous*: ``dist.all_reduce``, ``dist.all_gather`` and
``dist.reduce_scatter`` start the communication and return a pending result, and ``dist.wait``
turns it into the tensor. A transform issues a collective as soon as its input exists and waits
only where the result is first read, so that the computation in between overlaps the
communication. In traces the pending result is a ``TensorProxy`` with the result's metadata; at
run time it is the executor's handle (torch.distributed's ``Work`` and the output tensor).

The symbols communicate over torch.distributed's default process group, whose size the trace
fixes (``world_size``, checked when the collective runs). ``op="mean"`` divides by the world size
(before the sum, so that bfloat16 sums do not overflow), giving averaged gradients.

A collective may reuse its input's memory for its result (torch.distributed works in place), so
transforms only pass it tensors that nothing else reads: a freshly packed bucket, a shard's copy.

Buckets are packed and unpacked by four symbols, each one call of the executor however many
tensors the bucket holds (the per-tensor reshapes, slices and pads they replace cost more host
time than their kernels; ``buckets.py`` gives the layouts):

- ``dist.pack(tensors)``: flattened and concatenated, a new tensor;
- ``dist.unpack(flat, shapes)``: consecutive pieces of ``flat``, viewed in ``shapes`` (no copy);
- ``dist.pack_shards(tensors, world_size, shard_shapes)``: each tensor zero-padded to
  ``world_size`` shards along dim 0, laid out rank by rank, as ``reduce_scatter`` deals them out;
- ``dist.unpack_shards(flat, world_size, shard_shapes, shapes)``: the inverse, after
  ``all_gather`` of packed shards: whole tensors (one copy kernel, padding rows dropped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol

__all__ = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "wait",
    "pack",
    "unpack",
    "pack_shards",
    "unpack_shards",
    "REDUCE_OPS",
    "COLLECTIVES",
]

REDUCE_OPS = ("sum", "mean")


def _dist_symbol(name: str, meta: Callable, tag: str = "collective") -> Symbol:
    return Symbol(name=name, id=f"dist.{name}", meta=meta, module="dist", tags=frozenset({tag}))


def _check(a: TensorProxy, op: str, world_size: int) -> None:
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}: choose one of {REDUCE_OPS}")
    if world_size < 1:
        raise ValueError(f"world_size must be positive, not {world_size}")


def _all_reduce_meta(a: TensorProxy, op: str, world_size: int) -> TensorProxy:
    _check(a, op, world_size)
    return TensorProxy(shape=a.shape, dtype=a.dtype, device=a.device)


def _all_gather_meta(a: TensorProxy, world_size: int) -> TensorProxy:
    """The ranks' tensors concatenated along dim 0, in rank order."""
    if a.ndim == 0:
        raise ValueError("dist.all_gather concatenates along dim 0 and needs a tensor with a dim")
    return TensorProxy(shape=(a.shape[0] * world_size, *a.shape[1:]), dtype=a.dtype, device=a.device)


def _reduce_scatter_meta(a: TensorProxy, op: str, world_size: int) -> TensorProxy:
    """The reduction of the ranks' tensors, of which each rank keeps its slice of dim 0."""
    _check(a, op, world_size)
    if a.ndim == 0 or a.shape[0] % world_size:
        raise ValueError(f"dist.reduce_scatter needs dim 0 divisible by {world_size}, got shape {a.shape}")
    return TensorProxy(shape=(a.shape[0] // world_size, *a.shape[1:]), dtype=a.dtype, device=a.device)


def _wait_meta(pending: TensorProxy) -> TensorProxy:
    return TensorProxy(shape=pending.shape, dtype=pending.dtype, device=pending.device)


all_reduce = _dist_symbol("all_reduce", _all_reduce_meta)
all_gather = _dist_symbol("all_gather", _all_gather_meta)
reduce_scatter = _dist_symbol("reduce_scatter", _reduce_scatter_meta)
wait = _dist_symbol("wait", _wait_meta)

COLLECTIVES = (all_reduce, all_gather, reduce_scatter, wait)


def _like(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    return TensorProxy(shape=tuple(shape), dtype=a.dtype, device=a.device)


def _one_kind(tensors: Sequence[TensorProxy]) -> TensorProxy:
    if not tensors:
        raise ValueError("a bucket needs at least one tensor")
    first = tensors[0]
    for t in tensors[1:]:
        if (t.dtype, t.device) != (first.dtype, first.device):
            raise ValueError(
                f"a bucket holds one dtype on one device: {t.dtype} on {t.device} after "
                f"{first.dtype} on {first.device}"
            )
    return first


def _pack_meta(tensors: Sequence[TensorProxy]) -> TensorProxy:
    return _like(_one_kind(tensors), (sum(t.numel() for t in tensors),))


def _unpack_meta(flat: TensorProxy, shapes: Sequence[Sequence[int]]) -> tuple[TensorProxy, ...]:
    if flat.ndim != 1 or flat.numel() != sum(math.prod(s) for s in shapes):
        raise ValueError(f"dist.unpack needs a 1-D tensor of the shapes' total size, got shape {flat.shape}")
    return tuple(_like(flat, shape) for shape in shapes)


def _pack_shards_meta(
    tensors: Sequence[TensorProxy], world_size: int, shard_shapes: Sequence[Sequence[int]]
) -> TensorProxy:
    first = _one_kind(tensors)
    for t, shard_shape in zip(tensors, shard_shapes, strict=True):
        if (
            t.ndim == 0
            or tuple(t.shape[1:]) != tuple(shard_shape[1:])
            or t.shape[0] > shard_shape[0] * world_size
        ):
            raise ValueError(f"a tensor of shape {t.shape} has no {world_size} shards of shape {shard_shape}")
    return _like(first, (world_size * sum(math.prod(s) for s in shard_shapes),))


def _unpack_shards_meta(
    flat: TensorProxy, world_size: int, shard_shapes: Sequence[Sequence[int]], shapes: Sequence[Sequence[int]]
) -> tuple[TensorProxy, ...]:
    if flat.ndim != 1 or flat.numel() != world_size * sum(math.prod(s) for s in shard_shapes):
        raise ValueError(
            f"dist.unpack_shards needs the gathered shards as one 1-D tensor, got shape {flat.shape}"
        )
    return tuple(_like(flat, shape) for shape in shapes)


pack = _dist_symbol("pack", _pack_meta, "bucket")
unpack = _dist_symbol("unpack", _unpack_meta, "bucket")
pack_shards = _dist_symbol("pack_shards", _pack_shards_meta, "bucket")
unpack_shards = _dist_symbol("unpack_shards", _unpack_shards_meta, "bucket")
