"""Rematerialization inside a program that runs ``loss.backward()`` itself (transforms/program_remat.py).

The whole training step is one trace, never split into forward and backward, so the autograd path's
rematerialization never saw it: a SwiGLU product the backward reads stayed alive from the forward
to the backward. Here the backward recomputes cheap forward work from what it reads anyway. On the
CPU nvFuser's claims decide what is cheap (its regions fall back to torch there); every case runs the
jitted step several times against eager's step.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F

import thunder
from thunder.core.fusion_fallback import ExecutorFallbackWarning
from thunder.core.symbol import BoundSymbol
from thunder.executors.nvfuser.executor import NvFuserExecutor


class NvFuserClaimsOnCpu(NvFuserExecutor):
    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)


class SwiGLU(torch.nn.Module):
    def __init__(self, d: int = 8, hidden: int = 16):
        super().__init__()
        self.w1 = torch.nn.Linear(d, hidden, bias=False)
        self.w3 = torch.nn.Linear(d, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w2(F.silu(self.w1(x)) * self.w3(x))


def _step(net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[torch.Tensor], torch.Tensor]:
    def step(x: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = net(net(x)).square().mean()
        loss.backward()
        optimizer.step()
        return loss

    return step


def _remat_headers(jitted: Callable) -> list[str]:
    return [
        t.header
        for t in thunder.last_traces(jitted)
        if t.header.startswith("Rematerialization in the program")
    ]


def _against_eager(make: Callable[[], torch.nn.Module], steps: int = 3, **options: object) -> Callable:
    torch.manual_seed(0)
    net = make()
    reference = copy.deepcopy(net)
    jitted = thunder.jit(
        _step(net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)),
        executors=[NvFuserClaimsOnCpu("nvfuser_claims_on_cpu"), "torch"],
        **options,
    )
    eager = _step(reference, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9))
    for _ in range(steps):
        x = torch.randn(4, 8)
        with warnings.catch_warnings():  # on the CPU every region falls back, as expected there
            warnings.simplefilter("ignore", ExecutorFallbackWarning)
            torch.testing.assert_close(jitted(x.clone()), eager(x.clone()))
    for p, q in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
    return jitted


def test_the_backward_recomputes_the_swiglu_product() -> None:
    jitted = _against_eager(SwiGLU)
    headers = _remat_headers(jitted)  # later passes that change nothing else keep the header
    assert headers and "recomputes 4 forward ops" in headers[0]
    # the product silu(a) * b is made twice: in the forward for w2, in the backward for w2's gradient
    trace = next(
        t for t in thunder.last_traces(jitted) if t.header.startswith("Rematerialization in the program")
    )
    silus = [b for b in trace.bound_symbols if b.symbol.name == "silu"]
    assert len(silus) == 4, [str(b) for b in silus]  # two layers' forward, and their recomputation


def test_the_recomputation_stays_in_the_backward() -> None:
    """Region formation once moved the recomputed product into the forward's region that reads the
    same two matmul outputs (region_moves.py: a move that saved a launch), so the forward made the
    product twice and held the copy until the backward: the recomputation saved nothing, and on the
    4-layer Llama the first step's peak grew by 0.6 GiB. The forward's regions hand on one tensor
    each (the product, for w2), and the loss's gradient seed comes after them."""
    jitted = _against_eager(SwiGLU)
    symbols = thunder.last_traces(jitted)[-1].bound_symbols
    seed = next(i for i, b in enumerate(symbols) if b.symbol.name == "full")
    forward_regions = [b for b in symbols[:seed] if b.symbol.name.startswith("nvFusion")]
    hidden = [[p for p in b.proxy_outputs() if tuple(p.shape) == (4, 16)] for b in forward_regions]
    assert [len(outputs) for outputs in hidden if outputs] == [1, 1], [
        str(b).splitlines()[0] for b in forward_regions
    ]


def test_off_recomputes_nothing() -> None:
    jitted = _against_eager(SwiGLU, rematerialization="off")
    assert not _remat_headers(jitted)


class ScaledByBuffer(torch.nn.Module):
    """A cheap forward op reads a buffer that the forward then writes in place: a recomputation of
    ``y + scale`` after the write would read the new scale. program_remat.py recomputes nothing that
    reads written memory (and the copy-back, placed after the last read of the old value, would
    follow a recomputation anyway); the values must be eager's either way."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        h = y + self.scale  # add saves neither input for its backward
        with torch.no_grad():
            self.scale.mul_(1.5)
        # the backward reads y anyway: h would be recomputed from it, at no cost, but for the write
        return h * h.sigmoid() + y * y.sigmoid()


def test_no_recomputation_reads_memory_written_in_place() -> None:
    torch.manual_seed(0)
    net = ScaledByBuffer()
    reference = copy.deepcopy(net)

    def step_of(n: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
        def step(x: torch.Tensor) -> torch.Tensor:
            n.zero_grad(set_to_none=True)
            loss = n(x).sum()
            loss.backward()
            return loss

        return step

    jitted = thunder.jit(step_of(net), executors=[NvFuserClaimsOnCpu("nvfuser_claims_on_cpu"), "torch"])
    eager = step_of(reference)
    for _ in range(3):
        x = torch.randn(4, 8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExecutorFallbackWarning)
            torch.testing.assert_close(jitted(x), eager(x))
        torch.testing.assert_close(net.scale, reference.scale)
        for p, q in zip(net.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
