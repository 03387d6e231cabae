"""nvFuser's compiled kernels kept across processes, beside thunder's disk cache.

nvFuser can keep the binaries it compiles (``NVFUSER_ENABLE=kernel_db``): a table, ``db.csv``, maps
each kernel's signature and compile arguments to a source file and a cubin in
``$TMPDIR/nvfuser_kernel_db``, and a later compile of the same kernel loads the cubin instead of
running NVRTC (3.3 of the 11.2 s that the 4-layer Llama's first nvFuser executions took on an H200,
by nvFuser's own trace). nvFuser names those files by a per-process counter (``kernel_<n>``), so two
processes writing one folder would overwrite each other's files and pair one kernel's source with
another's binary.

So each process gets a folder of its own, seeded on its first compile from the shared one,
``<THUNDER_CACHE_DIR>/nvfuser/<nvFuser version>-sm<capability>``; ``$TMPDIR`` names it only while
nvFuser compiles. At exit the kernels it added are copied into the shared folder under names made
from their source and compile arguments and appended to its table, under a file lock; the table is
replaced at once, after the files it names exist. Nothing is used when the disk cache is off (``THUNDER_DISK_CACHE=0``) or when
the user set ``kernel_db`` in ``NVFUSER_ENABLE`` (then ``$TMPDIR`` is theirs). Any failure here
means only that kernels are compiled again: a warning, never an error.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from thunder.core import disk_cache

__all__ = ["MARK", "OPTION", "compiling", "enable_before_import", "publish", "read_table"]

OPTION = "kernel_db"
MARK = "THUNDER_NVFUSER_KERNEL_DB"  # "1": the option in NVFUSER_ENABLE is thunder's
_ENABLE = "NVFUSER_ENABLE"
_FOLDER = "nvfuser_kernel_db"  # nvFuser's folder under $TMPDIR
_TABLE = "db.csv"

log = logging.getLogger("thunder.nvfuser.kernel_db")

_enabled_here = False  # whether this module asked nvFuser for its kernel DB
_private: str | None = None  # this process's $TMPDIR for nvFuser's compiles
_shared: str | None = None
_failed = False


def enable_before_import() -> None:
    """Add ``kernel_db`` to ``NVFUSER_ENABLE`` before nvFuser is imported (it reads its options then),
    unless the disk cache is off or the user asked for the kernel DB already.

    Child processes inherit the variable: ``THUNDER_NVFUSER_KERNEL_DB`` marks it as thunder's, so that a
    child uses a folder of its own as well (or drops the option, its disk cache being off), rather than
    taking it for the user's and sharing ``$TMPDIR/nvfuser_kernel_db`` with other processes.
    """
    global _enabled_here
    options = [o.strip() for o in os.environ.get(_ENABLE, "").split(",") if o.strip()]
    if os.environ.get(MARK) == "1":  # set by thunder in a parent process
        options = [o for o in options if not o.startswith(OPTION)]
    user_asked = any(o.startswith(OPTION) for o in options)
    _enabled_here = disk_cache.enabled(None) and not user_asked
    if _enabled_here:
        options.append(OPTION)
        os.environ[MARK] = "1"
    else:
        os.environ.pop(MARK, None)
    if options:
        os.environ[_ENABLE] = ",".join(options)
    else:
        os.environ.pop(_ENABLE, None)


@contextlib.contextmanager
def compiling(shared_folder: Callable[[], str]) -> Iterator[None]:
    """Around a first execution (nvFuser compiles there): ``$TMPDIR`` names this process's folder.

    ``shared_folder``: the shared folder's path, asked once (it needs nvFuser's version and the device).
    """
    folder = _private_folder(shared_folder) if _enabled_here and not _failed else None
    if folder is None:
        yield
        return
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous


def _private_folder(shared_folder: Callable[[], str]) -> str | None:
    global _private, _shared, _failed
    if _private is None:
        try:
            _shared = shared_folder()
            _private = tempfile.mkdtemp(prefix="thunder_nvfuser_")
            _seed(_shared, os.path.join(_private, _FOLDER))
            atexit.register(_publish_at_exit)
        except Exception as error:  # noqa: BLE001 -- without the kernel DB nvFuser compiles as before
            _failed = True
            log.warning("thunder: nvFuser's kernels are not kept across processes: %s", error)
            return None
    return _private


def _seed(shared: str, private_db: str) -> None:
    """Copy the shared table and the files it names into this process's folder."""
    os.makedirs(private_db, exist_ok=True)
    header, rows = read_table(shared)
    if header is None:
        return
    for row in rows.values():
        for name in row[2:]:
            shutil.copyfile(os.path.join(shared, name), os.path.join(private_db, name))
    _write_table(private_db, header, rows)


