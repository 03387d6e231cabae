"""The on-disk cache of compiled programs (thunder/core/disk_cache.py): a second process loads what
the first compiled and computes what eager PyTorch computes; a changed program, option, dtype or
grad mode never loads another's entry; damaged entries are ignored; clearing works; concurrent
writers never leave a partial entry."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

import thunder
from thunder.core import disk_cache
from thunder.core.executor import OperatorExecutor


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("THUNDER_CACHE_DIR", str(folder))
    monkeypatch.delenv("THUNDER_DISK_CACHE", raising=False)
    return folder


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "entries").glob("*/*.pkl"))


_PROGRAM = textwrap.dedent(
    """
    import json, sys
    import torch
    import thunder

    device = sys.argv[1]
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    ).to(device)
    x = torch.randn(3, 8, device=device)
    jitted = thunder.jit(model)
    out = jitted(x)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected)
    for grad, p in zip(grads, model.parameters()):
        torch.testing.assert_close(grad, p.grad)
    stats = thunder.compile_stats(jitted)
    print(json.dumps({"hits": stats.disk_cache_hits, "misses": stats.disk_cache_misses,
                      "writes": stats.disk_cache_writes, "skip": stats.disk_cache_skip_reason,
                      "forward": str(thunder.last_traces(jitted)[-1]),
                      "backward": str(thunder.last_backward_traces(jitted)[-1])}))
    """
)


def _counts(outcome: dict) -> tuple[int, int, int]:
    return outcome["hits"], outcome["misses"], outcome["writes"]


def _run_twice(tmp_path: Path, source: str) -> tuple[dict, dict]:
    """``source`` run as a program in two processes, one after the other, on the CPU."""
    script = tmp_path / "program.py"
    script.write_text(source)
    return _run_program(script, "cpu"), _run_program(script, "cpu")


def _run_program(path: Path, device: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(path), device], capture_output=True, text=True, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_a_second_process_loads_the_entry_and_matches_eager(
    tmp_path: Path, cache_folder: Path, device: str
) -> None:
    """With CUDA: the default executors' fusion regions (nvFuser or Triton) are stored and loaded too."""
    script = tmp_path / "program.py"
    script.write_text(_PROGRAM)
    first = _run_program(script, device)
    assert (first["hits"], first["misses"], first["writes"]) == (0, 1, 1), first["skip"]
    assert len(_entries(cache_folder)) == 1
    second = _run_program(script, device)  # forward and backward checked against eager in the process
    assert (second["hits"], second["misses"], second["writes"]) == (1, 0, 0)
    # the loaded traces are the ones the first process made
    assert (second["forward"], second["backward"]) == (first["forward"], first["backward"])


_TRAINING_STEP = textwrap.dedent(
    """
    import copy, json
    import torch
    import thunder

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    reference = copy.deepcopy(net)

    def step_of(model, optimizer):
        def step(x):
            optimizer.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            optimizer.step()
            return loss
        return step

    jitted = thunder.jit(step_of(net, torch.optim.AdamW(net.parameters(), lr=0.01)))
    eager = step_of(reference, torch.optim.AdamW(reference.parameters(), lr=0.01))
    for i in range(4):
        x = torch.randn(3, 8, generator=torch.Generator().manual_seed(i))
        torch.testing.assert_close(jitted(x), eager(x))
    for p, q in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
    stats = thunder.compile_stats(jitted)
    print(json.dumps({"hits": stats.disk_cache_hits, "misses": stats.disk_cache_misses,
                      "writes": stats.disk_cache_writes, "skip": stats.disk_cache_skip_reason}))
    """
)


def test_a_whole_training_step_loads_in_a_second_process(tmp_path: Path, cache_folder: Path) -> None:
    """The step's two programs (the first creates AdamW's state, the second updates it) are stored
    and loaded, each checked against eager's step over 4 steps. Their keys held the names made
    before ``backward`` as a frozenset, pickled in the process's string-hash order, and the
    learning rate's number proxy held a closure: no process ever loaded the other's entries."""
    first, second = _run_twice(tmp_path, _TRAINING_STEP)
    assert _counts(first) == (0, 2, 2), first["skip"]
    assert _counts(second) == (2, 0, 0), second["skip"]


