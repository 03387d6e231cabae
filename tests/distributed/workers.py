"""One process of the 2-process data-parallel tests; test_data_parallel.py starts two.

    python workers.py OUT_DIR PORT SCENARIO [SCENARIO ...]     # with RANK and WORLD_SIZE set

On the CPU over gloo; with ``DEVICE=cuda``, on GPU ``RANK`` over NCCL, with thunder's default
executors (nvFuser where installed), as data-parallel training runs on GPUs.

Each scenario trains a small model data-parallel for a few optimizer steps and compares, on
every step, the loss, the gradients and the parameters with single-process training of a copy
of the model on the whole batch (every process computes that reference itself). The result of
each scenario ("ok" or the traceback) goes to OUT_DIR/rank<RANK>.json.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import sys
import traceback
from collections.abc import Callable

import torch
import torch.distributed as torch_dist
import torch.nn.functional as F

import thunder
import thunder.distributed

STEPS = 3
DEVICE = os.environ.get("DEVICE", "cpu")
# on GPUs, fusion executors and cuDNN/flash attention round differently from the reference's kernels
TOLERANCE = dict(rtol=1e-4, atol=1e-5) if DEVICE == "cpu" else dict(rtol=1e-3, atol=1e-4)


# Models ------------------------------------------------------------------------------------------


def mlp() -> torch.nn.Module:
    # odd sizes: FSDP pads dim 0 to a multiple of the world size
    return torch.nn.Sequential(torch.nn.Linear(7, 9), torch.nn.ReLU(), torch.nn.Linear(9, 5))


class Block(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.fc_proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, seq, d))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class TinyGPT(torch.nn.Module):
    """GPT-2's structure (tied embeddings, pre-LayerNorm, causal attention), tiny and odd-sized."""

    def __init__(self, vocab: int = 33, d: int = 16, heads: int = 2, layers: int = 2, seq: int = 8):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def mlp_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + step)
    x, y = (
        torch.randn(6, 7, generator=generator, device="cpu"),
        torch.randn(6, 5, generator=generator, device="cpu"),
    )
    return x.to(DEVICE), y.to(DEVICE)


def gpt_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(200 + step)
    idx = torch.randint(0, 33, (4, 8), generator=generator, device="cpu")
    return idx.to(DEVICE), torch.randint(0, 33, (4, 8), generator=generator, device="cpu").to(DEVICE)


