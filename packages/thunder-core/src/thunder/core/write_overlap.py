"""Writes over their own operands: ``x[key] = v``, ``x.copy_(v)`` or ``op(..., out=x)`` where ``v`` is
a view of ``x``'s memory. thunder writes functionally (the whole value, then the write), eager writes
in memory order and reads what it already wrote; ``check_write_overlap`` keeps the cases where the two
agree and raises eager's error, or a NotImplementedError naming the construct, for the others.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from thunder.core.inplace import Mutations, _tracing, replay_views, torch_step
from thunder.core.proxies import TensorProxy

__all__ = ["SameView", "OVERLAP_MESSAGE", "check_write_overlap"]

SameView = Literal["allowed", "overlap", "refused"]

# eager's error (ATen's assert_no_overlap), word for word
OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation."
)


def check_write_overlap(
    target: TensorProxy, value: Any, construct: str = "x[key] = v", *, same_view: SameView = "allowed"
) -> None:
    """``target[...] = value`` where ``value`` is a view of ``target``'s memory: eager's copy_ and
    index_put_ refuse a partial overlap of the two where both are dense (``assert_no_partial_overlap``),
    and otherwise write in memory order, reading what they wrote. thunder's functional write equals
    eager's only where the two are disjoint or the very same view: raises eager's error, or a
    NotImplementedError naming the construct, elsewhere. ``same_view``: "allowed"; "overlap": eager's
    error there too, as ``assert_no_overlap`` raises it (``torch.cat(..., out=)`` over an operand);
    "refused": the NotImplementedError for any overlap (a kernel that reads what it already wrote,
    where eager raises nothing)."""
    if not isinstance(value, TensorProxy):
        return
    mutations = Mutations.of(_tracing())
    (root_t, chain_t), (root_v, chain_v) = mutations.root_and_chain(target), mutations.root_and_chain(value)
    if root_t != root_v:
        return
    root = mutations.roots[root_t].proxy if root_t in mutations.roots else target
    refusal = NotImplementedError(
        f"{construct} where v is a view of x's memory that overlaps what is written: eager's answer depends "
        "on the order it writes memory in, which thunder does not reproduce; clone() v first"
    )
    steps_t, steps_v = [torch_step(s) for s in chain_t], [torch_step(s) for s in chain_v]
    if any(s is None for s in (*steps_t, *steps_v)) or any(type(d) is torch.SymInt for d in root.shape):
        raise refusal
    meta = torch.empty(tuple(root.shape), device="meta")
    written, read = replay_views(meta, tuple(steps_t)), replay_views(meta, tuple(steps_v))
    if written.numel() == 0 or read.numel() == 0:
        return
    if (
        written.shape == read.shape
        and written.stride() == read.stride()
        and (written.storage_offset() == read.storage_offset())
    ):
        if same_view == "overlap":
            raise RuntimeError(OVERLAP_MESSAGE)
        if same_view == "refused":
            raise refusal
        return  # the same view: eager copies it onto itself
    from thunder.core import layouts  # layouts reads this module's view chains

    if not layouts.is_contiguous(root):  # (guarded) eager's check then depends on the very strides
        if torch.isin(_memory_positions(written), _memory_positions(read)).any():
            raise refusal
        return
    from torch._prims_common import is_non_overlapping_and_dense_or_false as dense

    if dense(written) and dense(read):
        low, high = written.storage_offset(), written.storage_offset() + written.numel()
        if low < read.storage_offset() + read.numel() and read.storage_offset() < high:
            raise refusal if same_view == "refused" else RuntimeError(OVERLAP_MESSAGE)
        return
    if written.numel() + read.numel() > 1 << 24:
        raise refusal
    if torch.isin(_memory_positions(written), _memory_positions(read)).any():
        raise refusal


def _memory_positions(view: torch.Tensor) -> torch.Tensor:
    """The memory offsets of a (meta) view's elements, as a flat tensor."""
    positions = torch.tensor([view.storage_offset()])
    for size, stride in zip(view.shape, view.stride()):
        positions = (positions[:, None] + torch.arange(size) * stride).flatten()
    return positions
