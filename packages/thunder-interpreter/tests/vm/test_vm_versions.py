"""Each supported Python's own instruction forms, and the refusal of any other version.

The other VM tests run the same programs on every version; these pick the constructs whose
bytecode differs most between 3.10 and 3.13 (call layouts, cells, the 3.10 block stack, 3.13's
superinstructions and split formatting) and check the dispatch table covers the running version.
"""

import dis
import sys

import pytest

from thunder.interpreter.version import (
    SUPPORTED_PYTHON_VERSIONS,
    UnsupportedPythonError,
    check_python_version,
)
from thunder.interpreter.vm.dispatch import HANDLERS
from thunder.interpreter.vm.opcodes_unsupported import CONSTRUCTS

# Instructions never in a code object as dis shows it: instrumented forms (dis shows the base
# instruction), the tier-2 optimizer's, and the compiler's pseudo-instructions (3.12+, numbered
# from 256, replaced before the code object is made).
_NEVER_SEEN = {"INTERPRETER_EXIT", "ENTER_EXECUTOR", "EXIT_INIT_CHECK", "RESERVED"}
_FIRST_PSEUDO_INSTRUCTION = 256


def test_every_instruction_of_this_python_is_handled_or_refused_by_name() -> None:
    missing = {
        name
        for name in dis.opmap
        if name not in HANDLERS
        and name not in CONSTRUCTS
        and name not in _NEVER_SEEN
        and not name.startswith("INSTRUMENTED_")
        and dis.opmap[name] < _FIRST_PSEUDO_INSTRUCTION
    }
    assert missing == set(), f"Python {sys.version_info[:2]} instructions without a handler"


def test_this_python_is_supported() -> None:
    assert sys.version_info[:2] in SUPPORTED_PYTHON_VERSIONS
    check_python_version()


@pytest.mark.parametrize("version", [(3, 9, 18), (3, 14, 0), (4, 0, 0)])
def test_other_versions_are_refused_naming_both(version) -> None:
    with pytest.raises(UnsupportedPythonError) as raised:
        check_python_version(version)
    message = str(raised.value)
    assert ".".join(map(str, version)) in message
    assert "3.10, 3.11, 3.12, 3.13" in message


def test_method_and_keyword_calls(check) -> None:
    class Point:
        def __init__(self, x, y=0, *, scale=1):
            self.x, self.y, self.scale = x, y, scale

        def moved(self, dx, dy=0, *, times=1):
            return Point(self.x + dx * times, self.y + dy * times, scale=self.scale)

    def f(a):
        p = Point(a, y=2, scale=3).moved(1, dy=4, times=2)
        args, kwargs = (5,), {"times": 3}
        q = p.moved(*args, **kwargs)
        return p.x, p.y, q.x, q.y, q.scale, len([a, a]), max(a, 2, key=abs)

    check(f, 7)


def test_call_errors_name_the_callee(check) -> None:
    def callee(x):
        return x

    check(lambda: callee(**{"x": 1}, **{"x": 2}))
    check(lambda: callee(*[1], **[2]))


def test_closures_defaults_and_annotations(check) -> None:
    def f(a):
        def inner(b: int = a, *, c: int = a * 2) -> int:
            return a + b + c

        swapped_x, swapped_y = a, a + 1
        swapped_x, swapped_y = swapped_y, swapped_x
        return inner(), inner(1, c=2), inner.__annotations__["b"].__name__, swapped_x - swapped_y

    check(f, 3)


def test_argument_captured_by_a_closure(check) -> None:
    def f(x, y):
        def add():
            return x + y

        x = x * 10
        return add()

    check(f, 1, 2)


def test_unbound_locals_and_free_variables(check) -> None:
    def local_used_before_assignment():
        if False:
            value = 1
        return value  # noqa: F821

    def free_variable_unbound():
        def inner():
            return value

        result = inner()
        value = 1
        return result

    check(local_used_before_assignment)
    check(free_variable_unbound)


def test_formatting_with_conversions_and_specs(check) -> None:
    def f(x, width):
        return f"{x!r:>{width}}|{x!s}|{x!a}|{x:.2f}|{x}|{'text'}|{x:{width}.1f}"

    check(f, 3.14159, 8)


def test_comparisons_feeding_branches(check) -> None:
    class Loose:
        def __lt__(self, other):
            return [1]  # truthy, not a bool: the branch must test its truth

    def f(x):
        out = []
        if Loose() < x:
            out.append("lt")
        if 1 < x < 10:
            out.append("chain")
        if not x == 3:
            out.append("not")
        return out, x > 2 and x < 5

    check(f, 3)
    check(f, 20)


def test_exceptions_raised_inside_handlers_and_finally(check) -> None:
    def f(n):
        log = []
        try:
            try:
                1 / n
            except ZeroDivisionError as error:
                log.append(type(error).__name__)
                raise ValueError("inner") from error
            finally:
                log.append("finally")
        except ValueError as error:
            log.append((str(error), type(error.__cause__).__name__, type(error.__context__).__name__))
        try:
            raise KeyError("k")
        except (TypeError, KeyError):
            log.append("tuple")
        for i in range(3):
            try:
                if i == 1:
                    continue
                log.append(i)
            finally:
                log.append(f"f{i}")
        return log

    check(f, 0)
    check(f, 1)


def test_handled_exception_is_restored_after_nested_handlers(check) -> None:
    def f():
        try:
            raise KeyError("outer")
        except KeyError:
            try:
                raise ValueError("inner")
            except ValueError:
                pass
            return sys.exc_info()[0].__name__

    check(f)


def test_with_statements_suppressing_and_not(check) -> None:
    class Manager:
        def __init__(self, log, suppress):
            self.log, self.suppress = log, suppress

        def __enter__(self):
            self.log.append("enter")
            return self

        def __exit__(self, kind, value, traceback):
            self.log.append(kind.__name__ if kind else None)
            return self.suppress

    def f(suppress):
        log = []
        with Manager(log, True):
            raise KeyError
        try:
            with Manager(log, suppress) as manager, Manager(log, False):
                log.append(manager.suppress)
                raise ValueError
        except ValueError:
            log.append("escaped")
        return log

    check(f, False)
    check(f, True)


def test_generators_delegating_with_send_and_throw(check) -> None:
    def inner():
        received = yield 1
        try:
            yield received
        except KeyError:
            yield "caught"
        return "done"

    def outer(log):
        result = yield from inner()
        log.append(result)
        yield result

    def f():
        log = []
        gen = outer(log)
        values = [next(gen), gen.send("sent"), gen.throw(KeyError), next(gen)]
        return values, log

    check(f)


def test_match_statements(check) -> None:
    class Point:
        __match_args__ = ("x", "y")

        def __init__(self, x, y):
            self.x, self.y = x, y

    def f(subject):
        match subject:
            case {"kind": "point", "x": x, **rest}:
                return "mapping", x, sorted(rest)
            case Point(0, y):
                return "on the y axis", y
            case Point(x=x, y=y) if x == y:
                return "diagonal", x
            case [first, *others]:
                return "sequence", first, len(others)
            case str() | bytes():
                return "text"
            case _:
                return "other"

    for subject in (
        {"kind": "point", "x": 1, "z": 2},
        Point(0, 5),
        Point(2, 2),
        Point(1, 2),
        [1, 2, 3],
        "s",
        4.0,
    ):
        check(f, subject)


def test_super_calls(check) -> None:
    class Base:
        def value(self, x):
            return x + 1

    class Child(Base):
        def value(self, x):
            return super().value(x) * 2

    check(lambda x: Child().value(x), 3)