def _publish_at_exit() -> None:
    if _private is None or _shared is None:
        return
    try:
        publish(os.path.join(_private, _FOLDER), _shared)
    except Exception as error:  # noqa: BLE001 -- at exit: a warning, the next process compiles again
        log.warning("thunder: nvFuser's new kernels were not kept: %s", error)
    finally:
        shutil.rmtree(_private, ignore_errors=True)


def publish(private_db: str, shared: str) -> int:
    """Copy the kernels of ``private_db`` that ``shared`` lacks into it; returns how many were added.

    Kernels are told apart as nvFuser tells them apart: by their source and compile arguments (the
    signature, a mangled kernel name, is the same for many kernels).
    """
    header, rows = read_table(private_db)
    if header is None or not rows:
        return 0
    os.makedirs(shared, exist_ok=True)
    with open(os.path.join(shared, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared_header, known = read_table(shared)
        added = 0
        for key, row in rows.items():
            if key in known:
                continue
            digest = hashlib.sha256(f"{key[0]},{key[1]}".encode()).hexdigest()[:24]
            names = [f"kernel_{digest}{os.path.splitext(n)[1]}" for n in row[2:]]
            for name, source in zip(names, row[2:]):
                _copy_atomically(os.path.join(private_db, source), os.path.join(shared, name))
            known[key] = (*row[:2], *names)
            added += 1
        if added:
            _write_table(shared, shared_header or header, known)
        return added


def read_table(folder: str) -> tuple[str | None, dict[tuple[str, str], tuple[str, ...]]]:
    """The header and rows of a kernel DB's table (None and none without one), each row keyed by its
    source's digest and its compile arguments; rows whose files are missing or elsewhere are left out.

    A row is ``signature,compile arguments,source file,cubin file``; only the arguments may hold
    commas (nvFuser's own pattern), so the row is split at its first and its last two."""
    path = os.path.join(folder, _TABLE)
    if not os.path.exists(path):
        return None, {}
    with open(path) as file:
        lines = file.read().splitlines()
    if not lines:
        return None, {}
    rows: dict[tuple[str, str], tuple[str, ...]] = {}
    for line in lines[1:]:
        signature, _, rest = line.partition(",")
        fields = (signature, *rest.rsplit(",", 2))
        if len(fields) != 4 or not all(fields) or not all(_is_file_of(folder, name) for name in fields[2:]):
            continue
        with open(os.path.join(folder, fields[2]), "rb") as source:
            digest = hashlib.sha256(source.read()).hexdigest()
        rows[(digest, fields[1])] = fields
    return lines[0], rows


def _is_file_of(folder: str, name: str) -> bool:
    return "/" not in name and name not in (".", "..") and os.path.isfile(os.path.join(folder, name))


def _write_table(folder: str, header: str, rows: dict[Any, tuple[str, ...]]) -> None:
    table = "\n".join([header, *(",".join(row) for row in rows.values())]) + "\n"
    disk_cache.write_atomically(os.path.join(folder, _TABLE), table.encode())


def _copy_atomically(source: str, destination: str) -> None:
    if os.path.exists(destination):  # named by source and arguments: the same bytes
        return
    with open(source, "rb") as file:
        disk_cache.write_atomically(destination, file.read())
