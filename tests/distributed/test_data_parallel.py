"""thunder.distributed (DDP, FSDP ZeRO-2/3) and PyTorch's DDP/FSDP2 around thunder, on 2 gloo processes.

Two processes run every scenario of ``workers.py`` once (starting them costs more than the
scenarios); each scenario compares losses, gradients and parameters with single-process
training over a few optimizer steps. One test reports them all, naming each failed scenario with
its traceback: a test per scenario would, under pytest-xdist, start the processes once per worker. A hang fails
after ``TIMEOUT_S`` instead of blocking CI (and gloo's own timeout ends a stuck collective).

The processes are started with ``subprocess`` running ``workers.py`` by path, rather than with
``torch.multiprocessing.spawn``: spawn pickles the worker function by module name, and under
pytest's importlib import mode a test module cannot be imported by name in a child process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKERS = Path(__file__).with_name("workers.py")
WORLD_SIZE = 2
TIMEOUT_S = 240
SCENARIOS = [
    "ddp_mlp",
    "ddp_gpt",
    "ddp_no_sync",
    "fsdp_zero2_mlp",
    "fsdp_zero3_mlp",
    "fsdp_zero2_gpt",
    "fsdp_zero3_gpt",
    "fsdp_zero3_gpt_one_bucket",
    "torch_ddp_around_thunder",
    "fsdp2_around_thunder",
]

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
    reason="needs torch.distributed with the gloo backend",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out_dir: Path, device: str, scenarios: list[str]) -> list[str]:
    """Run the workers; returns their logs. Kills both if either takes longer than TIMEOUT_S."""
    port = _free_port()
    env = {**os.environ, "WORLD_SIZE": str(WORLD_SIZE), "OMP_NUM_THREADS": "1", "DEVICE": device}
    processes, logs = [], []
    for rank in range(WORLD_SIZE):
        log = open(out_dir / f"log{rank}.txt", "w")  # noqa: SIM115 -- closed once the process ends
        logs.append(log)
        processes.append(
            subprocess.Popen(
                [sys.executable, str(WORKERS), str(out_dir), str(port), *scenarios],
                env={**env, "RANK": str(rank)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        )
    try:
        for process in processes:
            process.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
    finally:
        for log in logs:
            log.close()
    return [(out_dir / f"log{rank}.txt").read_text() for rank in range(WORLD_SIZE)]


def test_data_parallel_matches_single_process_training(tmp_path: Path) -> None:
    _check_scenarios(tmp_path, "cpu")


_TWO_GPUS = pytest.mark.skipif(
    not torch.cuda.is_available()
    or torch.cuda.device_count() < WORLD_SIZE
    or not torch.distributed.is_nccl_available(),
    reason=f"needs {WORLD_SIZE} GPUs and NCCL",
)


@_TWO_GPUS
def test_data_parallel_on_gpus_matches_single_process_training(tmp_path: Path) -> None:
    """The scenarios on one GPU per process over NCCL, with nvFuser claiming what it fuses."""
    _check_scenarios(tmp_path, "cuda")


def _check_scenarios(tmp_path: Path, device: str, scenarios: list[str] = SCENARIOS) -> None:
    logs = _launch(tmp_path, device, scenarios)
    failures = []
    for rank in range(WORLD_SIZE):
        path = tmp_path / f"rank{rank}.json"
        if not path.exists():
            pytest.fail(f"process {rank} did not finish (crashed or hung); its log:\n{logs[rank][-4000:]}")
        outcome = json.loads(path.read_text())
        failures += [f"process {rank}, {s}:\n{outcome.get(s)}" for s in scenarios if outcome.get(s) != "ok"]
    assert not failures, (
        f"{len(failures)} failed (of {len(scenarios)} scenarios x {WORLD_SIZE}):\n" + "\n".join(failures)
    )


def test_needs_a_process_group() -> None:
    import thunder.distributed

    if torch.distributed.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        thunder.distributed.ddp(torch.nn.Linear(2, 2))
