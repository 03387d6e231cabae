"""Corpus: calls, closures and cells, global/nonlocal, lambdas, partial, decorators, imports."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

PROGRAMS: list = []
SCALE = 2.0
COUNTER = [0]


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


def helper(x, y=1.0, *, shift=0.0):
    return x * y + shift


def varargs_helper(*args, **kwargs):
    total = args[0]
    for value in args[1:]:
        total = total + value
    for value in kwargs.values():
        total = total * value
    return total, sorted(kwargs)


def positional_only(x, /, y, *, z=3):
    return x + y * z


@program("t", "t")
def call_with_defaults_and_keywords(a, b):
    return helper(a), helper(a, 2.0), helper(a, y=b), helper(a, shift=1.0), helper(x=a, y=b, shift=2.0)


@program("t", "t")
def star_args_and_kwargs_packing(a, b):
    return varargs_helper(a, b, a, scale=2.0, other=0.5)


@program("t", "t")
def star_args_and_kwargs_unpacking(a, b):
    args = (a, b)
    kwargs = {"shift": 1.0}
    positional = [a]
    return helper(*args, **kwargs), helper(*positional, **{"y": 3.0}), varargs_helper(*args, *args)


@program("t", "t")
def positional_only_and_keyword_only(a, b):
    return positional_only(a, b), positional_only(a, y=b, z=1)


@program("t", kwargs={"b": "t", "c": lambda seed: seed + 1})
def keyword_arguments_of_the_compiled_function(a, *, b, c=2):
    return a * c + b


@program("t", "t", lambda seed: seed)
def compiled_function_with_star_args(*args):
    first, second, n = args
    return first * n + second


@program("t")
def lambdas(a):
    square = lambda x: x * x
    add = lambda x, y=2: x + y
    return square(a), add(a), (lambda *xs: len(xs))(1, 2, 3)


@program("t")
def closure_over_local(a):
    scale = 3.0

    def inner(x):
        return x * scale

    return inner(a)


@program("t")
def closure_over_tensor(a):
    bias = a.sum(0)

    def inner(x):
        return x + bias

    return inner(a)


@program("t")
def nonlocal_counter(a):
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x + count

    a = bump(a)
    a = bump(a)
    return a, count


@program("t")
def nested_closures_three_levels(a):
    first = 1.0

    def middle(x):
        second = 2.0

        def inner(y):
            return y * first + second

        return inner(x)

    return middle(a)


@program("t")
def closure_cell_changed_after_creation(a):
    factor = 1.0

    def inner(x):
        return x * factor

    factor = 5.0
    return inner(a)


@program("t")
def reads_a_module_global(a):
    return a * SCALE


@program("t")
def global_statement_that_only_reads(a):
    global SCALE
    return a * SCALE


@program("t")
def global_list_read_by_a_nested_function(a):
    def first():
        return COUNTER[0] + len(COUNTER)

    return a * first()


@program("t")
def functools_partial(a):
    scaled = functools.partial(helper, y=3.0)
    shifted = functools.partial(helper, shift=-1.0)
    return scaled(a), shifted(a, 2.0), functools.partial(torch.add, alpha=2)(a, a)


@program("t")
def functools_reduce_and_wraps(a):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) + 1

        return wrapper

    @decorator
    def double(x):
        return x * 2

    return functools.reduce(lambda x, y: x + y, [a, a, a]), double(a), double.__name__


@program("t")
def decorator_with_arguments(a):
    def repeat(times):
        def decorate(fn):
            def run(x):
                for _ in range(times):
                    x = fn(x)
                return x

            return run

        return decorate

    @repeat(3)
    def step(x):
        return x * 0.5 + 1

    return step(a)


@program("t")
def recursion(a):
    def power(x, n):
        if n == 0:
            return x * 0 + 1
        return x * power(x, n - 1)

    return power(a, 4)


@program("t")
def mutual_recursion(a):
    def is_even(n):
        return True if n == 0 else is_odd(n - 1)

    def is_odd(n):
        return False if n == 0 else is_even(n - 1)

    return a * 2 if is_even(4) else a


@program("t")
def import_inside_function(a):
    import math

    from torch.nn import functional as functional_module

    return functional_module.relu(a) * math.e


@program("t")
def import_submodule_inside_function(a):
    import torch.nn.functional

    return torch.nn.functional.gelu(a)


@program("t")
def torch_functional_calls(a):
    return F.relu(a), F.softmax(a, dim=-1), F.silu(a), torch.sigmoid(a), torch.tanh(a)


@program("t")
def function_attributes_and_defaults(a):
    def fn(x, scale=2.0):
        return x * scale

    fn.__defaults__ = (4.0,)
    return fn(a), fn.__name__, fn.__code__.co_argcount


@program("t")
def keyword_only_defaults_from_kwdefaults(a):
    def fn(x, *, scale=2.0, shift=1.0):
        return x * scale + shift

    return fn(a), fn(a, shift=0.0), fn(a, scale=3.0, shift=-1.0)


@program("t")
def generator_of_lambdas_capturing_loop_variable(a):
    fns = [lambda x, i=i: x + i for i in range(3)]
    late = [lambda x: x + i for i in range(3)]  # noqa: B023 -- late binding is the point
    return [fn(a) for fn in fns], [fn(a) for fn in late]


@program("t")
def calling_a_bound_method_stored_in_a_variable(a):
    items = []
    append = items.append
    append(a)
    append(a * 2)
    return items


@program("t")
def builtin_method_descriptors(a):
    words = str.split("a b c")
    joined = "-".join(words)
    return a * len(joined), str.upper(joined), dict.fromkeys(words, 0)


@program("t", "t")
def callable_arguments_chosen_by_python_value(a, b):
    ops = {"add": torch.add, "mul": torch.mul, "max": torch.maximum}
    return {name: op(a, b) for name, op in ops.items()}


@program("t", lambda seed: ["relu", "tanh", "sigmoid"][seed % 3])
def dispatch_on_a_string_argument(a, name):
    return getattr(torch, name)(a)


@program("t")
def annotations_on_nested_functions(a):
    def fn(x: torch.Tensor, y: float = 1.0) -> torch.Tensor:
        return x + y

    return fn(a), sorted(fn.__annotations__)


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)


def writes_a_global(a):
    global SCALE
    SCALE = 4.0
    return a * SCALE


def deletes_a_global(a):
    global COUNTER
    del COUNTER
    return a


def appends_to_a_global_list(a):
    COUNTER.append(1)
    return a


def stores_into_an_argument_dict(a, options):
    options["seen"] = True
    return a


def _global_state() -> tuple:
    return globals().get("SCALE", "deleted"), list(globals().get("COUNTER", ["deleted"]))


@pytest.mark.parametrize("fn", [writes_a_global, deletes_a_global, appends_to_a_global_list])
def test_global_writes_are_replayed_on_every_call(jit, fn) -> None:
    global SCALE, COUNTER
    jitted = jit(fn)
    for _ in range(3):  # the first call traces, the later ones run the epilogue of the cached entry
        SCALE, COUNTER = 2.0, [0]
        expected = fn(torch.ones(2))
        expected_state = _global_state()
        SCALE, COUNTER = 2.0, [0]
        torch.testing.assert_close(jitted(torch.ones(2)), expected)
        assert _global_state() == expected_state
    SCALE, COUNTER = 2.0, [0]


def test_changing_an_argument_container_in_place_is_replayed(jit) -> None:
    jitted = jit(stores_into_an_argument_dict)
    for scale in (2.0, 3.0):
        options = {"scale": scale}
        jitted(torch.ones(2), options)
        assert options == {"scale": scale, "seen": True}
