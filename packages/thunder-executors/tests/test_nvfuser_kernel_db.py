"""nvFuser's kernel database kept across processes (``nvfuser/kernel_db.py``), on the CPU: the tables
and files nvFuser writes are made by hand here in its format; nothing runs nvFuser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from thunder.core import disk_cache
from thunder.executors.nvfuser import kernel_db

HEADER = "kernel_signature,compile_args,kernel_code_file,cubin_file"


ARGS = "--std=c++17 --gpu-architecture=sm_90a --fmad=true -DNDEBUG"


def _process_folder(
    folder: Path, kernels: dict[str, str], signature: str | None = None, args: str = ARGS
) -> Path:
    """A folder as one process's nvFuser leaves it: kernel_<n>.cu/.cubin named by its own counter.
    ``kernels``: name -> source; the signature is the name unless given (nvFuser's mangled kernel
    names repeat across kernels of the same parameter types)."""
    folder.mkdir(parents=True)
    rows = []
    for n, (name, code) in enumerate(kernels.items()):
        (folder / f"kernel_{n}.cu").write_text(code)
        (folder / f"kernel_{n}.cubin").write_bytes(f"binary of {code} with {args}".encode())
        rows.append(f"{signature or name},{args},kernel_{n}.cu,kernel_{n}.cubin")
    (folder / "db.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return folder


def _binaries(folder: Path) -> dict[tuple[str, str], bytes]:
    """(source, compile arguments) -> the cubin the table pairs them with, as nvFuser looks them up."""
    _, rows = kernel_db.read_table(str(folder))
    return {((folder / row[2]).read_text(), row[1]): (folder / row[3]).read_bytes() for row in rows.values()}


def _expected(*sources: str, args: str = ARGS) -> dict[tuple[str, str], bytes]:
    return {(code, args): f"binary of {code} with {args}".encode() for code in sources}


def test_two_processes_numbering_alike_keep_each_kernel_with_its_own_binary(tmp_path: Path) -> None:
    """Both processes name their first kernel kernel_0: the shared folder keeps both, each paired
    with its own binary (in one shared folder nvFuser would have overwritten one with the other)."""
    shared = tmp_path / "shared"
    one = _process_folder(tmp_path / "one", {"sigA": "kernel A", "sigB": "kernel B"})
    two = _process_folder(tmp_path / "two", {"sigC": "kernel C", "sigA": "kernel A"})
    assert kernel_db.publish(str(one), str(shared)) == 2
    assert kernel_db.publish(str(two), str(shared)) == 1  # sigA is there already
    assert _binaries(shared) == _expected("kernel A", "kernel B", "kernel C")
    header, _ = kernel_db.read_table(str(shared))
    assert header == HEADER
    assert not any(name.startswith("kernel_0") for name in os.listdir(shared))  # named by content


def test_kernels_of_one_signature_or_one_source_are_kept_apart(tmp_path: Path) -> None:
    """nvFuser finds a kernel by its source and compile arguments; its signature (a mangled name such
    as ``nvfuser_resize_f0_c1_r0_g0`` with the parameter types) repeats across kernels."""
    shared = tmp_path / "shared"
    one = _process_folder(tmp_path / "one", {"a": "kernel A", "b": "kernel B"}, signature="same")
    other_args = ARGS + " -lineinfo,x"  # nvFuser's pattern allows commas in the arguments
    two = _process_folder(tmp_path / "two", {"a": "kernel A"}, signature="same", args=other_args)
    assert kernel_db.publish(str(one), str(shared)) == 2
    assert kernel_db.publish(str(two), str(shared)) == 1
    assert _binaries(shared) == {
        **_expected("kernel A", "kernel B"),
        **_expected("kernel A", args=other_args),
    }


def test_a_new_process_starts_from_the_shared_kernels(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    kernel_db.publish(str(_process_folder(tmp_path / "one", {"sigA": "kernel A"})), str(shared))
    private = tmp_path / "private"
    kernel_db._seed(str(shared), str(private))
    assert _binaries(private) == _expected("kernel A")
    kernel_db._seed(str(tmp_path / "nothing yet"), str(tmp_path / "empty"))  # a first process
    assert kernel_db.read_table(str(tmp_path / "empty")) == (None, {})


def test_rows_naming_missing_files_or_other_folders_are_not_published(tmp_path: Path) -> None:
    one = _process_folder(tmp_path / "one", {"sigA": "kernel A", "sigB": "kernel B"})
    (one / "kernel_1.cubin").unlink()  # a compile that failed half-way
    with open(one / "db.csv", "a") as table:
        table.write(f"sigC,{ARGS},../elsewhere.cu,../elsewhere.cubin\n")
    shared = tmp_path / "shared"
    assert kernel_db.publish(str(one), str(shared)) == 1
    assert _binaries(shared) == _expected("kernel A")


def _enable(monkeypatch: pytest.MonkeyPatch, nvfuser_enable: str | None, inherited: bool = False) -> bool:
    """``enable_before_import`` in a process started with these variables: whether it keeps kernels."""
    monkeypatch.setattr(kernel_db, "_enabled_here", False)
    for variable, value in (("NVFUSER_ENABLE", nvfuser_enable), (kernel_db.MARK, "1" if inherited else None)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    kernel_db.enable_before_import()
    return kernel_db._enabled_here


def test_the_option_is_added_before_import_unless_the_user_or_the_disk_cache_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(disk_cache.DISABLE_VARIABLE, raising=False)
    assert _enable(monkeypatch, "kernel_lineinfo")
    assert os.environ["NVFUSER_ENABLE"] == "kernel_lineinfo,kernel_db" and os.environ[kernel_db.MARK] == "1"

    assert not _enable(monkeypatch, "kernel_db")  # the user's own: their $TMPDIR, untouched
    assert os.environ["NVFUSER_ENABLE"] == "kernel_db" and kernel_db.MARK not in os.environ

    monkeypatch.setenv(disk_cache.DISABLE_VARIABLE, "0")
    assert not _enable(monkeypatch, None)
    assert "NVFUSER_ENABLE" not in os.environ


def test_a_child_process_tells_thunders_option_from_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child inherits NVFUSER_ENABLE=kernel_db from a thunder parent: it keeps kernels in a folder
    of its own too, or, with its disk cache off, drops the option; never shares nvFuser's default folder."""
    monkeypatch.delenv(disk_cache.DISABLE_VARIABLE, raising=False)
    assert _enable(monkeypatch, "kernel_lineinfo,kernel_db", inherited=True)
    assert os.environ["NVFUSER_ENABLE"] == "kernel_lineinfo,kernel_db"

    monkeypatch.setenv(disk_cache.DISABLE_VARIABLE, "0")
    assert not _enable(monkeypatch, "kernel_lineinfo,kernel_db", inherited=True)
    assert os.environ["NVFUSER_ENABLE"] == "kernel_lineinfo" and kernel_db.MARK not in os.environ


def test_the_kernel_db_option_leaves_the_disk_cache_key_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that turned the option on (at nvFuser's import) finds the entries of one that had not."""
    monkeypatch.delenv("NVFUSER_ENABLE", raising=False)
    before = disk_cache._environment()
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_db")
    assert disk_cache._environment() == before
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_lineinfo,kernel_db")
    assert ("NVFUSER_ENABLE", "kernel_lineinfo") in disk_cache._environment()
