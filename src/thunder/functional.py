"""``thunder.functional.jit``: compile a function (not a module)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def jit(fn: Callable, /, **compile_options: Any) -> Callable:
    """Just-in-time compile a function; see ``thunder.jit`` for the options."""
    if isinstance(fn, torch.nn.Module):
        raise TypeError("thunder.functional.jit compiles functions; use thunder.jit for modules")
    import thunder

    return thunder.jit(fn, **compile_options)
