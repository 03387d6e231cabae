"""Python calls whose effect happens only while tracing: ``print``, logging, clocks, ``random``.

The interpreter runs the user's Python code once, on the first call (and on each recompile); later
calls run the compiled program, which holds only tensor operations. A ``print`` or a log line is
then emitted once and never again, and a value read from a clock or from the ``random`` module is
frozen into the compiled program as a constant. Replaying them after every call (as the epilogue
replays writes to Python objects) would need their arguments computed at run time: a print of a
tensor would become an extra output of the computation, formatted after it. That is possible but not
done yet; instead each such call:

- runs natively (never interpreted: a logging handler's stream is not a value the prologue can check),
  with tensors shown by shape, dtype and device (``TracedTensor(shape=(2, 3), dtype=torch.float32,
  device='cpu')``), since their values do not exist while tracing;
- issues one ``TraceTimeSideEffectWarning`` per compile and place, naming the construct and the user's
  file and line, and saying that later calls will not repeat it.

A logging call below the logger's level has no effect, and so no warning; nor has a ``print`` into a
buffer the program made itself (``print(..., file=io.StringIO())``), whose contents are the program's.
"""

from __future__ import annotations

import _random
import logging
import re
import sys
import time
import warnings
from collections.abc import Callable
from types import MethodType
from typing import Any

from thunder.core import devices, dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.python_ops import specialize_numbers

__all__ = ["TraceTimeSideEffectWarning", "TraceTimeEffects", "TracedTensor"]


class TraceTimeSideEffectWarning(UserWarning):
    """A Python call with an effect outside the program (``print``, logging, a clock, ``random``) ran
    while thunder traced the function; the compiled program that later calls run does not repeat it."""


_PRINT = "print"
_LOG = "log"
_VALUE = "value"  # a clock or a random number: the value is frozen into the compiled program

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
    "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL, "log": None,  # the level is the first argument
}  # fmt: skip
_TIME_FUNCTIONS = (
    "time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
    "process_time_ns", "thread_time", "thread_time_ns", "sleep",
)  # fmt: skip

# id -> (the callable, its kind, the name the warning uses); by identity, as callables may be unhashable
_KNOWN: dict[int, tuple[Any, str, str]] = {id(print): (print, _PRINT, "print()")}
for _name in _TIME_FUNCTIONS:
    if hasattr(time, _name):
        _function = getattr(time, _name)
        _KNOWN[id(_function)] = (_function, _VALUE, f"time.{_name}()")
for _name in _LOG_LEVELS:
    if hasattr(logging, _name):
        _function = getattr(logging, _name)
        _KNOWN[id(_function)] = (_function, _LOG, f"logging.{_name}()")
_LOGGER_METHODS: dict[int, tuple[Any, str]] = {}
for _owner in (logging.Logger, logging.LoggerAdapter):
    for _name in _LOG_LEVELS:
        _function = getattr(_owner, _name, None)
        if _function is not None:
            _LOGGER_METHODS[id(_function)] = (_function, _name)


class TracedTensor:
    """How a tensor prints while thunder traces: its metadata, as its values do not exist yet."""

    def __init__(self, proxy: TensorProxy):
        self.proxy = proxy

    def __repr__(self) -> str:
        proxy = self.proxy
        dtype = dtypes.to_torch_dtype(proxy.dtype)
        device = str(devices.to_torch_device(proxy.device))
        return f"TracedTensor(shape={tuple(proxy.shape)}, dtype={dtype}, device={device!r})"

    __str__ = __repr__


def _shown(values: tuple) -> tuple:
    return tuple(TracedTensor(v) if isinstance(v, TensorProxy) else v for v in values)


