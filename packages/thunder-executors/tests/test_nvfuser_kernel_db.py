"""nvFuser's kernel database kept across processes (``nvfuser/kernel_db.py``), on the CPU: the tables
and files nvFuser writes are made by hand here in its format; nothing runs nvFuser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from thunder.core import disk_cache
from thunder.executors.nvfuser import kernel_db

HEADER = "kernel_signature,compile_args,kernel_code_file,cubin_file"


def _process_folder(folder: Path, kernels: dict[str, str]) -> Path:
    """A folder as one process's nvFuser leaves it: kernel_<n>.cu/.cubin named by its own counter."""
    folder.mkdir(parents=True)
    rows = []
    for n, (signature, code) in enumerate(kernels.items()):
        (folder / f"kernel_{n}.cu").write_text(code)
        (folder / f"kernel_{n}.cubin").write_bytes(f"binary of {code}".encode())
        rows.append(f"{signature},-arch=sm_90 -O3,kernel_{n}.cu,kernel_{n}.cubin")
    (folder / "db.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return folder


def _binaries(folder: Path) -> dict[str, bytes]:
    """signature -> the cubin the shared table pairs it with."""
    _, rows = kernel_db.read_table(str(folder))
    return {signature: (folder / row[3]).read_bytes() for (signature, _), row in rows.items()}


def test_two_processes_numbering_alike_keep_each_kernel_with_its_own_binary(tmp_path: Path) -> None:
    """Both processes name their first kernel kernel_0: the shared folder keeps both, each paired
    with its own binary (in one shared folder nvFuser would have overwritten one with the other)."""
    shared = tmp_path / "shared"
    one = _process_folder(tmp_path / "one", {"sigA": "kernel A", "sigB": "kernel B"})
    two = _process_folder(tmp_path / "two", {"sigC": "kernel C", "sigA": "kernel A"})
    assert kernel_db.publish(str(one), str(shared)) == 2
    assert kernel_db.publish(str(two), str(shared)) == 1  # sigA is there already
    assert _binaries(shared) == {s: f"binary of kernel {s[-1]}".encode() for s in ("sigA", "sigB", "sigC")}
    header, _ = kernel_db.read_table(str(shared))
    assert header == HEADER
    assert not any(name.startswith("kernel_0") for name in os.listdir(shared))  # named by content


def test_a_new_process_starts_from_the_shared_kernels(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    kernel_db.publish(str(_process_folder(tmp_path / "one", {"sigA": "kernel A"})), str(shared))
    private = tmp_path / "private"
    kernel_db._seed(str(shared), str(private))
    assert _binaries(private) == {"sigA": b"binary of kernel A"}
    kernel_db._seed(str(tmp_path / "nothing yet"), str(tmp_path / "empty"))  # a first process
    assert kernel_db.read_table(str(tmp_path / "empty")) == (None, {})


def test_rows_naming_missing_files_or_other_folders_are_not_published(tmp_path: Path) -> None:
    one = _process_folder(tmp_path / "one", {"sigA": "kernel A", "sigB": "kernel B"})
    (one / "kernel_1.cubin").unlink()  # a compile that failed half-way
    with open(one / "db.csv", "a") as table:
        table.write("sigC,-arch=sm_90,../elsewhere.cu,../elsewhere.cubin\n")
    shared = tmp_path / "shared"
    assert kernel_db.publish(str(one), str(shared)) == 1
    assert list(_binaries(shared)) == ["sigA"]


def test_the_option_is_added_before_import_unless_the_user_or_the_disk_cache_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernel_db, "_enabled_here", False)
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_lineinfo")
    monkeypatch.delenv(disk_cache.DISABLE_VARIABLE, raising=False)
    kernel_db.enable_before_import()
    assert os.environ["NVFUSER_ENABLE"] == "kernel_lineinfo,kernel_db" and kernel_db._enabled_here

    monkeypatch.setattr(kernel_db, "_enabled_here", False)
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_db")  # the user's own: their $TMPDIR, untouched
    kernel_db.enable_before_import()
    assert not kernel_db._enabled_here

    monkeypatch.delenv("NVFUSER_ENABLE")
    monkeypatch.setenv(disk_cache.DISABLE_VARIABLE, "0")
    kernel_db.enable_before_import()
    assert "NVFUSER_ENABLE" not in os.environ and not kernel_db._enabled_here


def test_the_kernel_db_option_leaves_the_disk_cache_key_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that turned the option on (at nvFuser's import) finds the entries of one that had not."""
    monkeypatch.delenv("NVFUSER_ENABLE", raising=False)
    before = disk_cache._environment()
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_db")
    assert disk_cache._environment() == before
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_lineinfo,kernel_db")
    assert ("NVFUSER_ENABLE", "kernel_lineinfo") in disk_cache._environment()
