"""The guard fuzzer's check: one jitted function, called with a sequence of values, against eager.

Every call must give eager's answer: the same result (types, tensor dtypes, shapes and values,
Python values), or, where eager raises, an exception of eager's type. A cache entry that answers a
call it was not built for shows up as a stale result. thunder may refuse a construct with a clear
``NotImplementedError`` (counted as refused, not as a failure): that is never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from guard_programs import GuardCase, Holder, build

import thunder

__all__ = ["GuardMismatch", "check_case", "check_calls", "guard_counts", "mismatch"]

# how many cases and calls ran in this process (the long run reports them)
guard_counts = {"cases": 0, "calls": 0, "eager errors": 0, "refused": 0}


class GuardMismatch(AssertionError):
    """A call of a case that did not answer as eager: the problem, and whether one object reached the
    function two ways (the parts' objects were one object at some call)."""

    def __init__(self, message: str, problem: str, aliased: bool) -> None:
        super().__init__(message)
        self.problem, self.aliased = problem, aliased


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


def outcome(fn: Callable, args: Sequence, kwargs: dict) -> Outcome:
    try:
        return Outcome(value=fn(*args, **kwargs))
    except Exception as error:  # noqa: BLE001 -- an exception is an answer to compare
        return Outcome(error=error)


def mismatch(actual: Any, expected: Any, where: str = "result") -> str | None:
    """How ``actual`` differs from eager's ``expected``, or None. Types must agree exactly (an int is
    not a float, a list not a tuple, ``torch.Size`` not a tuple), tensors in dtype, shape and value."""
    if type(actual) is not type(expected) and not isinstance(expected, torch.Tensor):
        return f"{where}: thunder gave {type(actual).__name__} {actual!r}, eager {type(expected).__name__} {expected!r}"
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{where}: thunder gave {type(actual).__name__} {actual!r}, eager a tensor"
        if (actual.dtype, actual.shape) != (expected.dtype, expected.shape):
            return (
                f"{where}: thunder gave {actual.dtype} {tuple(actual.shape)}, "
                f"eager {expected.dtype} {tuple(expected.shape)}"
            )
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as error:
            return f"{where}: values differ: {error}"
        return None
    if isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            return f"{where}: thunder gave {len(actual)} items, eager {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            if (problem := mismatch(a, e, f"{where}[{index}]")) is not None:
                return problem
        return None
    same = actual == expected or (actual != actual and expected != expected)  # NaN
    return None if same else f"{where}: thunder gave {actual!r}, eager {expected!r}"


def compare(actual: Outcome, expected: Outcome, any_error: bool = False) -> str | None:
    """None when thunder answered as eager did (or refused clearly), else the difference. With
    ``any_error``, any exception answers eager's: a program with two faults may meet the other first
    (thunder checks some arguments when the trace runs, after tracing met the second fault)."""
    if expected.error is not None:
        guard_counts["eager errors"] += 1
        if actual.error is None:
            return f"eager raised {type(expected.error).__name__}: {expected.error}; thunder returned {actual.value!r}"
        if isinstance(actual.error, NotImplementedError):
            guard_counts["refused"] += 1  # a clear refusal where eager raised: not a wrong answer
            return None
        if not any_error and not isinstance(actual.error, type(expected.error)):
            return (
                f"eager raised {type(expected.error).__name__}: {expected.error}; "
                f"thunder raised {type(actual.error).__name__}: {actual.error}"
            )
        return None
    if actual.error is not None:
        if isinstance(actual.error, NotImplementedError):
            guard_counts["refused"] += 1
            return None
        return f"thunder raised {type(actual.error).__name__}: {actual.error}"
    return mismatch(actual.value, expected.value)


def check_calls(fn: Callable, calls: Sequence[tuple[Sequence, dict]], **jit_options: Any) -> None:
    """One ``thunder.jit(fn)`` called with each ``(args, kwargs)`` in turn, each against ``fn`` itself.
    Tensors are cloned for each side; a call may also be a callable preparing the next one (a global
    or an attribute set) and returning its ``(args, kwargs)``."""
    jitted = thunder.jit(fn, **jit_options)
    problems = []
    for index, call in enumerate(calls):
        args, kwargs = call() if callable(call) else call
        expected = outcome(fn, _clone(args), _clone(kwargs))
        actual = outcome(jitted, _clone(args), _clone(kwargs))
        if (problem := compare(actual, expected)) is not None:
            problems.append(f"call {index} {_short(args[1:])} {_short(kwargs)}: {problem}")
    assert not problems, "\n".join(problems)


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if type(value) in (tuple, list):
        return type(value)(_clone(v) for v in value)
    if type(value) is dict:
        return {k: _clone(v) for k, v in value.items()}
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


def _containers(value: Any, found: set[int]) -> set[int]:
    """The ids of the tuples, lists, dicts and other objects with attributes in ``value``, recursively."""
    if isinstance(value, (tuple, list, dict)) or hasattr(value, "__dict__") or hasattr(value, "func"):
        if id(value) in found:
            return found
        found.add(id(value))
        items = (
            value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
        )
        for item in items:
            _containers(item, found)
        for item in getattr(value, "__dict__", {}).values():
            _containers(item, found)
        for item in (*getattr(value, "args", ()), *getattr(value, "keywords", {}).values()):
            _containers(item, found)
    return found


def _shares_a_container(objects: list) -> bool:
    """Whether two parts' objects hold one container (then the function reaches it two ways)."""
    seen: set[int] = set()
    for obj in objects:
        mine = _containers(obj, set())
        if seen & mine:
            return True
        seen |= mine
    return False


def _code_owner(fn: Any) -> Any:
    """The function whose closure cells the case's source created (a module's forward)."""
    return type(fn).forward if isinstance(fn, torch.nn.Module) else fn


def _deliver(case: GuardCase, fn: Any, namespace: dict, holder: Holder, objects: list) -> tuple[list, dict]:
    """Put each part's object where its route reads it; the arguments of the call after the tensors."""
    positional, star_args, kwargs = [], [], {}
    for part, obj in zip(case.parts, objects):
        if part.route == "positional":
            positional.append(obj)
        elif part.route == "star_args":
            star_args.append(obj)
        elif part.route in ("keyword", "star_kwargs"):
            kwargs[part.name] = obj
        elif part.route == "global":
            namespace[part.name.upper()] = obj
        elif part.route == "closure":
            owner = _code_owner(fn)
            owner.__closure__[owner.__code__.co_freevars.index(part.name)].cell_contents = obj
        elif part.route == "object_attribute":
            setattr(holder, part.name, obj)
        elif part.route == "module_attribute":
            setattr(fn, part.name, obj)
    with_holder = [holder] if any(part.route == "object_attribute" for part in case.parts) else []
    return positional + with_holder + star_args, kwargs


def check_case(case: GuardCase) -> None:
    """Run ``case``: its function jitted once, called with each of its values, against eager."""
    guard_counts["cases"] += 1
    fn, namespace = build(case)
    jitted = thunder.jit(fn, cache=case.cache)
    holder, shared, aliased = Holder(), [None] * len(case.parts), False
    for index in range(len(case.parts[0].values)):
        objects = []
        for position, part in enumerate(case.parts):
            value = part.values[index]
            if part.wrap.mutate is not None and shared[position] is not None:
                part.wrap.mutate(shared[position], value)
            else:
                shared[position] = part.wrap.make(value)
            objects.append(shared[position])
        aliased = aliased or _shares_a_container(objects)
        args, kwargs = _deliver(case, fn, namespace, holder, objects)
        tensors = [eval(part.use.tensor, namespace) for part in case.parts]
        expected = outcome(fn, [t.clone() for t in tensors] + args, kwargs)
        actual = outcome(jitted, [t.clone() for t in tensors] + args, kwargs)
        guard_counts["calls"] += 1
        problem = compare(actual, expected, any_error=len(case.parts) > 1)
        values = ", ".join(f"{type(p.values[index]).__name__} {p.values[index]!r}" for p in case.parts)
        if problem is not None:
            raise GuardMismatch(f"call {index} with {values}: {problem}\n{case.describe()}", problem, aliased)
