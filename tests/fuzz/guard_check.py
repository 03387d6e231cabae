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

__all__ = ["check_case", "check_calls", "guard_counts", "mismatch"]

# how many cases and calls ran in this process (the long run reports them)
guard_counts = {"cases": 0, "calls": 0, "eager errors": 0, "refused": 0}


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


def compare(actual: Outcome, expected: Outcome) -> str | None:
    """None when thunder answered as eager did (or refused clearly), else the difference."""
    if expected.error is not None:
        guard_counts["eager errors"] += 1
        if actual.error is None:
            return f"eager raised {type(expected.error).__name__}: {expected.error}; thunder returned {actual.value!r}"
        if not isinstance(actual.error, type(expected.error)):
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


def _deliver(case: GuardCase, fn: Any, namespace: dict, holder: Holder, obj: Any) -> tuple[tuple, dict]:
    """Put ``obj`` where ``case``'s route reads it; the arguments of the call after ``x``."""
    route = case.route.name
    if route in ("positional", "star_args"):
        return (obj,), {}
    if route in ("keyword", "star_kwargs"):
        return (), {"p": obj}
    if route == "global":
        namespace["P"] = obj
    elif route == "closure":
        fn.__closure__[fn.__code__.co_freevars.index("p")].cell_contents = obj
    elif route == "object_attribute":
        holder.p = obj
        return (holder,), {}
    elif route == "module_attribute":
        fn.p = obj
    return (), {}


def check_case(case: GuardCase) -> None:
    """Run ``case``: its function jitted once, called with each of its values, against eager."""
    guard_counts["cases"] += 1
    fn, namespace = build(case)
    jitted = thunder.jit(fn, cache=case.cache)
    holder, shared = Holder(), None
    for index, value in enumerate(case.values):
        if case.wrap.mutate is not None and shared is not None:
            case.wrap.mutate(shared, value)
            obj = shared
        else:
            obj = shared = case.wrap.make(value)
        args, kwargs = _deliver(case, fn, namespace, holder, obj)
        x = eval(case.use.tensor, namespace)
        expected = outcome(fn, (x.clone(), *args), kwargs)
        actual = outcome(jitted, (x.clone(), *args), kwargs)
        guard_counts["calls"] += 1
        problem = compare(actual, expected)
        assert problem is None, (
            f"call {index} with {type(value).__name__} {value!r}: {problem}\n{case.describe()}"
        )
