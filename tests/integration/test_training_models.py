"""Training transformer-shaped models written with torch.nn through thunder, against eager.

A 12-layer GPT-style model trains for a few steps with gradients equal to eager's, and a
Llama-style block (RMSNorm, rotary embedding, SwiGLU MLP) saves no more bytes for its backward
than eager PyTorch autograd does; both are measured the same way, by PyTorch's saved-tensor hooks.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

import thunder


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).split(dim, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(batch, seq, dim))


class GPTBlock(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, 4 * dim)
        self.proj = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab: int = 64, seq: int = 16, dim: int = 32, heads: int = 4, layers: int = 12):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)
        self.wpe = torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList(GPTBlock(dim, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def test_gpt_12_layers_trains_with_eager_gradients() -> None:
    torch.manual_seed(0)
    model = GPT()
    reference = copy.deepcopy(model)
    jmodel = thunder.jit(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    for _ in range(3):
        idx = torch.randint(0, 64, (2, 16))
        targets = torch.randint(0, 64, (2, 16))
        losses = []
        for net, opt in ((jmodel, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            loss = F.cross_entropy(net(idx).flatten(0, 1), targets.flatten())
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1])
        for ours, eager in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours.grad, eager.grad, atol=1e-5, rtol=1e-4)
        optimizer.step()
        reference_optimizer.step()
    assert thunder.last_backward_traces(jmodel)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(torch.nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 172, seq: int = 32):
        super().__init__()
        self.heads = heads
        self.attention_norm = RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, dim, bias=False)
        self.wk = torch.nn.Linear(dim, dim, bias=False)
        self.wv = torch.nn.Linear(dim, dim, bias=False)
        self.wo = torch.nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        head_dim = dim // heads
        frequencies = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), frequencies)
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos())
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin())
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        h = self.attention_norm(x)
        q, k, v = (
            w(h).view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        scores = q @ k.transpose(-2, -1) / math.sqrt(dim // self.heads) + self.mask
        attention = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, seq, dim)
        x = x + self.wo(attention)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def saved_bytes_of_forward(fn, *inputs: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Bytes of the distinct tensors autograd keeps for the backward while ``fn`` runs."""
    storages: dict[tuple, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    return sum(storages.values()), out


def test_llama_block_saves_no_more_than_eager() -> None:
    torch.manual_seed(0)
    block = LlamaBlock()
    jblock = thunder.jit(block)
    x = torch.randn(2, 32, 64, requires_grad=True)
    jblock(x)  # compile first: compilation itself saves nothing
    eager_bytes, eager_out = saved_bytes_of_forward(block, x)
    thunder_bytes, thunder_out = saved_bytes_of_forward(jblock, x)
    torch.testing.assert_close(thunder_out, eager_out)
    (eager_grad,) = torch.autograd.grad(eager_out.sum(), x)
    (thunder_grad,) = torch.autograd.grad(thunder_out.sum(), x)
    torch.testing.assert_close(thunder_grad, eager_grad)
    print(f"saved for backward: eager {eager_bytes} bytes, thunder {thunder_bytes} bytes")
    assert thunder_bytes <= eager_bytes
