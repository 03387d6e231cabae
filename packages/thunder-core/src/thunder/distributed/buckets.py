"""Buckets: several tensors sent in one collective, packed into one flat tensor and unpacked after.

One collective per parameter is latency-bound (GPT-2 has ~150 parameters); a bucket of about
``bucket_size_in_mb`` pays the latency once. Packing and unpacking are one symbol each
(``dist.pack``, ``dist.unpack``, ``dist.pack_shards``, ``dist.unpack_shards``), one executor call
per bucket: as per-tensor ``reshape``/``slice`` prims they were ~4 host calls per parameter, which
made FSDP's step host-bound (GPT-2 124M on 2 GPUs: 48.9 ms against 29.9 ms for one GPU). A bucket
of one tensor is sent as it is where the collective leaves its input alone.

Layouts, for ``W`` processes and a bucket of parameters ``a, b``:

- all-gather: each process sends ``[a_shard, b_shard]`` flattened (``pack``); the result, viewed
  as ``(W, total)``, has one row per process, and ``a`` is rows ``[:, :a.numel]`` reshaped to
  ``(W * a_rows, ...)``, then the padding rows dropped (``unpack_shards``);
- reduce-scatter: each (padded) gradient viewed as ``(W, numel / W)`` has one row per process's
  shard; the rows are concatenated along dim 1 (``pack_shards``), so process ``r`` receives the
  sum of row ``r``, which ``unpack`` views as the shards;
- all-reduce: the flattened gradients concatenated (``pack``), and viewed back (``unpack``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.distributed import prims as dist
from thunder.distributed.rewrite import gather_full, record
from thunder.distributed.sharding import ShardInfo

__all__ = [
    "group",
    "start_all_reduce",
    "finish_all_reduce",
    "start_all_gather",
    "finish_all_gather",
    "start_reduce_scatter",
    "finish_reduce_scatter",
]

T = TypeVar("T")


def group(
    items: list[T], nbytes: Callable[[T], int], key: Callable[[T], Hashable], limit: int
) -> list[list[T]]:
    """``items`` in order, in buckets of about ``limit`` bytes; a bucket holds items of one ``key``."""
    buckets: list[list[T]] = []
    open_buckets: dict[Hashable, tuple[list[T], list[int]]] = {}  # key -> (bucket, [its bytes])
    for item in items:
        bucket, size = open_buckets.get(key(item), (None, [0]))
        if bucket is None or size[0] >= limit:
            bucket, size = [], [0]
            open_buckets[key(item)] = (bucket, size)
            buckets.append(bucket)
        bucket.append(item)
        size[0] += nbytes(item)
    return buckets


def tensor_key(t: TensorProxy) -> Hashable:
    return (t.dtype, t.device)


def tensor_bytes(t: TensorProxy) -> int:
    return t.numel() * t.dtype.itemsize


def start_all_reduce(grads: list[TensorProxy], world_size: int) -> Any:
    """All-reduce (mean) a packed copy: ``dist.all_reduce`` works in place, on a tensor only it reads."""
    return dist.all_reduce(dist.pack(grads), "mean", world_size)


def finish_all_reduce(pending: Any, grads: list[TensorProxy]) -> list[TensorProxy]:
    return list(dist.unpack(dist.wait(pending), [tuple(g.shape) for g in grads]))


def start_all_gather(shards: list[TensorProxy], world_size: int) -> Any:
    if len(shards) == 1:
        return dist.all_gather(shards[0], world_size)
    return dist.all_gather(dist.pack(shards), world_size)


def finish_all_gather(pending: Any, fulls: list[TensorProxy], infos: list[ShardInfo]) -> None:
    """Binds each of ``fulls`` (the trace's parameters) to its gathered value."""
    if len(fulls) == 1:
        gather_full(pending, fulls[0], infos[0].rows * infos[0].world_size)
        return
    world_size = infos[0].world_size
    shard_shapes = [info.shard_shape for info in infos]
    shapes = [info.full_shape for info in infos]
    record(dist.unpack_shards, dist.wait(pending), world_size, shard_shapes, shapes, output=tuple(fulls))


def start_reduce_scatter(grads: list[TensorProxy], infos: list[ShardInfo]) -> Any:
    world_size = infos[0].world_size
    if len(grads) == 1:
        return dist.reduce_scatter(_pad_rows(grads[0], infos[0]), "mean", world_size)
    packed = dist.pack_shards(grads, world_size, [info.shard_shape for info in infos])
    return dist.reduce_scatter(packed, "mean", world_size)


def finish_reduce_scatter(pending: Any, infos: list[ShardInfo]) -> list[TensorProxy]:
    result = dist.wait(pending)
    if len(infos) == 1:
        return [result]
    return list(dist.unpack(result, [info.shard_shape for info in infos]))


def _pad_rows(grad: TensorProxy, info: ShardInfo) -> TensorProxy:
    if not info.padding:
        return grad
    return prims.pad(grad, 0.0, [(0, info.padding, 0)] + [(0, 0, 0)] * (grad.ndim - 1))
