"""A progress line on stderr for compiles that take long.

Tracing a large model can take tens of seconds; silence then looks like a hang. While a compile runs
longer than the threshold, a watcher thread logs ``thunder: still compiling <fn> ...`` once per
threshold interval, naming the last stage that finished; a compile that took longer than the
threshold ends with one line listing the time of each stage (``thunder.compile_stats(fn)
.last_stage_seconds`` holds the same numbers).

The lines go to the ``thunder.progress`` logger at WARNING level, so they reach stderr without any
logging setup and can be silenced like any logger. The threshold, in seconds, is the
``progress_threshold`` compile option, else ``THUNDER_PROGRESS_THRESHOLD``, else 5; ``inf`` turns
the lines off, 0 reports every compile.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["PROGRESS_LOGGER", "DEFAULT_THRESHOLD", "progress_threshold", "CompileProgress"]

PROGRESS_LOGGER = logging.getLogger("thunder.progress")
PROGRESS_VARIABLE = "THUNDER_PROGRESS_THRESHOLD"
DEFAULT_THRESHOLD = 5.0


def progress_threshold(options: dict[str, Any]) -> float:
    """Seconds after which a compile reports progress (``inf``: never)."""
    value: Any = options.get("progress_threshold")
    if value is None:
        value = os.environ.get(PROGRESS_VARIABLE, DEFAULT_THRESHOLD)
    threshold = float(value)
    if threshold < 0 or math.isnan(threshold):
        raise ValueError(f"progress_threshold must be a number of seconds >= 0, not {value!r}")
    return threshold


def _format_stages(stage_seconds: dict[str, float]) -> str:
    return ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in stage_seconds.items())


class CompileProgress:
    """Reports one compile: a watcher thread while it runs, a summary line when it ends."""

    def __init__(self, name: str, threshold: float, stage_seconds: Callable[[], dict[str, float]]):
        self.name = name
        self.threshold = threshold
        self._stage_seconds = stage_seconds
        self._start = time.perf_counter()
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None
        if 0 < threshold < math.inf:
            self._watcher = threading.Thread(target=self._watch, name="thunder-progress", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        while not self._done.wait(self.threshold):
            finished = list(self._stage_seconds())
            last = f"last finished stage: {finished[-1]}" if finished else "tracing"
            elapsed = time.perf_counter() - self._start
            PROGRESS_LOGGER.warning("thunder: still compiling %s after %.1f s (%s)", self.name, elapsed, last)

    def finish(self, failed: bool = False) -> None:
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
        elapsed = time.perf_counter() - self._start
        if elapsed >= self.threshold:
            outcome = "failed after" if failed else "compiled in"
            stages = _format_stages(self._stage_seconds())
            PROGRESS_LOGGER.warning("thunder: %s %s %.2f s (%s)", self.name, outcome, elapsed, stages)
