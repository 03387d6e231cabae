"""Fully sharded data parallelism: all-gather parameters before use, reduce-scatter gradients.

Each process keeps a shard of every parameter (``sharding.py``). The module is traced with the
full shapes, so the computation trace is the ordinary one; then:

- the prologue checks the shards' shapes, and the forward (or, without autograd, the computation)
  takes the shards: the parameters are all-gathered in buckets (``buckets.py``) in the order of
  their first use, each bucket started ``prefetch`` buckets ahead and waited for right before its
  first use, padding rows sliced off;
- the backward reduce-scatters (averaging) the gradients in buckets, each right after the bound
  symbol that produces its last gradient, and waits just before returning, so it returns
  gradients of the shards;
- ZeRO-2 (``"ZERO2"``): the gathered parameters the backward needs are saved by the forward;
  ZeRO-3 (``"ZERO3"``): the forward saves the shards instead, and the backward all-gathers them
  again before use, so full parameters live only while a forward or backward reads them.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from thunder.core.compile_transform import CompileTransform
from thunder.core.prologue import with_tensor_shapes
from thunder.core.proxies import TensorProxy
from thunder.core.trace import Trace, tracectx
from thunder.core.transforms.autograd import ForwardBackward
from thunder.distributed.buckets import (
    finish_all_gather,
    finish_reduce_scatter,
    group,
    start_all_gather,
    start_reduce_scatter,
    tensor_bytes,
    tensor_key,
)
from thunder.distributed.ddp import all_reduce_gradients, gradient_buckets
from thunder.distributed.parameters import computation_inputs
from thunder.distributed.rewrite import Inserter, first_uses
from thunder.distributed.sharding import ShardInfo, full_size_parameters, shard_parameters

__all__ = ["FSDPTransform", "SHARDING_STRATEGIES", "gather_parameters", "reduce_scatter_gradients"]

SHARDING_STRATEGIES = ("ZERO2", "ZERO3")


def gather_parameters(
    trace: Trace,
    sharded: dict[str, ShardInfo],
    bucket_bytes: int,
    prefetch: int,
    *,
    save_shards: bool = False,
) -> tuple[Trace, dict[str, TensorProxy]]:
    """``trace`` taking shards for its inputs named in ``sharded``, all-gathering them before use.

    Parameters are gathered in buckets, in the order of their first use; a bucket's all-gather
    starts where the bucket ``prefetch`` places earlier is first used, and is waited for right
    before its own first use. With ``save_shards`` (a ZeRO-3 forward), the ``saved`` part of the
    returned ``(output, saved)`` holds shards instead of gathered parameters. Returns the trace
    and its shard inputs by the name of the parameter they stand for.
    """
    inserter = Inserter(trace, f"FSDP: parameters all-gathered before use (prefetch {prefetch})")
    full = {p.name: p for p in trace.args if isinstance(p, TensorProxy) and p.name in sharded}
    with tracectx(inserter.trace):
        shards = {name: _shard_input(proxy, sharded[name]) for name, proxy in full.items()}
    inserter.trace.args = [_shard_or_self(p, shards) for p in trace.args]
    uses = first_uses(trace)
    in_use_order = [name for _, name in sorted((uses[name], name) for name in full if name in uses)]
    buckets = group(
        in_use_order, lambda n: tensor_bytes(full[n]), lambda n: tensor_key(full[n]), bucket_bytes
    )
    pending: list[Any] = [None] * len(buckets)
    for index, bucket in enumerate(buckets):  # starts first, so that a wait at the same place follows them
        start = uses[buckets[index - prefetch][0]] if index >= prefetch else 0
        bucket_shards, world_size = [shards[name] for name in bucket], sharded[bucket[0]].world_size
        inserter.before(start, functools.partial(_start_gather, pending, index, bucket_shards, world_size))
    for index, bucket in enumerate(buckets):
        fulls, infos = [full[name] for name in bucket], [sharded[name] for name in bucket]
        inserter.before(uses[bucket[0]], functools.partial(_finish_gather, pending, index, fulls, infos))

    def saving_shards(value: Any) -> Any:
        output, saved = value
        return output, tuple(_shard_or_self(p, shards) for p in saved)

    return inserter.build(saving_shards if save_shards else None), shards


def _shard_input(full: TensorProxy, info: ShardInfo) -> TensorProxy:
    return TensorProxy(
        f"{full.name}_shard", shape=info.shard_shape, dtype=full.dtype, device=full.device,
        requires_grad=full.requires_grad,
    )  # fmt: skip


def _shard_or_self(value: Any, shards: dict[str, TensorProxy]) -> Any:
    return shards.get(value.name, value) if isinstance(value, TensorProxy) else value


def _start_gather(pending: list[Any], index: int, shards: list[TensorProxy], world_size: int) -> None:
    pending[index] = start_all_gather(shards, world_size)


def _finish_gather(pending: list[Any], index: int, fulls: list[TensorProxy], infos: list[ShardInfo]) -> None:
    finish_all_gather(pending[index], fulls, infos)


def reduce_scatter_gradients(backward: Trace, positions: dict[int, ShardInfo], bucket_bytes: int) -> Trace:
    """``backward`` returning, at ``positions``, the averaged gradients of this process's shards.

    Gradients go in buckets in the order the backward produces them; a bucket's reduce-scatter
    starts right after its last gradient is produced and is waited for before the return.
    """
    return_index, grads, buckets = gradient_buckets(backward, positions, bucket_bytes)
    inserter = Inserter(
        backward, f"FSDP: gradients reduce-scattered in {len(buckets)} buckets as they are produced"
    )
    pending: list[Any] = [None] * len(buckets)
    for index, bucket in enumerate(buckets):
        last_producer = max(producer for producer, _ in bucket)
        bucket_grads = [grads[position] for _, position in bucket]
        infos = [positions[position] for _, position in bucket]
        inserter.after(last_producer, functools.partial(_start_scatter, pending, index, bucket_grads, infos))
    shard_grads: dict[int, TensorProxy] = {}

    def finish() -> None:
        for started, bucket in zip(pending, buckets):
            results = finish_reduce_scatter(started, [positions[position] for _, position in bucket])
            shard_grads.update((position, result) for (_, position), result in zip(bucket, results))

    inserter.before(return_index, finish)
    return inserter.build(lambda value: tuple(shard_grads.get(i, g) for i, g in enumerate(value)))


def _start_scatter(pending: list[Any], index: int, grads: list[TensorProxy], infos: list[ShardInfo]) -> None:
    pending[index] = start_reduce_scatter(grads, infos)


class FSDPTransform(CompileTransform):
    """Made by ``thunder.distributed.fsdp``: shards the module's parameters and rewrites its traces."""

    def __init__(
        self,
        module: torch.nn.Module,
        rank: int,
        world_size: int,
        sharding_strategy: str = "ZERO3",
        bucket_size_in_mb: float = 25.0,
        prefetch: int = 1,
    ):
        if sharding_strategy not in SHARDING_STRATEGIES:
            raise ValueError(
                f"unknown sharding_strategy {sharding_strategy!r}: choose one of {SHARDING_STRATEGIES}"
            )
        self.module = module
        self.world_size = world_size
        self.sharding_strategy = sharding_strategy
        self.bucket_bytes = int(bucket_size_in_mb * 2**20)
        self.prefetch = prefetch
        self.shards = shard_parameters(module, rank, world_size)
        self._stand_ins: dict[int, ShardInfo] = {}
        self._sharded: dict[str, ShardInfo] = {}  # computation inputs that are sharded parameters
        self._replicated: set[str] = set()  # computation inputs that are whole parameters

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        with full_size_parameters(self.module, self.shards) as stand_ins:
            self._stand_ins = stand_ins
            yield
        self._stand_ins = {}

    def transform_traced(
        self, prologue: Trace, computation: Trace, args: tuple, kwargs: dict
    ) -> tuple[Trace, Trace]:
        params = {id(p) for p in self.module.parameters()}  # inside tracing(): the stand-ins
        self._sharded, self._replicated = {}, set()
        for proxy, value in zip(computation.args, computation_inputs(prologue, args, kwargs)):
            if id(value) in self._stand_ins:
                self._sharded[proxy.name] = self._stand_ins[id(value)]
            elif id(value) in params:
                self._replicated.add(proxy.name)
        return _checking_shards(prologue, self._sharded), computation

    def transform_computation(self, computation: Trace) -> Trace:
        return gather_parameters(computation, self._sharded, self.bucket_bytes, self.prefetch)[0]

    def transform_split(self, split: ForwardBackward) -> ForwardBackward:
        names = [getattr(p, "name", None) for p in split.forward.args]
        scattered = {i: self._sharded[name] for i, name in enumerate(names) if name in self._sharded}
        backward = reduce_scatter_gradients(split.backward, scattered, self.bucket_bytes)
        replicated = [i for i, name in enumerate(names) if name in self._replicated]
        if replicated:
            backward = all_reduce_gradients(backward, replicated, self.world_size, self.bucket_bytes)
        zero3 = self.sharding_strategy == "ZERO3"
        gather = functools.partial(gather_parameters, sharded=self._sharded, bucket_bytes=self.bucket_bytes)
        forward, shards = gather(split.forward, prefetch=self.prefetch, save_shards=zero3)
        saved = split.saved
        if zero3:
            backward = gather(backward, prefetch=self.prefetch)[0]
            saved = [shards.get(p.name, p) for p in saved]
        return replace(split, forward=forward, backward=backward, saved=saved)

    def enter_no_sync(self, module: torch.nn.Module) -> None:
        raise NotImplementedError(
            "no_sync() is not supported with thunder.distributed.fsdp: every backward reduce-scatters "
            "its gradients into the shards (accumulating them there gives the same result as no_sync)"
        )


def _checking_shards(prologue: Trace, sharded: dict[str, ShardInfo]) -> Trace:
    """The prologue, checking the shapes of the shards where it checked the full parameters."""
    return with_tensor_shapes(prologue, {name: info.shard_shape for name, info in sharded.items()})
