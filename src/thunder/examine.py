"""``thunder.examine``: which torch operators of a program thunder runs natively, falls back on, or fails.

The program is run once in eager mode under a ``TorchFunctionMode`` that records every torch
operator it calls (top-level calls only: the operators a torch function calls internally are its own
business). Each operator is then classified: *native* (a thunder symbol, an in-place form of one, or
a tensor attribute proxies answer), *fallback* (no symbol, but thunder can run it through PyTorch:
its output metadata comes from meta tensors) or *unsupported* (no symbol and no fallback, with the
reason). Finally the program is compiled with ``thunder.jit`` and its result compared with eager.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from thunder.core import fallback
from thunder.core.diagnostics import trace_to_dot, trace_to_html  # pictures of a trace, re-exported
from thunder.core.proxies import TensorProxy
from thunder.torch.inplace import torch_lookaside

__all__ = ["examine", "ExamineReport", "trace_to_dot", "trace_to_html"]


@dataclass
class ExamineReport:
    """What ``thunder.examine`` found; ``str()`` prints it as a table."""

    native: Counter = field(default_factory=Counter)  # operator name -> number of calls
    fallback: Counter = field(default_factory=Counter)
    unsupported: dict[str, str] = field(default_factory=dict)  # operator name -> why
    compiled: bool = False
    compile_error: str | None = None
    matches_eager: bool | None = None  # None when it could not be compared
    mismatch: str | None = None
    fallback_in_trace: list[str] = field(default_factory=list)  # the fallback symbols thunder recorded

    def __str__(self) -> str:
        lines = [f"{'operator':<48} {'calls':>5}  status"]
        for name, count in sorted(self.native.items()):
            lines.append(f"{name:<48} {count:>5}  native")
        for name, count in sorted(self.fallback.items()):
            lines.append(f"{name:<48} {count:>5}  fallback (run by PyTorch)")
        for name, reason in sorted(self.unsupported.items()):
            lines.append(f"{name:<48} {'':>5}  unsupported: {reason}")
        lines.append(
            f"{len(self.native)} native, {len(self.fallback)} fallback, {len(self.unsupported)} unsupported operators"
        )
        if not self.compiled:
            lines.append(f"thunder.jit failed: {self.compile_error}")
        elif self.matches_eager:
            lines.append("thunder.jit's result matches eager")
        else:
            lines.append(f"thunder.jit's result DIFFERS from eager: {self.mismatch}")
        return "\n".join(lines)


_METADATA = frozenset(dir(TensorProxy))  # attributes and operators a proxy answers itself


def _name(fn: Any) -> str:
    name = getattr(fn, "__name__", "")
    if type(fn).__name__ in ("getset_descriptor", "property") or name == "__get__":
        owner = getattr(fn, "__self__", None)
        return f"torch.Tensor.{getattr(owner, '__name__', name)}"
    return fallback.torch_name(fn)


def _is_native(fn: Any) -> bool:
    if torch_lookaside(fn) is not None:
        return True
    owner = getattr(fn, "__objclass__", None)
    name = getattr(fn, "__name__", "")
    if owner in (torch.Tensor, torch._C.TensorBase) or name == "__get__":
        return _name(fn).rsplit(".", 1)[-1] in _METADATA
    return False


class _Recorder(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple, dict]] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def _fresh(fn: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """Copies, so that in-place changes by one run do not reach the other."""
    clone = lambda x: x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
    copied_fn = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn
    return copied_fn, tuple(clone(a) for a in args), {k: clone(v) for k, v in kwargs.items()}


def examine(fn: Callable, *args: Any, show: bool = True, **kwargs: Any) -> ExamineReport:
    """Report which torch operators ``fn(*args, **kwargs)`` uses and how thunder handles each.

    Args:
        fn: a function or ``torch.nn.Module``; it is called twice (eager and compiled), on copies of
            tensor arguments and of the module, so the originals are not changed.
        show: print the report (as ``thunder.examine`` in Lightning Thunder does).

    Returns:
        An ``ExamineReport``: native, fallback and unsupported operators with their call counts, and
        whether ``thunder.jit(fn)`` compiles and matches eager.

    Example::

        report = thunder.examine(model, torch.randn(2, 8))
        assert not report.unsupported
    """
    import thunder

    report = ExamineReport()
    eager_fn, eager_args, eager_kwargs = _fresh(fn, args, kwargs)
    recorder = _Recorder()
    with recorder:
        expected = eager_fn(*eager_args, **eager_kwargs)
    for func, call_args, call_kwargs in recorder.calls:
        name = _name(func)
        if _is_native(func):
            report.native[name] += 1
            continue
        reason = fallback.check_fallback(func, call_args, call_kwargs)
        if reason is None:
            report.fallback[name] += 1
        else:
            report.unsupported.setdefault(name, reason)
    jit_fn, jit_args, jit_kwargs = _fresh(fn, args, kwargs)
    try:
        jitted = thunder.jit(jit_fn)
        actual = jitted(*jit_args, **jit_kwargs)
        report.compiled = True
        report.fallback_in_trace = [
            b.symbol.name for b in fallback.fallback_calls(thunder.last_traces(jitted)[0])
        ]
    except Exception as error:  # noqa: BLE001 -- reported, not raised
        report.compile_error = f"{type(error).__name__}: {error}"
    if report.compiled:
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
            report.matches_eager = True
        except (AssertionError, TypeError, ValueError) as mismatch:
            report.matches_eager, report.mismatch = False, str(mismatch).splitlines()[0]
    if show:
        print(report)
    return report
