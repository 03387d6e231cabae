"""Data parallelism: bucketed, overlapped all-reduce of the gradients in the backward trace.

Every process holds the whole model and runs it on its part of the batch; the gradients are
averaged over the processes before the optimizer step. The transform works on the backward trace
that autograd made: gradients are grouped into buckets (about ``bucket_size_in_mb`` each, in the
order the backward produces them, one dtype per bucket), and right after the bound symbol that
produces the last gradient of a bucket, the bucket is packed into one flat tensor and its
all-reduce starts. The waits, and the unpacking into per-parameter gradients, come just before the
return, so the rest of the backward runs while the buckets travel::

    t9 = torch.matmul(t7, t8)
    t20 = prims.cat([t21, t22], 0)             # the last layer's weight and bias gradients
    t23 = dist.all_reduce(t20, 'mean', 2)      # starts; the backward goes on
    ...
    t30 = dist.wait(t23)
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import torch

from thunder.core.compile_transform import CompileTransform
from thunder.core.proxies import TensorProxy
from thunder.core.trace import Trace
from thunder.core.transforms.autograd import ForwardBackward
from thunder.distributed.buckets import finish_all_reduce, group, start_all_reduce, tensor_bytes, tensor_key
from thunder.distributed.parameters import parameter_positions
from thunder.distributed.rewrite import Inserter, producers, returned

__all__ = ["DDPTransform", "all_reduce_gradients", "synchronize_gradients"]


def gradient_buckets(backward: Trace, positions: Any, bucket_bytes: int) -> tuple[int, Any, list]:
    """The index of the backward's return, the gradients it returns, and those at ``positions``
    grouped into buckets in the order the backward produces them (lists of (producer, position))."""
    return_index, return_symbol = returned(backward)
    grads = return_symbol.args[0]
    made = producers(backward)
    ready = sorted((made.get(grads[p].name, -1), p) for p in positions if isinstance(grads[p], TensorProxy))
    buckets = group(
        ready,
        lambda item: tensor_bytes(grads[item[1]]),
        lambda item: tensor_key(grads[item[1]]),
        bucket_bytes,
    )
    return return_index, grads, buckets


def all_reduce_gradients(backward: Trace, positions: list[int], world_size: int, bucket_bytes: int) -> Trace:
    """``backward`` with the gradients it returns at ``positions`` averaged over the processes."""
    return_index, grads, buckets = gradient_buckets(backward, positions, bucket_bytes)
    inserter = Inserter(
        backward, f"DDP: gradients all-reduced in {len(buckets)} buckets as they are produced"
    )
    pending: list[Any] = [None] * len(buckets)
    for index, bucket in enumerate(buckets):
        last_producer = max(producer for producer, _ in bucket)
        bucket_grads = [grads[position] for _, position in bucket]
        inserter.after(last_producer, functools.partial(_start, pending, index, bucket_grads, world_size))
    averaged: dict[int, TensorProxy] = {}

    def finish() -> None:
        for started, bucket in zip(pending, buckets):
            results = finish_all_reduce(started, [grads[position] for _, position in bucket])
            averaged.update((position, result) for (_, position), result in zip(bucket, results))

    inserter.before(return_index, finish)
    return inserter.build(lambda value: tuple(averaged.get(i, grad) for i, grad in enumerate(value)))


def _start(pending: list[Any], index: int, grads: list[TensorProxy], world_size: int) -> None:
    pending[index] = start_all_reduce(grads, world_size)


class DDPTransform(CompileTransform):
    """Made by ``thunder.distributed.ddp``: all-reduces parameter gradients in the backward."""

    def __init__(self, module: torch.nn.Module, world_size: int, bucket_size_in_mb: float = 25.0):
        self.module = module
        self.world_size = world_size
        self.bucket_bytes = int(bucket_size_in_mb * 2**20)
        self._parameters: set[str] = set()  # the computation inputs that are the module's parameters

    def transform_traced(
        self, prologue: Trace, computation: Trace, args: tuple, kwargs: dict
    ) -> tuple[Trace, Trace]:
        params = {id(p) for p in self.module.parameters()}
        self._parameters = {
            computation.args[i].name for i in parameter_positions(prologue, args, kwargs, params)
        }
        return prologue, computation

    def transform_split(self, split: ForwardBackward) -> ForwardBackward:
        positions = [
            i for i, p in enumerate(split.forward.args) if getattr(p, "name", None) in self._parameters
        ]
        backward = all_reduce_gradients(split.backward, positions, self.world_size, self.bucket_bytes)
        return replace(split, backward=backward)

    def no_sync_backward(self, split: ForwardBackward) -> Trace | None:
        return split.backward

    def exit_no_sync(self, module: torch.nn.Module) -> None:
        synchronize_gradients(self.module, self.world_size)


def synchronize_gradients(module: torch.nn.Module, world_size: int) -> None:
    """Average the ``.grad`` of every parameter over the processes (what leaving ``no_sync`` does)."""
    import torch.distributed as torch_dist

    for param in module.parameters():
        if param.grad is not None:
            param.grad.div_(world_size)
            torch_dist.all_reduce(param.grad)
