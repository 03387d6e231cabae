import math
import sys

from thunder.interpreter.vm import InterpreterHooks, interpret


def helper(x):
    return x + 1


def test_lookaside_redirects_call():
    class Hooks(InterpreterHooks):
        def lookaside(self, fn):
            if fn is helper:
                return lambda x: ("redirected", x)
            return None

    def f(x):
        return helper(x), [helper(i) for i in range(2)]

    assert interpret(f, (1,), {}, Hooks()) == (("redirected", 1), [("redirected", 0), ("redirected", 1)])


def test_lookaside_on_top_level_function():
    class Hooks(InterpreterHooks):
        def lookaside(self, fn):
            return (lambda *a: "top") if fn is helper else None

    assert interpret(helper, (1,), {}, Hooks()) == "top"


def test_check_opaque_call_sees_builtins_and_may_raise():
    calls = []

    class Hooks(InterpreterHooks):
        def check_opaque_call(self, fn, args, kwargs):
            calls.append((fn, args, kwargs))
            if fn is math.factorial:
                raise RuntimeError("forbidden")

    def f(xs):
        return len(xs), sorted(xs, reverse=True), helper(2)

    assert interpret(f, ([3, 1],), {}, Hooks()) == (2, [3, 1], 3)
    called = [fn for fn, _, _ in calls]
    assert len in called and sorted in called
    assert helper not in called  # Python code is interpreted, not opaque
    assert ([3, 1],) in [args for fn, args, _ in calls if fn is len]

    def g():
        return math.factorial(3)

    try:
        interpret(g, (), {}, Hooks())
    except RuntimeError as error:
        assert error.args == ("forbidden",)
    else:
        raise AssertionError("check_opaque_call did not stop the call")


def test_instruction_log_is_filled():
    class Hooks(InterpreterHooks):
        instruction_log = None

        def __init__(self):
            self.instruction_log = []

    def f(x):
        y = x * 2
        return helper(y)

    hooks = Hooks()
    assert interpret(f, (2,), {}, hooks) == 5
    log = hooks.instruction_log
    qualname, filename, lineno, opname, argrepr = log[0]
    assert filename == __file__
    multiply = ("BINARY_MULTIPLY", "") if sys.version_info < (3, 11) else ("BINARY_OP", "*")
    assert any(record[3:5] == multiply for record in log)
    assert any(record[0] == "helper" for record in log)
    assert log[-1][3] in ("RETURN_VALUE", "RETURN_CONST")
    assert all(isinstance(record[2], int) for record in log)
