"""The compiled forms of a split graph's pieces: thunder's (``thunder_N``) and Inductor's (``inductor_N``).

Both fall back to running the piece's FX graph eagerly when their compiler fails on it, and record
why in the graph's ``split_reasons``: eager PyTorch is the reference, so a fallback is slower, never
wrong. A thunder piece falls back only when eager succeeds on the same inputs (an error of the
user's program is raised as it is).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import pipeline
from thunder.core.module import ThunderModule
from thunder.dynamo.frontend import fx_frontend
from thunder.dynamo.reasons import SplitReason, SplitReasonType

__all__ = ["ThunderPiece", "thunder_piece", "inductor_piece"]


class ThunderPiece(ThunderModule):
    """A ``ThunderModule`` over one piece of a split graph, with an eager fallback.

    It prints as ``ThunderModule`` (it is one, for ``thunder.last_traces`` and friends).
    """

    def __init__(
        self, piece: torch.fx.GraphModule, jitted: Callable[..., Any], on_failure: Callable[[Exception], None]
    ):
        super().__init__(piece, jitted)
        self._on_failure = on_failure
        self._runs_eagerly = False

    def _get_name(self) -> str:
        return "ThunderModule"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._runs_eagerly:
            return self._model(*args, **kwargs)
        try:
            return self._thunder_jitted(*args, **kwargs)
        except Exception as error:
            result = self._model(*args, **kwargs)  # if eager fails too, the program's own error surfaces
            self._runs_eagerly = True
            self._on_failure(error)
            return result


def thunder_piece(
    piece: torch.fx.GraphModule, thunder_options: dict[str, Any], reasons: list[SplitReason], name: str
) -> ThunderPiece:
    """``piece`` compiled by thunder's pipeline with the FX frontend and ``thunder_options``."""

    def on_failure(error: Exception) -> None:
        info = f"thunder failed on {name}, which runs eagerly from now on: {type(error).__name__}: {error}"
        reasons.append(SplitReason(SplitReasonType.THUNDER_FAILED, info, error))
        warnings.warn(f"thunder.dynamo: {info}", RuntimeWarning, stacklevel=2)

    jitted = pipeline.jit(piece, frontend=fx_frontend, **thunder_options)
    return ThunderPiece(piece, jitted, on_failure)


def _inductor_backend(options: dict[str, Any], reasons: list[SplitReason], name: str) -> Callable[..., Any]:
    """A torch.compile backend: Inductor with ``options``; the graph itself (eager) if Inductor fails."""

    def backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._inductor.compile_fx import compile_fx

        try:
            compiled: Callable[..., Any] = compile_fx(
                graph_module, example_inputs, config_patches=dict(options)
            )  # type: ignore[assignment]
        except Exception as error:
            info = f"Inductor could not compile {name}; it runs eagerly: {type(error).__name__}: {error}"
            reasons.append(SplitReason(SplitReasonType.INDUCTOR_FAILED, info, error))
            return graph_module.forward
        return compiled

    return backend


def inductor_piece(
    piece: torch.fx.GraphModule, options: dict[str, Any], reasons: list[SplitReason], name: str
) -> torch.nn.Module:
    """``piece`` under ``torch.compile`` with Inductor configured by ``options`` (compiled on first call)."""
    backend = _inductor_backend(options, reasons, name)
    compiled: Any = torch.compile(piece, backend=backend)
    # Compiling the module would make Dynamo trace one wrapper frame shared by every piece, whose
    # recompile limit (8) the pieces would exhaust; each piece's own forward has its own code.
    compiled.forward = torch.compile(piece.forward, backend=backend)
    return compiled
