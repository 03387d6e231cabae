"""Diagnostics of a compile: trace files, a progress line, pictures of traces, hints on errors.

All of it is opt-in or quiet by default: ``save_traces="dir"`` (or ``THUNDER_SAVE_TRACES=dir``) writes
every trace of each compile to a folder, compiles slower than ``progress_threshold`` seconds (or
``THUNDER_PROGRESS_THRESHOLD``, default 5) log a progress line to stderr, ``trace_to_dot`` and
``trace_to_html`` draw a trace, and errors raised while compiling get a note saying what to try and a
traceback of the user's frames instead of thunder's (``THUNDER_FULL_TRACEBACK=1`` keeps thunder's).
``instrumented_compile`` ties them to the pipeline's compile step.
"""

from thunder.core.diagnostics.compile_hooks import instrumented_compile
from thunder.core.diagnostics.hints import add_hint
from thunder.core.diagnostics.progress import PROGRESS_LOGGER, progress_threshold
from thunder.core.diagnostics.render import trace_to_dot, trace_to_html
from thunder.core.diagnostics.trace_files import save_traces_folder, write_traces

__all__ = [
    "instrumented_compile",
    "add_hint",
    "PROGRESS_LOGGER",
    "progress_threshold",
    "trace_to_dot",
    "trace_to_html",
    "save_traces_folder",
    "write_traces",
]
