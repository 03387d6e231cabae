"""Corpus: try/except/finally, raise and chaining, user exceptions, with-statements (incl. torch's)."""

from __future__ import annotations

import contextlib

import pytest
import torch

PROGRAMS: list = []


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


class ModelError(Exception):
    def __init__(self, message, code):
        super().__init__(message, code)
        self.code = code


@program("t")
def try_except_else_finally(a):
    log = []
    try:
        out = a * 2
    except ValueError:
        out = a
    else:
        log.append("else")
    finally:
        log.append("finally")
    return out, log


@program("t", lambda seed: seed)
def except_matching_and_binding(a, n):
    try:
        if n == 0:
            raise KeyError("k")
        if n == 1:
            raise ValueError("bad value")
        raise TypeError("bad type")
    except KeyError as error:
        return a + 1, repr(error)
    except (ValueError, TypeError) as error:
        return a - 1, type(error).__name__, str(error)


@program("t", lambda seed: seed)
def user_exception_surfaces_unchanged(a, n):
    if n == 1:
        raise ModelError("shape mismatch in layer 3", 42)
    return a


@program("t")
def exception_from_tensor_shape_check(a):
    if a.shape[0] > 4:
        raise ValueError(f"expected at most 4 rows, got {a.shape[0]}")
    return a * 2


@program("t")
def raise_from_sets_cause(a):
    try:
        try:
            {}["missing"]
        except KeyError as error:
            raise RuntimeError("lookup failed") from error
    except RuntimeError as outer:
        return a, type(outer.__cause__).__name__, outer.__suppress_context__


@program("t")
def implicit_chaining_sets_context(a):
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise TypeError("second")  # noqa: B904 -- implicit chaining is the point
    except TypeError as error:
        return a, str(error.__context__), error.__cause__ is None


@program("t")
def raise_from_none_suppresses_context(a):
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise KeyError("second") from None
    except KeyError as error:
        return a, error.__suppress_context__, error.__cause__


@program("t")
def bare_reraise(a):
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise
    except ValueError as error:
        return a * 3, str(error)


@program("t")
def finally_runs_on_return(a):
    log = []

    def inner():
        try:
            return a + 1
        finally:
            log.append("cleanup")

    return inner(), log


@program("t")
def finally_overrides_return(a):
    def inner():
        try:
            return a
        finally:
            return a * 2  # noqa: B012 -- the point of the program

    return inner()


@program("t")
def break_and_continue_through_finally(a):
    log = []
    for i in range(4):
        try:
            if i == 1:
                continue
            if i == 3:
                break
            a = a + i
        finally:
            log.append(i)
    return a, log


@program("t")
def nested_try_in_loop_with_exceptions(a):
    caught = 0
    for i in range(5):
        try:
            if i % 2:
                raise IndexError(i)
        except IndexError:
            caught += 1
    return a * caught


@program("t")
def exception_in_called_function_caught_by_caller(a):
    def fails(x):
        return x["key"]

    try:
        fails({})
    except KeyError as error:
        return a, error.args


@program("t")
def assert_statement_passes_and_fails(a):
    assert a.shape[1] == 4, "four columns"
    try:
        assert a.shape[0] == 100, f"rows: {a.shape[0]}"
    except AssertionError as error:
        return a + 1, str(error)
    return a


@program("t")
def exception_groups_of_builtins(a):
    results = []
    for bad in (lambda: 1 / 0, lambda: [][1], lambda: int("x"), lambda: None.attr):
        try:
            bad()
        except Exception as error:
            results.append(type(error).__name__)
    return a, results


@program("t")
def exception_attributes_and_args(a):
    try:
        raise ModelError("boom", 7)
    except ModelError as error:
        return a * error.code, error.args


@program("t")
def except_star_free_exception_variable_is_deleted(a):
    try:
        raise ValueError("x")
    except ValueError as error:  # noqa: F841 -- deleted at the end of the handler
        pass
    try:
        error  # noqa: B018
    except NameError:
        return a + 1
    return a


@program("t")
def sys_exc_info_inside_handler(a):
    import sys

    try:
        raise ValueError("v")
    except ValueError:
        kind = sys.exc_info()[0].__name__
    return a, kind


@program("t")
def with_custom_context_manager(a):
    log = []

    class Recorder:
        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, kind, value, traceback):
            log.append(("exit", kind is None))
            return False

    with Recorder() as recorder:
        out = a * 2
    return out, log, type(recorder).__name__


@program("t")
def with_suppressing_exception(a):
    class Suppress:
        def __enter__(self):
            return None

        def __exit__(self, kind, value, traceback):
            return kind is ValueError

    with Suppress():
        raise ValueError("swallowed")
    return a + 1


@program("t")
def with_contextlib_contextmanager(a):
    log = []

    @contextlib.contextmanager
    def scope(name):
        log.append(f"open {name}")
        try:
            yield name.upper()
        finally:
            log.append(f"close {name}")

    with scope("outer") as outer, scope("inner") as inner:
        out = a * 3
    return out, outer, inner, log


@program("t")
def with_contextlib_suppress(a):
    with contextlib.suppress(KeyError):
        {}["missing"]
    return a


@program("t")
def exception_in_with_reaches_exit_and_propagates(a):
    log = []

    @contextlib.contextmanager
    def watch():
        try:
            yield
        except ZeroDivisionError:
            log.append("saw")
            raise

    try:
        with watch():
            1 / 0  # noqa: B018
    except ZeroDivisionError:
        log.append("caught")
    return a, log


@program("t", "t")
def with_torch_no_grad(a, b):
    with torch.no_grad():
        c = a * b
    return c + 1


@program("t")
def with_torch_enable_grad_and_set_grad_enabled(a):
    with torch.enable_grad():
        b = a * 2
    with torch.set_grad_enabled(False):
        c = b + 1
    return c


@program("t", "t")
def with_cpu_autocast_bfloat16(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        c = a @ b.T
    return c


@program("t")
def torch_no_grad_as_decorator(a):
    @torch.no_grad()
    def inner(x):
        return x * 2

    return inner(a)


@program("t")
def nullcontext_and_exit_stack(a):
    with contextlib.nullcontext(a) as value:
        out = value + 1
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: None)
        out = out * 2
    return out


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)


def test_user_exception_object_is_the_one_raised(jit) -> None:
    def fn(a):
        raise ModelError("model failed", 3)

    with pytest.raises(ModelError) as info:
        jit(fn)(torch.ones(2))
    assert info.value.args == ("model failed", 3) and info.value.code == 3


def test_enabled_autocast_is_a_clear_error(jit) -> None:
    """thunder traced the ops as written (float32) and ignored autocast: values at float32 precision
    here, and a different dtype where the program returns the matmul itself (eager: bfloat16). Refused
    instead, naming autocast (core/symbol.py)."""

    def fn(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            c = a @ b
        return c.float() * 2

    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with pytest.raises(NotImplementedError, match="does not support autocast"):
        jit(fn)(a, b)
