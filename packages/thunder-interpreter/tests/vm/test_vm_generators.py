from thunder.interpreter.vm import InterpreterHooks, interpret


def test_simple_generator(check):
    def gen(n):
        for i in range(n):
            yield i * i
        return "done"

    def f(n):
        return list(gen(n)), sum(gen(n)), [x for x in gen(3)]

    check(f, 4)


def test_yield_from_and_return_value(check):
    def inner():
        yield 1
        yield 2
        return "inner-result"

    def outer():
        result = yield from inner()
        yield result
        yield from [10, 20]

    def f():
        return list(outer())

    check(f)


def test_send_throw_close(check):
    def accumulator():
        total = 0
        try:
            while True:
                value = yield total
                if value is None:
                    break
                total += value
        except KeyError:
            yield "caught"
        finally:
            pass
        return total

    def f():
        g = accumulator()
        out = [next(g), g.send(1), g.send(2), g.throw(KeyError("k"))]
        g.close()
        h = accumulator()
        next(h)
        try:
            h.send(None)
        except StopIteration as stop:
            out.append(("stop", stop.value))
        return out

    check(f)


def test_throw_into_yield_from(check):
    def inner():
        try:
            yield 1
            yield 2
        except ValueError:
            yield "inner-caught"
            return "r"

    def outer():
        value = yield from inner()
        yield ("outer", value)

    def f():
        g = outer()
        return [next(g), g.throw(ValueError), next(g)]

    check(f)


def test_generator_natively_consumed():
    def gen():
        yield from range(3)

    result = interpret(gen, (), {}, InterpreterHooks())
    assert list(zip(result, "abc")) == [(0, "a"), (1, "b"), (2, "c")]


def test_stop_iteration_inside_generator_becomes_runtime_error(check):
    def gen():
        yield 1
        next(iter([]))

    def f():
        return list(gen())

    check(f)


def test_user_iterator_class(check):
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n <= 0:
                raise StopIteration
            self.n -= 1
            return self.n

    def f():
        return [x for x in Countdown(3)], list(Countdown(2)), next(iter(Countdown(5)))

    check(f)
