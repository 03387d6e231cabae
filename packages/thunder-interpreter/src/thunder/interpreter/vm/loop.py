"""The dispatch loop: runs a frame until it returns, yields or lets an exception escape."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import PY310
from thunder.interpreter.vm.errors import InterpreterError, annotate_exception, qualname_of
from thunder.interpreter.vm.frame import Frame
from thunder.interpreter.vm.opcodes_blocks import unwind_to_handler

__all__ = ["run_frame"]

# Control-flow exceptions cross many frames on every loop end; notes on them are noise.
_QUIET_EXCEPTIONS = (StopIteration, GeneratorExit, StopAsyncIteration)


def run_frame(frame: Frame, thrown: BaseException | None = None) -> Any:
    """Run until RETURN or YIELD (returned); ``thrown`` is raised at the suspension point."""
    frames = frame.context.frames
    frames.append(frame)
    try:
        if thrown is not None:
            op = frame.ops[frame.index - 1]
            if not _handle_exception(frame, op, thrown, fresh=False):
                _escape(frame, op, thrown)
                raise thrown
        return _loop(frame)
    finally:
        frames.pop()


def _loop(frame: Frame) -> Any:
    ops = frame.ops
    log = frame.context.hooks.instruction_log
    code = frame.code
    qualname = qualname_of(code, frame.function)
    while True:
        op = ops[frame.index]
        frame.index += 1
        if log is not None:
            log.append((qualname, code.co_filename, op.lineno, op.opname, op.argrepr))
        try:
            signal = op.handler(frame, op)
        except BaseException as exc:
            # User handlers must not swallow "the VM cannot do this": it would silently
            # change what the program does.
            if not isinstance(exc, InterpreterError) and _handle_exception(frame, op, exc, fresh=True):
                continue
            _escape(frame, op, exc)
            raise
        if signal is not None:
            return signal


def _handle_exception(frame: Frame, op: Any, exc: BaseException, fresh: bool) -> bool:
    """Chain, then jump to the exception-table handler covering ``op`` if there is one."""
    context = frame.context
    if exc is context.reraising:
        context.reraising = None
    else:
        frame.last_exception = exc
        frame.last_exception_op = op
        if exc is context.propagating:
            context.propagating = None
        elif fresh:
            context.chain(exc)
    if PY310:
        return unwind_to_handler(frame, exc)
    entry = op.exception_entry
    if entry is None:
        return False
    target, depth, push_lasti = entry
    stack = frame.stack
    del stack[depth:]
    if push_lasti:
        stack.append(op.offset)
    stack.append(exc)
    frame.index = target
    return True


def _escape(frame: Frame, op: Any, exc: BaseException) -> None:
    context = frame.context
    context.propagating = exc
    if frame.last_exception is exc and frame.last_exception_op is not None:
        op = frame.last_exception_op
    if not isinstance(exc, _QUIET_EXCEPTIONS):
        if exc is not context.located:  # the innermost frame it leaves: where it was raised
            context.located = exc
            context.hooks.on_exception(exc, context.user_location())
        annotate_exception(frame, op, exc)
    frame.stack.clear()
