"""Each row of a benchmark table measured in a process of its own (``--isolate``).

In one process, a system's row can be moved by what the systems before it left behind: memory still
held in reference cycles or in the caching allocator, CUDA graph pools, compiled kernels warming the
next system's compile, a fragmented heap. An H200 run once gave a 4-layer Llama's thunder+graphs 11.94
GiB when its rows came first and 19.93 GiB when GPT-2's came before them, and Llama-3-8B decoded at
5.59 ms/token after torch.compile's row against 4.90-4.91 in a process of its own. With
``--isolate`` the script starts itself once per (workload, system) with that one pair, the child
writes its rows as JSON, and the parent prints the one table of all of them.

The child gets the parent's arguments less ``--isolate``, followed by the pair and ``--rows-json``
(argparse keeps the last value of an option given twice). Each child starts cold: thunder's on-disk
cache, Inductor's and Triton's caches are empty folders of its own, so that no row loads what an
earlier row compiled (a second thunder row would otherwise load the first one's traces and kernels).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

ISOLATE_FLAG = "--isolate"
_CACHE_VARIABLES = ("THUNDER_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def run_child(script: str, *arguments: str) -> list[dict[str, Any]] | str:
    """Run ``script`` with this process's arguments (less ``--isolate``) and ``arguments``; its rows, or
    why there are none. The child's output streams through, so its progress and errors are seen."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "rows.json")
        inherited = [a for a in sys.argv[1:] if a != ISOLATE_FLAG]
        command = [sys.executable, script, *inherited, *arguments, "--rows-json", path]
        cold = {name: os.path.join(folder, name.lower()) for name in _CACHE_VARIABLES}
        done = subprocess.run(command, check=False, env={**os.environ, **cold})
        if not os.path.exists(path):
            return f"its process exited with {done.returncode} before writing its rows"
        with open(path) as f:
            return json.load(f)


def write_rows(path: str, rows: list[dict[str, Any]]) -> None:
    """The child's side: its rows, as ``run_child`` reads them."""
    with open(path, "w") as f:
        json.dump(rows, f)
