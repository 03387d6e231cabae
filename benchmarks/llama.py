"""A Llama-2-shaped decoder for the benchmarks, in plain torch.nn: RMSNorm computed in float32,
rotary position embedding, SwiGLU MLP, causal scaled_dot_product_attention, untied output head,
float32 cross-entropy. ``LLAMA_SIZES["7b-4layers"]`` is the workload of ../shared/BENCHMARKS.md."""

from __future__ import annotations

import torch
import torch.nn.functional as F

LLAMA_SIZES = {
    "tiny": dict(layers=2, d=64, heads=4, hidden=176, seq=64, vocab=512, batch=2),
    "7b-4layers": dict(layers=4, d=4096, heads=32, hidden=11008, seq=2048, vocab=32000, batch=2),
}


class RMSNorm(torch.nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normalized = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normalized.to(x.dtype) * self.weight


def rotary_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inverse = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inverse)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class LlamaBlock(torch.nn.Module):
    def __init__(self, d: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.attention_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1 = torch.nn.Linear(d, hidden, bias=False)
        self.w3 = torch.nn.Linear(d, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, d = x.shape
        h = self.attention_norm(x)
        q, k, v = (
            w(h).view(batch, seq, self.heads, d // self.heads).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(batch, seq, d))
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(torch.nn.Module):
    def __init__(self, layers: int, d: int, heads: int, hidden: int, seq: int, vocab: int):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(LlamaBlock(d, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        cos, sin = rotary_tables(seq, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embedding(idx)
        seq = idx.shape[1]
        cos, sin = self.cos[:seq].to(x.dtype), self.sin[:seq].to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
