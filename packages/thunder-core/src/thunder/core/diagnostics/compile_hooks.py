"""``instrumented_compile``: the diagnostics around the pipeline's compile step (one cache miss)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from thunder.core.diagnostics.hints import add_hint
from thunder.core.diagnostics.progress import CompileProgress, progress_threshold
from thunder.core.diagnostics.trace_files import save_traces_folder, write_traces

__all__ = ["instrumented_compile"]


def _display_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None)
    if not isinstance(name, str):  # a module instance
        return type(fn).__name__
    return name.rpartition("<locals>.")[2]  # a function defined in another one: its own name


def instrumented_compile(compile_method: Callable) -> Callable:
    """Wrap ``JittedFunction._compile``: progress lines, trace files, and hints on errors.

    The wrapped method takes ``(self, args, kwargs)`` and returns the new cache entry; ``self`` has
    ``_compile_data`` (options, fn) and ``_compile_stats`` (stage times, miss count).
    """

    @functools.wraps(compile_method)
    def compile_and_report(self: Any, args: tuple, kwargs: dict) -> Any:
        data, stats = self._compile_data, self._compile_stats
        name = _display_name(data.fn)
        data.used_options.update({"save_traces", "progress_threshold"} & data.options.keys())
        stats.last_stage_seconds = {}  # the watcher must not report the previous compile's stages
        progress = CompileProgress(
            name, progress_threshold(data.options), lambda: dict(stats.last_stage_seconds)
        )
        try:
            entry = compile_method(self, args, kwargs)
        except Exception as error:
            progress.finish(failed=True)
            add_hint(error, name)
            raise
        progress.finish()
        folder = save_traces_folder(data.options)
        if folder is not None:
            stages = (entry.prologue_traces, entry.computation_traces, entry.backward_traces)
            write_traces(folder, data.fn, stats.cache_misses, stages)
        return entry

    return compile_and_report
