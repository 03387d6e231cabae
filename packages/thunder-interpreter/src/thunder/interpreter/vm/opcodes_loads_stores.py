"""Local, global, name and cell variables."""

from __future__ import annotations

from types import CellType
from typing import Any

from thunder.core.sources import GlobalSource
from thunder.interpreter.vm.dispatch import NULL, PY310, handles


def _unbound_local(op: Any) -> UnboundLocalError:
    return _unbound_local_named(op.argval)


def _unbound_local_named(name: str) -> UnboundLocalError:
    if PY310:  # CPython's own wording changed in 3.11; the VM repeats the running version's
        return UnboundLocalError(f"local variable '{name}' referenced before assignment")
    return UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value")


@handles("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(frame: Any, op: Any) -> None:
    value = frame.locals[op.arg]
    if value is NULL:
        raise _unbound_local(op)
    frame.stack.append(value)


@handles("LOAD_FAST_LOAD_FAST", since=(3, 13))
def load_fast_load_fast(frame: Any, op: Any) -> None:
    first, second = op.arg >> 4, op.arg & 15
    names = op.argval
    frame.stack.append(_local(frame, first, names[0]))
    frame.stack.append(_local(frame, second, names[1]))


def _local(frame: Any, slot: int, name: str) -> Any:
    value = frame.locals[slot]
    if value is NULL:
        raise _unbound_local_named(name)
    return value


@handles("STORE_FAST_STORE_FAST", since=(3, 13))
def store_fast_store_fast(frame: Any, op: Any) -> None:
    stack = frame.stack
    frame.locals[op.arg >> 4] = stack.pop()
    frame.locals[op.arg & 15] = stack.pop()


@handles("STORE_FAST_LOAD_FAST", since=(3, 13))
def store_fast_load_fast(frame: Any, op: Any) -> None:
    frame.locals[op.arg >> 4] = frame.stack.pop()
    frame.stack.append(_local(frame, op.arg & 15, op.argval[1]))


@handles("LOAD_FAST_AND_CLEAR", since=(3, 12))
def load_fast_and_clear(frame: Any, op: Any) -> None:
    # PEP 709 inlined comprehensions save the outer binding (maybe unbound) and restore it later.
    frame.stack.append(frame.locals[op.arg])
    frame.locals[op.arg] = NULL


@handles("STORE_FAST")
def store_fast(frame: Any, op: Any) -> None:
    frame.locals[op.arg] = frame.stack.pop()


@handles("DELETE_FAST")
def delete_fast(frame: Any, op: Any) -> None:
    if frame.locals[op.arg] is NULL:
        raise _unbound_local(op)
    frame.locals[op.arg] = NULL


@handles("LOAD_GLOBAL", since=(3, 11), until=(3, 12))
def load_global(frame: Any, op: Any) -> None:
    if op.arg & 1:  # a call follows: its NULL goes first
        frame.stack.append(NULL)
    frame.stack.append(_load_global_value(frame, op.argval))


@handles("LOAD_GLOBAL", since=(3, 13))
def load_global_313(frame: Any, op: Any) -> None:
    frame.stack.append(_load_global_value(frame, op.argval))
    if op.arg & 1:  # a call follows: 3.13 puts its NULL after the callable
        frame.stack.append(NULL)


@handles("LOAD_GLOBAL", until=(3, 10))
def load_global_310(frame: Any, op: Any) -> None:
    frame.stack.append(_load_global_value(frame, op.argval))


def _load_global_value(frame: Any, name: str) -> Any:
    globals_dict = frame.globals
    try:
        value = globals_dict[name]
    except KeyError:
        try:
            return frame.builtins[name]
        except KeyError:
            raise NameError(f"name '{name}' is not defined", name=name) from None
    return frame.context.load(value, GlobalSource(globals_dict, name))


@handles("STORE_GLOBAL")
def store_global(frame: Any, op: Any) -> None:
    value = frame.stack.pop()
    frame.context.hooks.on_store_global(frame.globals, op.argval, value)
    frame.globals[op.argval] = value


@handles("DELETE_GLOBAL")
def delete_global(frame: Any, op: Any) -> None:
    frame.context.hooks.on_store_global(frame.globals, op.argval, None)
    try:
        del frame.globals[op.argval]
    except KeyError:
        raise NameError(f"name '{op.argval}' is not defined", name=op.argval) from None


@handles("LOAD_NAME")
def load_name(frame: Any, op: Any) -> None:
    names = frame.names
    if names is not None and op.argval in names:
        frame.stack.append(names[op.argval])
        return
    frame.stack.append(_load_global_value(frame, op.argval))


@handles("STORE_NAME")
def store_name(frame: Any, op: Any) -> None:
    target = frame.names if frame.names is not None else frame.globals
    target[op.argval] = frame.stack.pop()


@handles("DELETE_NAME")
def delete_name(frame: Any, op: Any) -> None:
    target = frame.names if frame.names is not None else frame.globals
    try:
        del target[op.argval]
    except KeyError:
        raise NameError(f"name '{op.argval}' is not defined", name=op.argval) from None


@handles("MAKE_CELL")
def make_cell(frame: Any, op: Any) -> None:
    value = frame.locals[op.arg]
    cell = CellType() if value is NULL else CellType(value)
    frame.locals[op.arg] = cell
    # Cells made during the run are not closure state from before it: never a ClosureSource,
    # even when a function created natively (a class body's method) closes over them.
    frame.context.created_cells[id(cell)] = cell


@handles("COPY_FREE_VARS")
def copy_free_vars(frame: Any, op: Any) -> None:
    offset = frame.decoded.free_offset
    frame.locals[offset : offset + op.arg] = frame.function.__closure__


@handles("LOAD_CLOSURE")
def load_closure(frame: Any, op: Any) -> None:
    # Pushes the cell itself (to build a closure tuple), not a value: nothing to report.
    frame.stack.append(frame.locals[op.arg])


@handles("LOAD_DEREF")
def load_deref(frame: Any, op: Any) -> None:
    cell = frame.locals[op.arg]
    try:
        value = cell.cell_contents
    except ValueError:
        raise _unbound_cell(frame, op) from None
    source = frame.context.provenance.cell_source(cell)
    if source is not None:
        value = frame.context.load(value, source)
    frame.stack.append(value)


def _unbound_cell(frame: Any, op: Any) -> Exception:
    if op.arg >= frame.decoded.free_offset:
        if PY310:
            message = f"free variable '{op.argval}' referenced before assignment in enclosing scope"
            return NameError(message, name=op.argval)
        return NameError(
            f"cannot access free variable '{op.argval}' where it is not associated with a value in enclosing scope",
            name=op.argval,
        )
    return _unbound_local(op)


@handles("STORE_DEREF")
def store_deref(frame: Any, op: Any) -> None:
    frame.locals[op.arg].cell_contents = frame.stack.pop()


@handles("DELETE_DEREF")
def delete_deref(frame: Any, op: Any) -> None:
    cell = frame.locals[op.arg]
    try:
        del cell.cell_contents
    except ValueError:
        raise _unbound_cell(frame, op) from None
