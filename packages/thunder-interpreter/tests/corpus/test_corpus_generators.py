"""Corpus: generators, ``yield from``, send/throw/close, comprehensions and generator expressions."""

from __future__ import annotations

import pytest
import torch

PROGRAMS: list = []


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


def count_up(n):
    for i in range(n):  # noqa: UP028
        yield i


def scaled(xs, factor):
    for x in xs:
        yield x * factor


def delegating(xs):
    result = yield from scaled(xs, 2.0)
    yield from count_up(2)
    return result


def returns_a_value():
    yield 1
    return "done"


@program("t", lambda seed: seed + 2)
def simple_generator(a, n):
    return [a * i for i in count_up(n)]


@program("t", "t")
def generator_over_tensors(a, b):
    return list(scaled([a, b], 3.0))


@program("t", "t")
def yield_from_delegation(a, b):
    return list(delegating([a, b]))


@program("t")
def yield_from_returns_the_subgenerator_value(a):
    def outer():
        value = yield from returns_a_value()
        yield value

    return a, list(outer())


@program("t")
def generator_send(a):
    def accumulator():
        total = a * 0
        while True:
            value = yield total
            if value is None:
                break
            total = total + value

    gen = accumulator()
    next(gen)
    gen.send(a)
    result = gen.send(a * 2)
    gen.close()
    return result


@program("t")
def generator_throw_handled_inside(a):
    def guarded():
        try:
            yield a
        except ValueError:
            yield a * 10
        yield a * 100

    gen = guarded()
    first = next(gen)
    second = gen.throw(ValueError("stop"))
    return first, second, next(gen)


@program("t")
def generator_close_runs_finally(a):
    log = []

    def gen():
        try:
            yield a
            yield a * 2
        finally:
            log.append("closed")

    g = gen()
    first = next(g)
    g.close()
    return first, log


@program("t")
def generator_exhaustion_raises_stop_iteration(a):
    g = count_up(1)
    next(g)
    try:
        next(g)
    except StopIteration:
        return a + 1
    return a


@program("t")
def next_with_default(a):
    return next(iter([]), a), next(count_up(3), None)


@program("t")
def generator_expression_into_sum(a):
    return sum(a * i for i in range(4)), sum(i * i for i in range(5))


@program("t")
def generator_expression_with_filter(a):
    return [a + i for i in range(6) if i % 2 == 0]


@program("t")
def list_comprehension_nested(a):
    rows = [[i * j for j in range(3)] for i in range(3)]
    return a * sum(sum(row) for row in rows), rows


@program("t")
def dict_and_set_comprehensions(a):
    squares = {i: a * i for i in range(3)}
    evens = {i % 3 for i in range(10)}
    return squares, sorted(evens)


@program("t")
def comprehension_captures_enclosing_variable(a):
    scale = 2.0
    return [a * scale + i for i in range(2)]


@program("t")
def comprehension_shadows_and_restores_outer_name(a):
    i = 10
    values = [i for i in range(3)]
    return a * i, values


@program("t")
def comprehension_with_closure_inside(a):
    fns = [(lambda x, k=k: x * k) for k in range(3)]
    return [f(a) for f in fns]


@program("t")
def walrus_in_comprehension(a):
    values = [y for i in range(5) if (y := i * 2) > 2]
    return a * len(values), values, y


@program("t")
def infinite_generator_stopped_by_zip(a):
    def naturals():
        n = 0
        while True:
            yield n
            n += 1

    return [a * n for _, n in zip(range(3), naturals())]


@program("t")
def generator_in_a_class(a):
    class Bag:
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            yield from self.items

    return [x * 2 for x in Bag([a, a + 1])]


@program("t")
def iterator_protocol_class(a):
    class Countdown:
        def __init__(self, start):
            self.current = start

        def __iter__(self):
            return self

        def __next__(self):
            if self.current <= 0:
                raise StopIteration
            self.current -= 1
            return self.current

    return [a * i for i in Countdown(3)]


@program("t")
def generator_raising_stop_iteration_becomes_runtime_error(a):
    def bad():
        yield 1
        raise StopIteration

    try:
        list(bad())
    except RuntimeError as error:
        return a, str(error)
    return a * 0, ""


@program("t")
def unpacking_a_generator(a):
    first, second, *rest = count_up(4)
    return a * first + second, rest


@program("t")
def enumerate_and_reversed_over_generated_list(a):
    items = list(scaled([a, a * 2, a * 3], 1.0))
    return [x * i for i, x in enumerate(reversed(items))]


@program("t")
def generator_expression_passed_to_torch_stack(a):
    return torch.stack(tuple(a * i for i in range(3)))


@program("t")
def any_and_all_over_generators(a):
    return a * any(i > 3 for i in range(5)), all(i < 3 for i in range(5))


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)
