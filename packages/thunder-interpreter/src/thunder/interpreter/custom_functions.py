"""User ``torch.autograd.Function`` subclasses met while tracing: ``MyFunction.apply(x)``.

``apply`` is torch's C code, which would call ``forward`` natively under ``torch.no_grad()``: the
forward's operations were recorded as constants for autograd (the function's gradient silently
vanished: eager's ``x.grad`` was ``g * 5``, thunder's 0) and the Python values it read (globals,
attributes) were never guarded. Instead, ``forward`` is interpreted like any user function, with a
stand-in ``ctx``; its gradient is the user's ``backward``, which thunder does not trace, so a call
whose gradient is needed is an error naming the class, not a different gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves

__all__ = ["custom_function_forward", "interpreted_forward"]


def custom_function_forward(fn: Any, args: tuple, kwargs: dict) -> Callable | None:
    """For ``fn`` the bound C ``apply`` of a ``torch.autograd.Function`` subclass: the callable to
    interpret in its place (its ``forward`` with a context); None for any other ``fn``."""
    cls = getattr(fn, "__self__", None)
    if getattr(fn, "__name__", None) != "apply" or not isinstance(cls, type):
        return None
    if not issubclass(cls, torch.autograd.Function) or type(fn).__name__ != "builtin_function_or_method":
        return None
    if torch.is_grad_enabled() and any(
        isinstance(value, TensorProxy) and value.requires_grad for value in tree_leaves((args, kwargs))
    ):
        raise NotImplementedError(
            f"{cls.__module__}.{cls.__qualname__}.apply: thunder does not support a torch.autograd.Function "
            f"whose gradient is needed (an input requires grad): it does not trace {cls.__qualname__}.backward. "
            "Call it under torch.no_grad(), or on inputs that do not require grad, or outside the jitted function"
        )
    return functools.partial(interpreted_forward, cls)


def interpreted_forward(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``cls.forward`` called as ``apply`` calls it. Interpreted, unlike thunder's other functions (the
    frontend's ``_runs_natively``): reading ``forward`` off the class is guarded, as the program's own
    reads are, and the interpreter steps into it."""
    if _has_setup_context(cls):  # forward(*args); setup_context(ctx, inputs, output) only serves backward
        return cls.forward(*args, **kwargs)
    return cls.forward(_Context(len(args)), *args, **kwargs)


def _has_setup_context(cls: type[torch.autograd.Function]) -> bool:
    base = torch.autograd.function._SingleLevelFunction.setup_context
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not getattr(base, "__func__", base)


class _Context:
    """What a forward may call on ``ctx`` when no backward will run: saving is a no-op."""

    def __init__(self, inputs: int):
        self.needs_input_grad = (False,) * inputs
        self.saved_tensors: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value
