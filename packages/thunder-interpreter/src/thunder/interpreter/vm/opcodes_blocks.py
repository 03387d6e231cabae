"""3.10's exception handling: a run-time block stack instead of 3.11's exception table.

SETUP_FINALLY / SETUP_WITH push a block (handler, stack depth); POP_BLOCK pops it. An exception
unwinds the stack to the innermost such block and enters its handler, pushing the exception that
was being handled before (restored by POP_EXCEPT) and then the new one, each as the three values
``traceback, value, type``. The VM keeps only the value in ``context.exception_slots``, as for 3.11+.
"""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.calls import MISSING, call
from thunder.interpreter.vm.dispatch import handles
from thunder.interpreter.vm.opcodes_exceptions import bind_special, check_catchable

__all__ = ["unwind_to_handler"]

_FINALLY = "finally"  # a SETUP_FINALLY or SETUP_WITH: where an exception goes
_EXCEPT_HANDLER = "except handler"  # a running handler: unwinding it restores the exception before


def unwind_to_handler(frame: Any, exc: BaseException) -> bool:
    """Jump to the innermost handler covering the current instruction; False if the frame has none."""
    stack = frame.stack
    blocks = frame.blocks
    while blocks:
        kind, handler, depth = blocks.pop()
        if kind is _EXCEPT_HANDLER:
            del stack[depth + 3 :]
            _restore_handled_exception(frame)
            continue
        del stack[depth:]
        _enter_handler(frame, exc)
        frame.index = handler
        return True
    return False


def _enter_handler(frame: Any, exc: BaseException) -> None:
    stack = frame.stack
    frame.blocks.append((_EXCEPT_HANDLER, None, len(stack)))
    slots = frame.context.exception_slots
    previous = slots[-1]
    stack.extend((None, previous, None if previous is None else type(previous)))
    slots[-1] = exc
    stack.extend((exc.__traceback__, exc, type(exc)))


def _pop_exception(stack: list) -> Any:
    """Pops an exception's three values (``traceback, value, type``, type on top); returns the value."""
    del stack[-1]  # type
    value = stack.pop()
    del stack[-1]  # traceback
    return value


def _restore_handled_exception(frame: Any) -> None:
    frame.context.exception_slots[-1] = _pop_exception(frame.stack)


@handles("SETUP_FINALLY", until=(3, 10))
def setup_finally(frame: Any, op: Any) -> None:
    frame.blocks.append((_FINALLY, op.target, len(frame.stack)))


@handles("POP_BLOCK", until=(3, 10))
def pop_block(frame: Any, op: Any) -> None:
    frame.blocks.pop()


@handles("POP_EXCEPT", until=(3, 10))
def pop_except_310(frame: Any, op: Any) -> None:
    kind, _, _ = frame.blocks.pop()
    if kind is not _EXCEPT_HANDLER:
        raise SystemError("popped block is not an except handler")
    _restore_handled_exception(frame)


@handles("RERAISE", until=(3, 10))
def reraise_310(frame: Any, op: Any) -> None:
    exc = _pop_exception(frame.stack)
    frame.context.reraising = exc
    raise exc


@handles("JUMP_IF_NOT_EXC_MATCH", until=(3, 10))
def jump_if_not_exc_match(frame: Any, op: Any) -> None:
    stack = frame.stack
    expected = stack.pop()
    raised_type = stack.pop()
    check_catchable(expected)
    if not issubclass(raised_type, expected):
        frame.index = op.target


@handles("SETUP_WITH", until=(3, 10))
def setup_with(frame: Any, op: Any) -> None:
    stack = frame.stack
    manager = stack.pop()
    enter = bind_special(frame.context, manager, "__enter__")
    if enter is MISSING:
        raise AttributeError("__enter__")  # 3.10's wording
    exit_method = bind_special(frame.context, manager, "__exit__")
    if exit_method is MISSING:
        raise AttributeError("__exit__")
    stack.append(exit_method)
    result = call(frame.context, enter, (), {})
    frame.blocks.append((_FINALLY, op.target, len(stack)))
    stack.append(result)


@handles("WITH_EXCEPT_START", until=(3, 10))
def with_except_start_310(frame: Any, op: Any) -> None:
    # the exception's type, value, traceback on top; the one handled before; then __exit__
    stack = frame.stack
    exit_method = stack[-7]
    stack.append(call(frame.context, exit_method, (stack[-1], stack[-2], stack[-3]), {}))