def mlp_loss(model: Callable, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(model(x), y)


def gpt_loss(model: Callable, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(idx).flatten(0, 1), targets.flatten())


WORKLOADS = {"mlp": (mlp, mlp_batch, mlp_loss), "gpt": (TinyGPT, gpt_batch, gpt_loss)}


# Comparing with single-process training ------------------------------------------------------------


def my_part(t: torch.Tensor) -> torch.Tensor:
    return t.chunk(torch_dist.get_world_size())[torch_dist.get_rank()]


def my_shard(full: torch.Tensor, shard_rows: int) -> torch.Tensor:
    """Rows [rank * shard_rows, (rank + 1) * shard_rows) of ``full`` padded with zero rows."""
    padding = shard_rows * torch_dist.get_world_size() - full.shape[0]
    padded = torch.cat([full, full.new_zeros((padding, *full.shape[1:]))]) if padding else full
    rank = torch_dist.get_rank()
    return padded[rank * shard_rows : (rank + 1) * shard_rows]


def average(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().clone()
    torch_dist.all_reduce(t)
    return t / torch_dist.get_world_size()


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, **TOLERANCE, msg=lambda m: f"{what}: {m}")


def train_and_compare(
    workload: str,
    prepare: Callable[[torch.nn.Module], torch.nn.Module],
    as_reference: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lambda mine, full: full,
    local: Callable[[torch.Tensor], torch.Tensor] = lambda t: t,
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Train ``prepare(model)`` on this process's part of each batch, and a copy on the whole batch.

    ``as_reference(parameter, full)`` is what this process's parameter (or gradient) should equal,
    given the reference's; ``local`` turns a parameter or gradient into a plain local tensor.
    """
    make_model, batch, loss_of = WORKLOADS[workload]
    torch.manual_seed(0)
    model = make_model().to(DEVICE)
    reference = copy.deepcopy(model)
    names = [name for name, _ in reference.named_parameters()]
    compiled = prepare(model)
    # SGD, not Adam: Adam scales gradients that are zero up to rounding (GPT's key bias) into steps
    optimizer = torch.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        inputs, targets = batch(step)
        loss = loss_of(compiled, my_part(inputs), my_part(targets))
        loss.backward()
        expected_loss = loss_of(reference, inputs, targets)
        expected_loss.backward()
        assert_close(average(loss), expected_loss.detach(), f"loss at step {step}")
        mine = dict(model.named_parameters())  # the shards after fsdp, DTensors after fully_shard
        for name, expected in zip(names, reference.parameters()):
            grad = local(mine[name].grad)
            assert_close(grad, as_reference(grad, expected.grad), f"gradient of {name} at step {step}")
        optimizer.step()
        reference_optimizer.step()
        optimizer.zero_grad()
        reference_optimizer.zero_grad()
        for name, expected in zip(names, reference.parameters()):
            param = local(mine[name].detach())
            assert_close(param, as_reference(param, expected.detach()), f"{name} after step {step}")
    return compiled, reference


def check_inference(workload: str, compiled: torch.nn.Module, reference: torch.nn.Module) -> None:
    """Under no_grad the computation has no backward (FSDP gathers there too)."""
    _, batch, loss_of = WORKLOADS[workload]
    inputs, targets = batch(STEPS)
    with torch.no_grad():
        expected = loss_of(reference, my_part(inputs), my_part(targets))
        assert_close(loss_of(compiled, my_part(inputs), my_part(targets)), expected, "loss under no_grad")


def shard_of(mine: torch.Tensor, full: torch.Tensor) -> torch.Tensor:
    return full if mine.ndim == 0 else my_shard(full, mine.shape[0])


def collectives_interleaved(trace: thunder.Trace, collective: str) -> None:
    """The trace starts ``collective`` before its last matrix product: communication overlaps compute."""
    lines = str(trace).splitlines()
    starts = [i for i, line in enumerate(lines) if f"= {collective}(" in line]
    products = [i for i, line in enumerate(lines) if "torch.matmul(" in line or "linear(" in line]
    assert starts, f"no {collective} in the trace:\n{trace}"
    assert products and starts[0] < products[-1], f"{collective} only after the compute:\n{trace}"


# Scenarios -----------------------------------------------------------------------------------------


def ddp(workload: str) -> None:
    compiled, reference = train_and_compare(
        workload, lambda m: thunder.jit(thunder.distributed.ddp(m, bucket_size_in_mb=1e-4))
    )
    backward = thunder.last_backward_traces(compiled)
    assert "dist.all_reduce(" in str(backward[0]), backward[0]  # the symbol, before the executors claim it
    collectives_interleaved(backward[-1], "all_reduce")
    check_inference(workload, compiled, reference)


def ddp_no_sync() -> None:
    """Gradient accumulation: two micro-batches under no_sync, one outside, then one step."""
    torch.manual_seed(0)
    model = mlp().to(DEVICE)
    reference, local_reference = copy.deepcopy(model), copy.deepcopy(model)
    compiled = thunder.jit(thunder.distributed.ddp(model))
    batches = [mlp_batch(step) for step in range(3)]
    with compiled.no_sync():
        for x, y in batches[:2]:
            mlp_loss(compiled, my_part(x), my_part(y)).backward()
            mlp_loss(local_reference, my_part(x), my_part(y)).backward()
        for name, param in model.named_parameters():  # nothing was communicated yet
            assert_close(param.grad, local_reference.get_parameter(name).grad, f"local gradient of {name}")
    x, y = batches[2]
    mlp_loss(compiled, my_part(x), my_part(y)).backward()
    for x, y in batches:
        mlp_loss(reference, x, y).backward()
    for name, param in model.named_parameters():
        assert_close(param.grad, reference.get_parameter(name).grad, f"accumulated gradient of {name}")


def fsdp(workload: str, strategy: str, bucket_size_in_mb: float) -> None:
    """Small buckets: a collective per parameter or per few (packed); large: one bucket for all."""
    compiled, reference = train_and_compare(
        workload,
        lambda m: thunder.jit(
            thunder.distributed.fsdp(m, sharding_strategy=strategy, bucket_size_in_mb=bucket_size_in_mb)
        ),
        as_reference=shard_of,
    )
    forward, backward = thunder.last_traces(compiled)[-1], thunder.last_backward_traces(compiled)[-1]
    assert "all_gather(" in str(forward), forward
    assert ("all_gather(" in str(backward)) == (strategy == "ZERO3"), backward
    if bucket_size_in_mb < 1:
        collectives_interleaved(backward, "reduce_scatter")
    check_inference(workload, compiled, reference)
    assert "all_gather(" in str(thunder.last_traces(compiled)[-1])
    try:
        with compiled.no_sync():
            pass
    except NotImplementedError:
        pass
    else:
        raise AssertionError("no_sync under thunder.distributed.fsdp should say it is not supported")


def torch_ddp_around_thunder() -> None:
    wrap = torch.nn.parallel.DistributedDataParallel
    train_and_compare("mlp", lambda m: wrap(thunder.jit(m)))
    try:
        thunder.jit(wrap(mlp().to(DEVICE)))
    except TypeError as error:
        assert "DistributedDataParallel(thunder.jit(model))" in str(error), error
    else:
        raise AssertionError("thunder.jit(DistributedDataParallel(model)) should explain the other order")


def fsdp2_around_thunder() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    def full(t: torch.Tensor) -> torch.Tensor:
        return t.full_tensor() if hasattr(t, "full_tensor") else t

    # fully_shard's default mesh is on the GPU wherever CUDA is available, and it moves the module there
    mesh = init_device_mesh(DEVICE, (torch_dist.get_world_size(),))
    train_and_compare("mlp", lambda m: fully_shard(thunder.jit(m), mesh=mesh), local=full)
    try:
        thunder.jit(fully_shard(mlp().to(DEVICE), mesh=mesh))
    except TypeError as error:
        assert "fully_shard(thunder.jit(model))" in str(error), error
    else:
        raise AssertionError("thunder.jit(fully_shard(model)) should explain the other order")


SCENARIOS: dict[str, Callable[[], None]] = {
    "ddp_mlp": lambda: ddp("mlp"),
    "ddp_gpt": lambda: ddp("gpt"),
    "ddp_no_sync": ddp_no_sync,
    "fsdp_zero2_mlp": lambda: fsdp("mlp", "ZERO2", bucket_size_in_mb=1e-4),
    "fsdp_zero3_mlp": lambda: fsdp("mlp", "ZERO3", bucket_size_in_mb=25),
    "fsdp_zero2_gpt": lambda: fsdp("gpt", "ZERO2", bucket_size_in_mb=0.004),
    "fsdp_zero3_gpt": lambda: fsdp("gpt", "ZERO3", bucket_size_in_mb=0.004),
    "fsdp_zero3_gpt_one_bucket": lambda: fsdp("gpt", "ZERO3", bucket_size_in_mb=25),
    "torch_ddp_around_thunder": torch_ddp_around_thunder,
    "fsdp2_around_thunder": fsdp2_around_thunder,
}


def main() -> None:
    out_dir, port, *scenarios = sys.argv[1:]
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if DEVICE == "cuda":
        torch.cuda.set_device(rank)
    torch_dist.init_process_group(
        "nccl" if DEVICE == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )  # fmt: skip
    results = {}
    for scenario in scenarios:
        try:
            SCENARIOS[scenario]()
            results[scenario] = "ok"
        except Exception:
            results[scenario] = traceback.format_exc()
        torch_dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    torch_dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: gloo's threads have been seen to abort the process there
    # ("terminate called without an active exception"), after all the work was done.
    os._exit(0)


if __name__ == "__main__":
    main()