def _random_call(fn: Any) -> bool:
    """A function or method of the ``random`` module: ``random.random()``, ``rng.randint(...)``, ``random.seed()``."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, _random.Random) or getattr(fn, "__objclass__", None) is _random.Random:
        return True
    return getattr(fn, "__module__", None) == "random" and callable(fn) and not isinstance(fn, type)


# From a call's arguments: the logger it writes to and the arguments after it.
_Split = Callable[[tuple], tuple[Any, tuple]]


def _classify(fn: Any) -> tuple[str, str, _Split] | None:
    """``(kind, name, split)`` when calling ``fn`` has an effect the compiled program will not repeat."""
    known = _KNOWN.get(id(fn))
    if known is not None and known[0] is fn:
        return known[1], known[2], lambda args: (logging.getLogger(), args)  # logging.info: the root logger
    function, bound = (fn.__func__, fn.__self__) if type(fn) is MethodType else (fn, None)
    method = _LOGGER_METHODS.get(id(function))
    if method is not None and method[0] is function:  # logger.info(...), or Logger.info(logger, ...)
        if bound is not None:
            return _LOG, f"logger.{method[1]}()", lambda args: (bound, args)
        return _LOG, f"logger.{method[1]}()", lambda args: (args[0] if args else None, args[1:])
    if _random_call(fn):
        return _VALUE, f"random.{getattr(fn, '__name__', 'call')}()", lambda args: (None, args)
    return None


def _log_enabled(logger: Any, args: tuple, name: str) -> bool:
    """Whether ``logger`` emits the call (``args``: the call's arguments after the logger)."""
    level = _LOG_LEVELS.get(name.rpartition(".")[2].rstrip("()"))
    if level is None:  # logger.log(level, ...)
        level = args[0] if args and isinstance(args[0], int) else logging.NOTSET
    try:
        return bool(logger.isEnabledFor(level))
    except Exception:
        return True


_LOCATION = re.compile(r"(.+?):(\d+)(?:: |$)")


class TraceTimeEffects:
    """The frontend's handler of these calls for one compile: runs them and warns once per place."""

    def __init__(self, location: Callable[[], str], from_outside: Callable[[Any], bool]):
        self._location = location
        self._from_outside = from_outside  # whether the program read an object from outside the call
        self._warned: set[tuple[str, str]] = set()

    def replacement(self, fn: Any) -> Callable | None:
        """What the interpreter calls instead of ``fn``; None when ``fn`` is not such a call."""
        found = _classify(fn)
        if found is None:
            return None
        kind, name, split = found

        def call(*args: Any, **kwargs: Any) -> Any:
            if kind == _VALUE:
                args, kwargs = specialize_numbers((args, kwargs))
                result = fn(*args, **kwargs)
                what = f"returned {result!r} while tracing; the compiled program keeps that value and later calls reuse it"
                self._warn(name, what)
                return result
            if kind == _LOG and not _log_enabled(*split(args), name):
                return fn(*args, **kwargs)  # below the logger's level: no effect, nothing to say
            result = fn(*_shown(args), **kwargs)
            if kind == _PRINT and not self._prints_outside(kwargs.get("file")):
                return result  # into a buffer the program made itself: its contents are the program's
            self._warn(
                name,
                "ran once, while tracing; later calls run the compiled program, which does not repeat it",
            )
            return result

        return call

    def _prints_outside(self, file: Any) -> bool:
        return file is None or file is sys.stdout or file is sys.stderr or self._from_outside(file)

    def _warn(self, name: str, what: str) -> None:
        location = self._location()
        if (name, location) in self._warned:
            return
        self._warned.add((name, location))
        message = (
            f"{name} at {location} {what}: thunder runs a jitted function's Python code only while tracing it "
            "(first call and recompiles). Move it out of the jitted function, or compile with "
            "torch.compile(fn, backend=thunder.dynamo.ThunderCompiler()), which runs it on every call."
        )
        match = _LOCATION.match(location)
        if match is None:
            warnings.warn(message, TraceTimeSideEffectWarning, stacklevel=2)
        else:  # attributed to the user's line, as if the user's frame had warned
            warnings.warn_explicit(message, TraceTimeSideEffectWarning, match.group(1), int(match.group(2)))
