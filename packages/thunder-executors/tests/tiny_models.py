"""Small models shared by the executor tests (imported as a module of this folder, see conftest.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    """A GPT-style block: layer norms, causal attention written out, tanh-GELU MLP, residuals."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc, self.out = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dim // self.heads)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        attention = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