_LAYOUT_CHECKED = textwrap.dedent(
    """
    import json
    import torch
    import torch.nn.functional as F
    import thunder

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = torch.nn.Embedding(64, 16), torch.nn.Linear(16, 64, bias=False)

        def forward(self, idx, targets):
            logits = self.head(torch.tanh(self.embed(idx)))
            # the fused linear cross entropy (a transform, after the frontend) flattens the targets,
            # an input: the program checks eager's layout decision there (layouts.check)
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    torch.manual_seed(0)
    model = TinyLM()
    idx, targets = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 8))
    jitted = thunder.jit(model)
    loss = jitted(idx, targets)
    assert "layouts.check(targets" in str(thunder.last_traces(jitted)[-1])
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(idx, targets)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for grad, p in zip(grads, model.parameters()):
        torch.testing.assert_close(grad, p.grad)
    stats = thunder.compile_stats(jitted)
    print(json.dumps({"hits": stats.disk_cache_hits, "misses": stats.disk_cache_misses,
                      "writes": stats.disk_cache_writes, "skip": stats.disk_cache_skip_reason}))
    """
)


def test_a_program_with_symbols_made_on_first_use_loads_in_a_second_process(
    tmp_path: Path, cache_folder: Path
) -> None:
    """``layouts.check`` (and the epilogue's ``inplace.*``) are made on their first use: the entry
    referred to ``layouts._check_symbol``, a global still None in the loading process, and the loaded
    program crashed in codegen ('NoneType' object has no attribute 'printer'). A bias-free output head
    with a cross entropy is enough: the second process of benchmarks' Llama and GPT-2 (module path,
    CPU) failed to compile."""
    first, second = _run_twice(tmp_path, _LAYOUT_CHECKED)
    assert _counts(first) == (0, 1, 1), first["skip"]
    assert _counts(second) == (1, 0, 0), second["skip"]


def _scaled(c: float):
    return lambda x: torch.sin(x) * c + 1


def _stats(fn, *args, **options):
    jitted = thunder.jit(fn, **options)
    result = jitted(*args)
    return jitted, result, thunder.compile_stats(jitted)


def test_the_same_program_loads_and_the_traces_are_the_same() -> None:
    x = torch.randn(4, 4)
    first, expected, stats = _stats(_scaled(2.0), x)
    assert (stats.disk_cache_misses, stats.disk_cache_writes) == (1, 1), stats.disk_cache_skip_reason
    second, result, stats = _stats(_scaled(2.0), x)  # another jitted function: its memory cache is empty
    assert (stats.disk_cache_hits, stats.disk_cache_misses) == (1, 0)
    torch.testing.assert_close(result, expected)
    assert str(thunder.last_traces(second)[-1]) == str(thunder.last_traces(first)[-1])


@pytest.mark.parametrize(
    "change",
    ["constant", "body", "dtype", "shape", "requires_grad", "grad mode", "option", "executors"],
)
def test_a_changed_program_does_not_load_the_entry(change: str) -> None:
    x = torch.randn(4, 4)
    _stats(_scaled(2.0), x)
    fn, args, options = _scaled(2.0), (x,), {}
    if change == "constant":
        fn = _scaled(3.0)
    elif change == "body":
        fn = lambda x: torch.cos(x) * 2.0 + 1  # noqa: E731
    elif change == "dtype":
        args = (x.double(),)
    elif change == "shape":
        args = (torch.randn(4, 5),)
    elif change == "requires_grad":
        args = (x.clone().requires_grad_(),)
    elif change == "option":
        args, options = (x.clone().requires_grad_(),), {"rematerialization": "off"}
        _stats(_scaled(2.0), *args)  # the same call with the default option, stored first
    elif change == "executors":
        options = {"executors": [OperatorExecutor("claims_nothing")]}  # listed before the defaults
    if change == "grad mode":
        args = (x.clone().requires_grad_(),)
        _stats(fn, *args)
        with torch.no_grad():
            jitted, result, stats = _stats(fn, *args)
    else:
        jitted, result, stats = _stats(fn, *args, **options)
    assert (stats.disk_cache_hits, stats.disk_cache_misses) == (0, 1)
    torch.testing.assert_close(result, fn(*args))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped byte", "empty"])
