"""Which computation inputs are a module's parameters.

The frontend gives the computation one input per tensor it read, in the order the prologue
returns them. Running a copy of the prologue on the call's arguments gives those tensors; the
parameters among them are found by identity, never by name.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from thunder.core.trace import Trace, from_trace

__all__ = ["computation_inputs", "parameter_positions"]


def computation_inputs(prologue: Trace, args: tuple, kwargs: dict) -> list[Any]:
    """What the prologue returns for this call: the computation's inputs."""
    copy = from_trace(prologue, prologue.header)
    copy.bound_symbols.extend(prologue.bound_symbols)
    return list(copy.python_callable()(*args, **kwargs))  # a copy: the prologue itself may still change


def parameter_positions(
    prologue: Trace, args: tuple, kwargs: dict, parameter_ids: Collection[int]
) -> list[int]:
    """Positions of the computation inputs whose tensors' ids are in ``parameter_ids``."""
    return [
        i for i, value in enumerate(computation_inputs(prologue, args, kwargs)) if id(value) in parameter_ids
    ]
