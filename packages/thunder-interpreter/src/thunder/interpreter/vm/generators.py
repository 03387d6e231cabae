"""Interpreted generator objects: a suspended VM frame behind the generator protocol.

The frame itself stores everything needed to resume (stack, instruction index), so a
YIELD_VALUE simply returns from the dispatch loop and ``send`` re-enters it. Native code
(``list(gen)``, ``zip``) can iterate these like any generator.
"""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import PY310, PY311, VERSION, YIELD
from thunder.interpreter.vm.errors import qualname_of
from thunder.interpreter.vm.loop import run_frame

__all__ = ["InterpretedGenerator"]


class InterpretedGenerator:
    __slots__ = ("_frame", "_started", "_finished", "_running", "_exception_slot", "__weakref__")

    def __init__(self, frame: Any) -> None:
        self._frame = frame
        self._started = False
        self._finished = False
        self._running = False
        self._exception_slot = None

    @property
    def gi_code(self) -> Any:
        return self._frame.code

    @property
    def gi_running(self) -> bool:
        return self._running

    def __repr__(self) -> str:
        return f"<interpreted generator {qualname_of(self._frame.code, self._frame.function)}>"

    def __iter__(self) -> InterpretedGenerator:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        if self._finished:
            raise StopIteration
        if not self._started:
            if value is not None:
                raise TypeError("can't send non-None value to a just-started generator")
            self._started = True
        else:
            self._frame.stack.append(value)
        return self._resume(None)

    def throw(self, exc_type: Any, value: Any = None, traceback: Any = None) -> Any:
        exc = _normalize_exception(exc_type, value, traceback)
        if self._finished:
            raise exc
        if not self._started:
            self._finished = True
            raise exc
        delegate = _yield_from_delegate(self._frame)
        if delegate is not None:
            return self._throw_into_delegate(delegate, exc)
        return self._resume(exc)

    def close(self) -> None:
        if self._finished or not self._started:
            self._finished = True
            return
        try:
            self.throw(GeneratorExit)
        except (GeneratorExit, StopIteration):
            return
        raise RuntimeError("generator ignored GeneratorExit")

    def _throw_into_delegate(self, delegate: Any, exc: BaseException) -> Any:
        """Like CPython's gen_throw: the innermost ``yield from`` target sees the exception first."""
        if isinstance(exc, GeneratorExit):
            close = getattr(delegate, "close", None)
            if close is not None:
                try:
                    close()
                except BaseException as close_error:
                    return self._resume(close_error)
            return self._resume(exc)
        throw = getattr(delegate, "throw", None)
        if throw is None:
            return self._resume(exc)
        try:
            return throw(exc)
        except StopIteration as stop:
            if PY310:
                return self._finish_delegation_310(stop.value)
            if PY311:
                return self._finish_delegation_311(stop.value)
            return self._resume(stop)
        except BaseException as error:
            return self._resume(error)

    def _finish_delegation_311(self, value: Any) -> Any:
        frame = self._frame
        frame.stack.pop()
        frame.stack.append(value)
        backward_jump = frame.ops[frame.index + 1]
        send = frame.ops[backward_jump.target]
        frame.index = send.target
        return self._resume(None)

    def _finish_delegation_310(self, value: Any) -> Any:
        """The delegate returned: the result replaces it and the frame goes on after YIELD_FROM."""
        frame = self._frame
        frame.stack.pop()
        frame.stack.append(value)
        frame.index += 1
        return self._resume(None)

    def _resume(self, thrown: BaseException | None) -> Any:
        if self._running:
            raise ValueError("generator already executing")
        frame = self._frame
        slots = frame.context.exception_slots
        slots.append(self._exception_slot)
        self._running = True
        try:
            signal = run_frame(frame, thrown)
        except StopIteration as stop:
            self._finished = True
            if VERSION < (3, 12):  # 3.12+ compiles this conversion into the generator's code
                raise RuntimeError("generator raised StopIteration") from stop
            raise
        except BaseException:
            self._finished = True
            raise
        finally:
            self._running = False
            self._exception_slot = slots.pop()
        if signal is YIELD:
            return frame.result
        self._finished = True
        if frame.result is None:
            raise StopIteration
        raise StopIteration(frame.result)


_RESUME_WHERE = 3  # RESUME's low bits say where it resumes: 2 and 3 after yield from / await


def _yield_from_delegate(frame: Any) -> Any:
    """The sub-iterator when suspended inside ``yield from``: the next op is RESUME 2 or 3 (3.11+),
    or the YIELD_FROM that runs again on resume (3.10)."""
    next_op = frame.ops[frame.index] if frame.index < len(frame.ops) else None
    if next_op is None or not frame.stack:
        return None
    if next_op.opname == "YIELD_FROM" or (next_op.opname == "RESUME" and next_op.arg & _RESUME_WHERE >= 2):
        return frame.stack[-1]
    return None


def _normalize_exception(exc_type: Any, value: Any, traceback: Any) -> BaseException:
    if isinstance(exc_type, BaseException):
        exc = exc_type
    elif isinstance(exc_type, type) and issubclass(exc_type, BaseException):
        if isinstance(value, exc_type):
            exc = value
        elif value is None:
            exc = exc_type()
        else:
            exc = exc_type(*value) if isinstance(value, tuple) else exc_type(value)
    else:
        raise TypeError(
            "exceptions must be classes or instances deriving from BaseException, not "
            f"{type(exc_type).__name__}"
        )
    if traceback is not None:
        exc = exc.with_traceback(traceback)
    return exc
