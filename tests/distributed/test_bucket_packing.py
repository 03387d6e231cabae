"""The bucket symbols against what the collectives do with them, in one process (no process group).

``pack_shards`` lays gradients out rank by rank, so that a reduce-scatter leaves rank ``r`` row
block ``r``: here the blocks of one process's packed tensor are checked to be each tensor's shard
``r``. ``unpack_shards`` is checked on what an all-gather of every rank's ``pack`` returns (the
ranks' packs concatenated). Shapes include dim 0 not divisible by the world (padding rows), 1-D
tensors and a tensor with a single row.
"""

from __future__ import annotations

import pytest
import torch

from thunder.distributed.sharding import ShardInfo
from thunder.executors.torch_distributed import pack, pack_shards, unpack, unpack_shards

SHAPES = [(5, 3), (4,), (1, 2, 2), (8, 3)]


def _infos(world_size: int) -> list[ShardInfo]:
    return [ShardInfo(shape, -(-shape[0] // world_size), world_size) for shape in SHAPES]


def _shard(full: torch.Tensor, info: ShardInfo, rank: int) -> torch.Tensor:
    padded = torch.cat([full, full.new_zeros((info.padding, *full.shape[1:]))])
    return padded[rank * info.rows : (rank + 1) * info.rows]


def test_unpack_views_what_pack_concatenated() -> None:
    tensors = [torch.randn(shape) for shape in SHAPES]
    flat = pack(tensors)
    assert flat.shape == (sum(t.numel() for t in tensors),)
    tensors[0].add_(1.0)  # pack copies: a collective may overwrite its bucket
    pieces = unpack(flat, SHAPES)
    for piece in pieces:  # views of the bucket, no copy
        assert piece.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    torch.testing.assert_close(pieces[0], tensors[0] - 1.0)
    for piece, original in zip(pieces[1:], tensors[1:]):
        torch.testing.assert_close(piece, original)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_pack_shards_deals_each_rank_its_shards(world_size: int) -> None:
    infos = _infos(world_size)
    grads = [torch.randn(shape) for shape in SHAPES]
    flat = pack_shards(grads, world_size, [info.shard_shape for info in infos])
    blocks = flat.view(world_size, -1)  # what reduce_scatter gives each rank: one block
    for rank in range(world_size):
        mine = unpack(blocks[rank].contiguous(), [info.shard_shape for info in infos])
        for piece, grad, info in zip(mine, grads, infos):
            torch.testing.assert_close(piece, _shard(grad, info, rank))


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_unpack_shards_rebuilds_the_gathered_tensors(world_size: int) -> None:
    infos = _infos(world_size)
    fulls = [torch.randn(shape) for shape in SHAPES]
    gathered = torch.cat(
        [pack([_shard(f, i, rank) for f, i in zip(fulls, infos)]) for rank in range(world_size)]
    )
    rebuilt = unpack_shards(gathered, world_size, [i.shard_shape for i in infos], SHAPES)
    for tensor, full in zip(rebuilt, fulls):
        assert tensor.is_contiguous()
        torch.testing.assert_close(tensor, full)
