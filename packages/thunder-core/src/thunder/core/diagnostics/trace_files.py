"""Every trace of a compile written to a folder, one numbered ``.py`` file per stage.

``thunder.jit(fn, save_traces="dir")`` or ``THUNDER_SAVE_TRACES=dir`` (the option wins) writes, for
each compile (cache miss), a subfolder ``dir/<function>-<miss number>/`` holding the prologue, the
computation (or forward) traces and the backward traces in pipeline order::

    00_prologue.py
    01_computation_constructed_by_the_interpreter.py
    02_forward_saves_3_tensors_448_bytes_for_the_backward.py
    ...

Each file is exactly what ``str(trace)`` prints, so each is a Python program.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from thunder.core.trace import Trace

__all__ = ["SAVE_TRACES_VARIABLE", "save_traces_folder", "write_traces", "trace_file_name"]

SAVE_TRACES_VARIABLE = "THUNDER_SAVE_TRACES"


def save_traces_folder(options: dict[str, Any]) -> Path | None:
    """The folder to write traces to: the ``save_traces`` option, else the environment variable."""
    folder = options.get("save_traces") or os.environ.get(SAVE_TRACES_VARIABLE)
    return Path(folder) if folder else None


def _slug(text: str, limit: int = 48) -> str:
    words = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return words[:limit].rstrip("_")


def trace_file_name(index: int, trace: Trace) -> str:
    """``NN_<trace name>_<header words>.py``: sorts in pipeline order, says which pass made it."""
    first_line = trace.header.splitlines()[0] if trace.header else ""
    parts = [f"{index:02d}", _slug(trace.name)]
    if first_line and not first_line.lower().startswith(trace.name.lower()):
        parts.append(_slug(first_line))
    elif first_line:
        parts.append(_slug(first_line)[len(_slug(trace.name)) :].strip("_"))
    return "_".join(part for part in parts if part) + ".py"


def _folder_name(fn: Any, number: int) -> str:
    name = getattr(fn, "__qualname__", None)
    name = name.rpartition("<locals>.")[2] if isinstance(name, str) else type(fn).__name__
    return f"{_slug(name) or 'fn'}-{number}"


def write_traces(
    folder: Path | str,
    fn: Any,
    compile_number: int,
    stages: Iterable[Sequence[Trace]],
) -> Path:
    """Write the traces of one compile, numbered in order, into ``folder/<fn>-<compile_number>/``.

    Args:
        folder: the root folder (created if missing).
        fn: the compiled function or module; its name names the subfolder.
        compile_number: which cache miss of ``fn`` this is (1 for the first compile).
        stages: the trace lists in pipeline order (prologue, computation or forward, backward).

    Returns:
        The subfolder written.
    """
    target = Path(folder) / _folder_name(fn, compile_number)
    target.mkdir(parents=True, exist_ok=True)
    index = 0
    for traces in stages:
        for trace in traces:
            (target / trace_file_name(index, trace)).write_text(str(trace), encoding="utf-8")
            index += 1
    return target
