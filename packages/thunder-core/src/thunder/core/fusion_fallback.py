"""Fusion regions that degrade: a region whose executor fails at run time is run by the torch executor.

A fusion executor (Triton, nvFuser, a plugin) compiles its regions when they first run, for the
input layouts it meets; that can fail for reasons no claim could foresee (a Triton compile error, an
nvFuser error, a layout it cannot handle). ``with_fallback`` wraps the callable of every region bound
symbol (``claim_executors`` applies it where regions are built). When the region's own callable
raises, the region's prims are lowered to the default executors (torch) once, that program runs
instead, and one ``ExecutorFallbackWarning`` names the executor, the region and the error.

Policy:

- The fallback is sticky: after one failure the region always runs on torch (a failure that
  depends on the input layout would otherwise cost an exception on every such call).
- ``torch.OutOfMemoryError`` is not a fault of the executor: it propagates unchanged, as in eager.
- ``PartiallyWrittenError`` (a region that failed after writing inputs in place) propagates: a rerun
  would read the written inputs.
- ``KeyboardInterrupt`` and other ``BaseException``s are never caught.
- If the torch program fails too, its error propagates, chained to the executor's.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.symbol import BoundSymbol

__all__ = ["ExecutorFallbackWarning", "FusionFallback", "PartiallyWrittenError", "with_fallback"]


class ExecutorFallbackWarning(RuntimeWarning):
    """A fusion region failed in its executor and runs on the torch executor from now on."""


class PartiallyWrittenError(RuntimeError):
    """A region failed after it had written some of its inputs in place (copy-backs taken into it,
    ``transforms/fusion_copy_backs.py``): running it again on torch would read the new values, so
    the error propagates instead of a fallback."""


class FusionFallback:
    """The callable of a region bound symbol: the executor's runner, or torch once that failed.

    Attributes of the executor's runner (``steps``, ``definitions``) are reachable through it.
    """

    def __init__(self, runner: Callable, region: BoundSymbol, executor_name: str):
        self.runner = runner
        self.region = region
        self.executor_name = executor_name
        self.error: Exception | None = None  # what made the region fall back, if it did
        self._torch_program: Callable | None = None
        self._lock = threading.Lock()

    # Kept on disk (core/disk_cache.py) as the runner and its region: another process tries the
    # executor again rather than inherit this one's fallback.
    def __getstate__(self) -> dict:
        return {"runner": self.runner, "region": self.region, "executor_name": self.executor_name}

    def __setstate__(self, state: dict) -> None:
        self.runner = state["runner"]
        self.region = state["region"]
        self.executor_name = state["executor_name"]
        self.error, self._torch_program, self._lock = None, None, threading.Lock()

    def __call__(self, *args: Any) -> Any:
        if self.error is None:
            try:
                return self.runner(*args)
            except (torch.OutOfMemoryError, PartiallyWrittenError):
                raise
            except Exception as error:
                self._fall_back(error)
        assert self._torch_program is not None
        try:
            return self._torch_program(*args)
        except Exception as error:
            raise error from self.error

    def _fall_back(self, error: Exception) -> None:
        with self._lock:
            if self._torch_program is None:
                self._torch_program = _torch_program(self.region)
                name = self.region.symbol.name
                warnings.warn(
                    f"thunder: the {self.executor_name} executor failed to run {name} "
                    f"({type(error).__name__}: {error}); {name} runs on the torch executor from now on",
                    ExecutorFallbackWarning,
                    stacklevel=3,
                )
            if self.error is None:
                self.error = error

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "runner":
            raise AttributeError(name)
        return getattr(self.runner, name)


def with_fallback(region: BoundSymbol, executor_name: str) -> BoundSymbol:
    """``region`` (a fusion executor's bound symbol) with a callable that falls back to torch."""
    symbol = region.symbol
    if symbol.fn is None or isinstance(symbol.fn, FusionFallback):
        return region
    import dataclasses

    wrapped = dataclasses.replace(symbol, fn=FusionFallback(symbol.fn, region, executor_name))
    return region.replace(symbol=wrapped)


def _torch_program(region: BoundSymbol) -> Callable:
    """The region's prims, claimed by the default operator executors, compiled into a function."""
    from thunder.core.transforms.claim_executors import operator_callable

    return operator_callable(f"{region.symbol.name}_on_torch", region.args, region.subsymbols, region.output)
