"""Generator frames: yield, yield from / SEND and their cleanup."""

from __future__ import annotations

from types import GeneratorType
from typing import Any

from thunder.interpreter.vm.calls import call
from thunder.interpreter.vm.dispatch import VERSION, YIELD, handles
from thunder.interpreter.vm.iteration import get_iterator, next_value


@handles("RETURN_GENERATOR")
def return_generator(frame: Any, op: Any) -> None:
    # The generator object already exists (created at call time); the first resume lands
    # here and, like CPython, leaves a value for the following POP_TOP.
    frame.stack.append(None)


@handles("YIELD_VALUE")
def yield_value(frame: Any, op: Any) -> Any:
    frame.result = frame.stack.pop()
    return YIELD


@handles("GET_YIELD_FROM_ITER")
def get_yield_from_iter(frame: Any, op: Any) -> None:
    from thunder.interpreter.vm.generators import InterpretedGenerator

    value = frame.stack[-1]
    if not isinstance(value, (GeneratorType, InterpretedGenerator)):
        frame.stack[-1] = get_iterator(frame.context, value)


def _send_popped(frame: Any) -> tuple[Any, StopIteration | None]:
    """One step of ``yield from``/``await``: the value on top of the stack goes to the receiver below
    it (``next(receiver)`` for None, else ``receiver.send(value)``). Returns what the receiver
    yielded, or the StopIteration it finished with."""
    value = frame.stack.pop()
    receiver = frame.stack[-1]
    try:
        if value is None:
            return next_value(frame.context, receiver), None
        return call(frame.context, receiver.send, (value,), {}), None
    except StopIteration as stop:
        return None, stop


@handles("SEND")
def send(frame: Any, op: Any) -> None:
    result, stop = _send_popped(frame)
    if stop is None:
        frame.stack.append(result)
        return
    if VERSION >= (3, 12):  # END_SEND at the target pops the receiver
        frame.stack.append(stop.value)
    else:
        frame.stack[-1] = stop.value
    frame.index = op.target


@handles("YIELD_FROM", until=(3, 10))
def yield_from_310(frame: Any, op: Any) -> Any:
    """3.10's whole ``yield from`` loop in one instruction: it runs again on every resume (which
    pushes the value sent) until the receiver finishes; its return value replaces the receiver."""
    result, stop = _send_popped(frame)
    if stop is not None:
        frame.stack[-1] = stop.value
        return None
    frame.index -= 1
    frame.result = result
    return YIELD


@handles("END_SEND", since=(3, 12))
def end_send(frame: Any, op: Any) -> None:
    value = frame.stack.pop()
    frame.stack[-1] = value


@handles("CLEANUP_THROW", since=(3, 12))
def cleanup_throw(frame: Any, op: Any) -> None:
    stack = frame.stack
    exc = stack.pop()
    if not isinstance(exc, StopIteration):
        frame.context.reraising = exc
        raise exc
    del stack[-2:]
    stack.append(None)
    stack.append(exc.value)
