import functools


def add(a, b=10, *args, c=5, d, **kwargs):
    return a + b + c + d + sum(args) + sum(kwargs.values())


def positional_only(a, b, /, c=3):
    return (a, b, c)


def test_positional_keyword_star_args(check, run_vm):
    def f(x):
        return add(1, 2, 3, 4, d=5, e=6) + add(x, d=1) + add(*[1, 2], **{"d": 3, "z": 4})

    check(f, 7)


def test_defaults_and_keyword_only(check, run_vm):
    check(add, 1, d=2)
    check(add, 1, 2, 3, c=4, d=5, e=6)
    check(positional_only, 1, 2)
    check(positional_only, 1, 2, c=9)


def test_binding_errors_match_native(check, run_vm):
    check(add, 1)
    check(positional_only, 1, b=2)
    check(lambda a: a, 1, 2)
    check(lambda a: a, a=1, b=2)

    def f():
        return add(1, 1, d=1, a=2)

    check(f)


def test_call_function_ex_and_kw_names(check, run_vm):
    def g(*args, **kwargs):
        return args, kwargs

    def f(xs, ks):
        return g(*xs, 1, *xs, k=2, **ks), g(*xs), g(**ks), g(x=1, y=2)

    check(f, [1, 2], {"a": 1})


def test_duplicate_keyword_in_merge(check, run_vm):
    def g(**kwargs):
        return kwargs

    def f():
        return g(**{"a": 1}, **{"a": 2})

    check(f)


def test_closures_and_nonlocal(check, run_vm):
    def f(n):
        total = 0

        def bump(k):
            nonlocal total
            total += k
            return total

        for i in range(n):
            bump(i)
        make = lambda y: lambda z: n + y + z
        return total, make(1)(2)

    check(f, 5)


def test_closure_over_argument_cell(check, run_vm):
    def f(a):
        def g():
            return a * 2

        a = a + 1
        return g()

    check(f, 3)


COUNTER = 0


def test_global_store_and_delete(check, run_vm):
    def f():
        global COUNTER
        COUNTER = COUNTER + 1
        return COUNTER

    before = COUNTER
    assert run_vm(f) == before + 1


def test_bound_methods_partial_and_call_objects(check, run_vm):
    class Adder:
        def __init__(self, base):
            self.base = base

        def __call__(self, x):
            return self.base + x

        def add(self, x, y=0):
            return self.base + x + y

        @staticmethod
        def static(x):
            return x * 3

        @classmethod
        def klass(cls, x):
            return cls.__name__, x

    def f(x):
        adder = Adder(x)
        partial = functools.partial(adder.add, 1)
        bound = adder.add
        return adder(2), partial(y=5), bound(1), Adder.static(2), Adder.klass(4), adder.static(1)

    check(f, 10)


def test_class_with_python_new_and_metaclass_call(check, run_vm):
    class Meta(type):
        def __call__(cls, *args):
            instance = super().__call__(*args)
            instance.tag = "meta"
            return instance

    class WithMeta(metaclass=Meta):
        def __init__(self, x):
            self.x = x

    class WithNew:
        def __new__(cls, value):
            instance = super().__new__(cls)
            instance.value = value * 2
            return instance

    def f():
        a = WithMeta(3)
        b = WithNew(4)
        return a.x, a.tag, b.value, dict(a=1), list((1, 2))

    check(f)


def test_recursion_and_lambda_defaults(check, run_vm):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def f(n):
        funcs = [lambda i=i: i * i for i in range(n)]
        return fact(n), [g() for g in funcs]

    check(f, 6)


def test_builtins_calling_back_user_code(check, run_vm):
    def f(xs):
        return (
            list(map(lambda x: x + 1, xs)),
            list(filter(lambda x: x % 2, xs)),
            sorted(xs, key=lambda x: -x),
            min(xs, key=lambda x: abs(x - 3)),
            max(xs, key=lambda x: x % 3),
            functools.reduce(lambda a, b: a * b, xs),
            list(enumerate(zip(xs, xs))),
        )

    check(f, [1, 2, 3, 4, 5])


def test_comprehension_cells_and_shadowing(check):
    def f(xs):
        x = "outer"
        funcs = [lambda: x for x in xs]
        squares = [x * x for x in xs]
        nested = [[y + x for y in xs] for x in xs]
        return [g() for g in funcs], squares, nested, x

    check(f, [1, 2, 3])

    def g(xs):
        return [x for x in xs], x_defined()

    def x_defined():
        return "ok"

    check(g, [1])

    def h(xs):
        out = [y for y in xs]
        return y  # noqa: F821 - y is not bound outside the comprehension

    check(h, [1])


def test_methods_of_classes_defined_during_run_do_not_get_closure_sources():
    from thunder.core.sources import ClosureSource
    from thunder.interpreter.vm import InterpreterHooks, interpret

    seen = []

    class Hooks(InterpreterHooks):
        def on_load(self, value, source):
            seen.append(source)
            return value

    def f(n):
        class Local:
            def get(self):
                return n

        return Local().get()

    assert interpret(f, (3,), {}, Hooks()) == 3
    assert not any(isinstance(source, ClosureSource) for source in seen)
