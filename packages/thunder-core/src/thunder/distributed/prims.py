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
"""

from __future__ import annotations

from collections.abc import Callable

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "wait", "REDUCE_OPS", "COLLECTIVES"]

REDUCE_OPS = ("sum", "mean")


def _collective(name: str, meta: Callable) -> Symbol:
    return Symbol(name=name, id=f"dist.{name}", meta=meta, module="dist", tags=frozenset({"collective"}))


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


all_reduce = _collective("all_reduce", _all_reduce_meta)
all_gather = _collective("all_gather", _all_gather_meta)
reduce_scatter = _collective("reduce_scatter", _reduce_scatter_meta)
wait = _collective("wait", _wait_meta)

COLLECTIVES = (all_reduce, all_gather, reduce_scatter, wait)
