"""Buckets: several tensors sent in one collective, packed into one flat tensor and unpacked after.

One collective per parameter is latency-bound (GPT-2 has ~150 parameters); a bucket of about
``bucket_size_in_mb`` pays the latency once. Packing and unpacking are ordinary prims (``cat``,
``reshape``, ``slice_prim``), so they show in traces and executors may fuse them. A bucket of one
tensor is sent as it is.

Layouts, for ``W`` processes and a bucket of parameters ``a, b``:

- all-gather: each process sends ``[a_shard, b_shard]`` flattened; the result, viewed as
  ``(W, total)``, has one row per process, and ``a`` is rows ``[:, :a.numel]`` reshaped to
  ``(W * a_rows, ...)`` (then the padding rows sliced off);
- reduce-scatter: each (padded) gradient viewed as ``(W, numel / W)`` has one row per process's
  shard; the rows are concatenated along dim 1, so process ``r`` receives the sum of row ``r``;
- all-reduce: the flattened gradients concatenated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.distributed import prims as dist
from thunder.distributed.rewrite import flatten, gather_full, record, unflatten
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
    return dist.all_reduce(prims.cat([flatten(g) for g in grads], 0), "mean", world_size)


def finish_all_reduce(pending: Any, grads: list[TensorProxy]) -> list[TensorProxy]:
    flat = dist.wait(pending)
    offsets = _offsets([g.numel() for g in grads])
    return [unflatten(flat, offset, grad) for offset, grad in zip(offsets, grads)]


def start_all_gather(shards: list[TensorProxy], world_size: int) -> Any:
    if len(shards) == 1:
        return dist.all_gather(shards[0], world_size)
    return dist.all_gather(prims.cat([flatten(s) for s in shards], 0), world_size)


def finish_all_gather(pending: Any, fulls: list[TensorProxy], infos: list[ShardInfo]) -> None:
    """Binds each of ``fulls`` (the trace's parameters) to its gathered value."""
    if len(fulls) == 1:
        gather_full(pending, fulls[0], infos[0].rows * infos[0].world_size)
        return
    world_size = infos[0].world_size
    sizes = [math.prod(info.shard_shape) for info in infos]
    table = prims.reshape(dist.wait(pending), (world_size, sum(sizes)))
    for full, info, size, offset in zip(fulls, infos, sizes, _offsets(sizes)):
        piece = prims.slice_prim(table, [0, offset], [world_size, offset + size], [1, 1])
        padded_shape = (info.rows * world_size, *info.full_shape[1:])
        if not info.padding:
            record(prims.reshape, piece, padded_shape, output=full)
            continue
        padded = prims.reshape(piece, padded_shape)
        record(prims.slice_prim, padded, [0] * full.ndim, list(full.shape), [1] * full.ndim, output=full)


def start_reduce_scatter(grads: list[TensorProxy], infos: list[ShardInfo]) -> Any:
    world_size = infos[0].world_size
    padded = [_pad_rows(grad, info) for grad, info in zip(grads, infos)]
    if len(padded) == 1:
        return dist.reduce_scatter(padded[0], "mean", world_size)
    rows = [prims.reshape(p, (world_size, p.numel() // world_size)) for p in padded]
    packed = prims.cat(rows, 1)
    return dist.reduce_scatter(prims.reshape(packed, (packed.numel(),)), "mean", world_size)


def finish_reduce_scatter(pending: Any, infos: list[ShardInfo]) -> list[TensorProxy]:
    result = dist.wait(pending)
    if len(infos) == 1:
        return [result]
    sizes = [math.prod(info.shard_shape) for info in infos]
    return [
        prims.reshape(prims.slice_prim(result, [offset], [offset + size], [1]), info.shard_shape)
        for info, size, offset in zip(infos, sizes, _offsets(sizes))
    ]


def _pad_rows(grad: TensorProxy, info: ShardInfo) -> TensorProxy:
    if not info.padding:
        return grad
    return prims.pad(grad, 0.0, [(0, info.padding, 0)] + [(0, 0, 0)] * (grad.ndim - 1))


def _offsets(sizes: list[int]) -> list[int]:
    return [sum(sizes[:i]) for i in range(len(sizes))]
