import pytest

from thunder.interpreter.vm import InterpreterHooks, interpret


class MyError(Exception):
    def __init__(self, code, message="boom"):
        super().__init__(code, message)
        self.code = code


def test_try_except_else_finally(check):
    def f(x):
        log = []
        try:
            log.append("try")
            if x == 1:
                raise ValueError("one")
            if x == 2:
                raise KeyError("two")
            if x == 3:
                {}["missing"]
        except ValueError as e:
            log.append(("value", e.args))
        except (KeyError, TypeError) as e:
            log.append(("key", str(e)))
        else:
            log.append("else")
        finally:
            log.append("finally")
        return log

    for value in (0, 1, 2, 3):
        check(f, value)


def test_finally_with_return_and_loops(check):
    def f(n):
        out = []
        for i in range(n):
            try:
                if i == 1:
                    continue
                if i == 3:
                    break
                out.append(i)
            finally:
                out.append(-i)
        try:
            return out
        finally:
            out.append("after-return")

    check(f, 5)


def test_exception_chaining(check):
    def implicit():
        try:
            1 / 0
        except ZeroDivisionError:
            raise ValueError("inner")

    def explicit():
        try:
            1 / 0
        except ZeroDivisionError as e:
            raise ValueError("outer") from e

    def suppressed():
        try:
            1 / 0
        except ZeroDivisionError:
            raise ValueError("none") from None

    def native_call_in_handler():
        try:
            [][1]
        except IndexError:
            int("x")

    hooks = InterpreterHooks()
    for fn, cause_type, context_type in [
        (implicit, None, ZeroDivisionError),
        (explicit, ZeroDivisionError, ZeroDivisionError),
        (suppressed, None, ZeroDivisionError),
        (native_call_in_handler, None, IndexError),
    ]:
        with pytest.raises(ValueError) as info:
            interpret(fn, (), {}, hooks)
        with pytest.raises(ValueError) as native:
            fn()
        assert type(info.value.__cause__) is type(native.value.__cause__)
        assert type(info.value.__context__) is type(native.value.__context__) is context_type
        assert info.value.__suppress_context__ == native.value.__suppress_context__


def test_reraise_and_nested_handlers(check):
    def f(x):
        try:
            try:
                raise MyError(x)
            except MyError as e:
                if e.code > 1:
                    raise
                return "handled"
        except MyError as e:
            try:
                raise TypeError("nested")
            except TypeError:
                pass
            return ("outer", e.code)

    check(f, 1)
    check(f, 2)


def test_user_exception_propagates_unchanged_with_notes():
    def inner(x):
        raise MyError(x, "bad")

    def outer(x):
        return inner(x) + 1

    with pytest.raises(MyError) as info:
        interpret(outer, (7,), {}, InterpreterHooks())
    error = info.value
    assert type(error) is MyError and error.args == (7, "bad") and error.code == 7
    notes = error.__notes__
    assert len(notes) == 2
    assert notes[0].startswith(
        "  thunder: in test_user_exception_propagates_unchanged_with_notes.<locals>.inner at "
    )
    assert notes[0].endswith('raise MyError(x, "bad")')
    assert "outer" in notes[1] and notes[1].endswith("return inner(x) + 1")
    assert f"{__file__}:" in notes[0]


class Manager:
    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type.__name__ if exc_type else None))
        return self.swallow


def test_with_statements(check):
    def f(fail, swallow):
        log = []
        try:
            with Manager(log, swallow) as m:
                log.append(m is not None)
                if fail:
                    raise KeyError("k")
                log.append("body-done")
        except KeyError:
            log.append("caught")
        with Manager(log), Manager(log):
            log.append("nested")
        return log

    for fail in (False, True):
        for swallow in (False, True):
            check(f, fail, swallow)

    def g():
        with 1:
            pass

    check(g)


def test_with_torch_no_grad():
    torch = pytest.importorskip("torch")

    def f(x):
        with torch.no_grad():
            y = x * 2
        return y.requires_grad, torch.is_grad_enabled()

    x = torch.ones(2, requires_grad=True)
    assert interpret(f, (x,), {}, InterpreterHooks()) == f(x) == (False, True)


def test_exception_inside_generator_expression_and_else(check):
    def f(xs):
        try:
            return [1 / x for x in xs]
        except ZeroDivisionError as e:
            return str(e)

    check(f, [1, 2])
    check(f, [1, 0])