def test_damaged_entries_are_ignored_and_replaced(cache_folder: Path, damage: str) -> None:
    x = torch.randn(4, 4)
    _stats(_scaled(2.0), x)
    (entry,) = _entries(cache_folder)
    data = entry.read_bytes()
    damaged = {
        "truncated": data[: len(data) // 2],
        "garbage": b"not an entry",
        "flipped byte": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
        "empty": b"",
    }[damage]
    entry.write_bytes(damaged)
    jitted, result, stats = _stats(_scaled(2.0), x)
    assert (stats.disk_cache_hits, stats.disk_cache_misses, stats.disk_cache_writes) == (0, 1, 1)
    torch.testing.assert_close(result, _scaled(2.0)(x))
    assert entry.read_bytes() == data  # written again, whole


def test_clear_cache_deletes_the_folder(cache_folder: Path) -> None:
    x = torch.randn(4, 4)
    _stats(_scaled(2.0), x)
    assert thunder.cache_dir() == str(cache_folder) and _entries(cache_folder)
    thunder.clear_cache()
    assert not cache_folder.exists()
    _, _, stats = _stats(_scaled(2.0), x)
    assert (stats.disk_cache_hits, stats.disk_cache_misses) == (0, 1)


def test_the_cache_can_be_turned_off(cache_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(4, 4)
    _, _, stats = _stats(_scaled(2.0), x, disk_cache=False)
    assert not cache_folder.exists() and stats.disk_cache_misses == 0
    monkeypatch.setenv("THUNDER_DISK_CACHE", "0")
    _stats(_scaled(2.0), x)
    assert not cache_folder.exists()


def test_what_cannot_be_keyed_is_not_cached_and_says_why(cache_folder: Path) -> None:
    x = torch.randn(4, 4)
    _, result, stats = _stats(_scaled(2.0), x, transforms=[lambda trace: trace])
    assert stats.disk_cache_skips == 1 and "user transforms" in stats.disk_cache_skip_reason
    assert not cache_folder.exists()
    torch.testing.assert_close(result, _scaled(2.0)(x))


def test_concurrent_writers_never_leave_a_partial_entry(cache_folder: Path) -> None:
    key = "ab" * 32
    payloads = [pickle.dumps(bytes([i]) * 2_000_000) for i in range(4)]
    seen: list = []
    errors: list = []

    def write(payload: bytes) -> None:
        try:
            for _ in range(5):
                disk_cache._write(key, payload)
        except Exception as error:  # noqa: BLE001 -- reported below
            errors.append(error)

    def read() -> None:
        for _ in range(50):
            seen.append(disk_cache._read(key))

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads] + [threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    whole = {pickle.loads(p) for p in payloads}
    assert all(value is None or value in whole for value in seen)
    assert disk_cache._read(key) in whole
    assert [p.name for p in (cache_folder / "entries" / "ab").iterdir()] == [f"{key}.pkl"]  # no leftovers


def test_triton_keeps_its_kernels_under_the_cache_folder(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("triton")
    from thunder.executors.triton.cache import use_thunder_cache_dir

    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    use_thunder_cache_dir()
    assert os.environ["TRITON_CACHE_DIR"] == str(cache_folder / "triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    use_thunder_cache_dir()
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/else"


def test_past_the_size_limit_the_least_recently_used_entries_go(cache_folder: Path) -> None:
    keys = [f"{i:02x}" * 32 for i in range(3)]
    for age, key in zip((300, 200, 100), keys):  # keys[0] written first
        disk_cache._write(key, pickle.dumps(bytes(2**20)))
        path = disk_cache._entry_path(key)
        os.utime(path, (os.stat(path).st_atime, os.stat(path).st_mtime - age))
    assert disk_cache._read(keys[0]) is not None  # used now: the most recently used
    disk_cache._prune(int(2.5 * 2**20))  # three entries of 1 MiB: down to 3/4 of the limit
    assert [disk_cache._read(key) is not None for key in keys] == [True, False, False]
