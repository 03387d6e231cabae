"""Guards, one kind at a time: one jitted function called with a changed value must answer as eager.

One test per row of the guard table (ARCHITECTURE.md, "Guards and side effects"), plus the stale
answers of issue 21. Each calls ONE ``thunder.jit``-ted function with a sequence of values -- the
same kind with another value, or another kind -- and every call must give eager's result (or raise
eager's exception type). Where both cache modes apply, both run.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from guard_check import check_calls
from guard_programs import Box, Color, Level, Pair, Shade

CACHES = pytest.mark.parametrize("cache", ["constant values", "symbolic values"])


def _calls(x: torch.Tensor, *values: Any) -> list:
    return [((x, v), {}) for v in values]


def _check(fn: Callable, x: torch.Tensor, values: list, cache: str = "constant values") -> None:
    check_calls(fn, _calls(x, *values), cache=cache)


# ---------------------------------------------------------------------------------------------
# Issue 21: the stale answers reported


@CACHES
def test_reshape_to_another_torch_size(cache: str) -> None:
    _check(lambda x, s: x.reshape(s), torch.arange(24.0), [torch.Size([6, 4]), torch.Size([3, 8])], cache)


@CACHES
def test_index_with_another_slice(cache: str) -> None:
    x = torch.arange(30.0).reshape(5, 6)
    _check(lambda x, i: x[i], x, [slice(0, 2), slice(1, 4), slice(None, None, 2), slice(-2, None)], cache)


@CACHES
def test_index_with_another_tuple_of_slice_and_int(cache: str) -> None:
    x = torch.arange(30.0).reshape(5, 6)
    _check(
        lambda x, i: x[i], x, [(slice(0, 2), 1), (slice(1, 4), 1), (slice(0, 2), 2), (slice(0, 2), -1)], cache
    )


def test_enum_member_in_a_branch() -> None:
    _check(
        lambda x, e: x + 1 if e is Color.RED else x - 1,
        torch.zeros(3),
        [Color.RED, Color.GREEN, Shade.RED, Color.RED],
    )


@CACHES
def test_split_with_other_sizes(cache: str) -> None:
    sizes = [torch.Size([1, 3, 1]), torch.Size([1, 4, 0]), torch.Size([5]), (2, 3)]
    _check(lambda x, s: torch.split_with_sizes(x, s), torch.arange(5.0), sizes, cache)


@CACHES
def test_interpolate_to_another_size(cache: str) -> None:
    x = torch.arange(8.0).reshape(1, 1, 8)
    _check(lambda x, s: F.interpolate(x, size=s), x, [4, 6, (12,), torch.Size([5])], cache)


# ---------------------------------------------------------------------------------------------
# Numbers: value (type only under "symbolic values", unless the value decides something), type


@CACHES
def test_number_value_in_arithmetic(cache: str) -> None:
    _check(lambda x, k: x * k + 1, torch.arange(4.0), [2, 3, -1, 2], cache)


@CACHES
def test_number_type_int_float_bool(cache: str) -> None:
    # an int keeps an integer tensor integral, a float makes it float, a bool multiplies as 0/1
    _check(lambda x, k: x * k, torch.arange(4), [2, 2.0, True, 3, 0.5, False], cache)


@CACHES
def test_bool_int_float_make_other_dtypes(cache: str) -> None:
    _check(lambda x, k: torch.full((2,), k) + x.sum() * 0, torch.arange(3), [1, True, 1.0, 0, False], cache)


@CACHES
def test_number_deciding_a_branch(cache: str) -> None:
    _check(lambda x, k: x * 2 if k > 1 else x, torch.arange(4.0), [2, 0, 3, 1.5, 0.5, True], cache)


@CACHES
def test_number_as_loop_count(cache: str) -> None:
    def fn(x: torch.Tensor, n: Any) -> torch.Tensor:
        for _ in range(n):
            x = x * 2 + 1
        return x

    _check(fn, torch.zeros(2), [1, 3, 0, 2, True], cache)


def test_python_arithmetic_on_the_number() -> None:
    _check(lambda x, k: x + (k * 3 // 2 + k % 2), torch.zeros(2), [1, 2, 2.5, True, 5])


def test_isinstance_tells_bool_int_and_float_apart() -> None:
    def fn(x: torch.Tensor, v: Any) -> torch.Tensor:
        if isinstance(v, bool):
            return x + 3
        if isinstance(v, int):
            return x + 1
        if isinstance(v, float):
            return x + 2
        return x

    _check(fn, torch.zeros(2), [True, 1, 1.0, {}, 0, [], 0.0, None, 1])


# ---------------------------------------------------------------------------------------------
# str, None, hashable constants by identity


@CACHES
def test_string_in_a_branch(cache: str) -> None:
    def fn(x: torch.Tensor, s: str) -> torch.Tensor:
        if s == "mean":
            return x.mean()
        if s == "sum":
            return x.sum()
        return x

    _check(fn, torch.arange(4.0), ["mean", "sum", "none", "mean"], cache)


@CACHES
def test_string_chooses_the_reduction(cache: str) -> None:
    x = torch.arange(4.0)
    _check(lambda x, r: F.mse_loss(x, x.flip(0), reduction=r), x, ["mean", "sum", "none", "bad"], cache)


@CACHES
def test_none_or_a_number(cache: str) -> None:
    _check(lambda x, v: x if v is None else x + v, torch.zeros(2), [None, 1, None, 2.5], cache)


def test_sentinel_object_by_identity() -> None:
    first, second = object(), object()
    sentinel = types.SimpleNamespace(first=first)
    _check(lambda x, v: x + 1 if v is sentinel.first else x - 1, torch.zeros(2), [first, second, first])


def test_int_enum_is_not_its_int() -> None:
    _check(lambda x, v: x + 1 if v is Level.LOW else x - 1, torch.zeros(2), [Level.LOW, 1, Level.HIGH, True])


# ---------------------------------------------------------------------------------------------
# torch.Size, tuples and lists: length and each element, recursively


@CACHES
def test_tuple_elements_and_length(cache: str) -> None:
    shapes = [(6, 4), (3, 8), (24,), (2, 3, 4), (2, -1), [4, 6], torch.Size([8, 3]), 24]
    _check(lambda x, s: x.reshape(s), torch.arange(24.0), shapes, cache)


@CACHES
def test_nested_containers(cache: str) -> None:
    values = [((1, 2),), ((1, 3),), ((1, 2, 3),), ([1, 2],), ((1, 2.5),)]
    _check(lambda x, p: x * p[0][1] + len(p[0]), torch.arange(3.0), values, cache)


def test_list_mutated_in_place_between_calls() -> None:
    x, shape = torch.arange(24.0), [6, 4]

    def call(new: list) -> Callable:
        def prepare() -> tuple:
            shape[:] = new
            return (x, shape), {}

        return prepare

    check_calls(lambda x, s: x.reshape(s), [call([6, 4]), call([3, 8]), call([2, 3, 4])])


@CACHES
def test_size_compared_with_tuples_and_lists(cache: str) -> None:
    values = [torch.Size([24]), [24], torch.Size([24]), (24,), (3, 8)]
    _check(lambda x, v: x * 2 if x.shape == v else x - 1, torch.arange(24.0), values, cache)


# ---------------------------------------------------------------------------------------------
# dicts: keys, order, values


@CACHES
def test_dict_values(cache: str) -> None:
    configs = [{"scale": 2}, {"scale": 3}, {"scale": 2.5}, {"scale": True}]
    _check(lambda x, c: x * c["scale"], torch.arange(3.0), configs, cache)


def test_dict_keys() -> None:
    configs = [{"scale": 2}, {"shift": 2}, {"scale": 2, "shift": 1}, {}]
    _check(lambda x, c: x * c.get("scale", 1) + c.get("shift", 0), torch.arange(3.0), configs)


def test_dict_order() -> None:
    def fn(x: torch.Tensor, c: dict) -> torch.Tensor:
        for value in c.values():
            x = x * 2 + value
        return x

    _check(fn, torch.zeros(2), [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2, "c": 3}])


def test_dict_mutated_in_place_between_calls() -> None:
    x, config = torch.arange(3.0), {"scale": 2}

    def call(scale: Any) -> Callable:
        def prepare() -> tuple:
            config["scale"] = scale
            return (x, config), {}

        return prepare

    check_calls(lambda x, c: x * c["scale"], [call(2), call(3), call(0.5)])


@CACHES
def test_dict_as_keyword_arguments(cache: str) -> None:
    configs = [{"min": 0.0}, {"max": 0.5}, {"min": -0.5, "max": 0.5}, {"min": 1}]
    _check(lambda x, c: torch.clamp(x, **c), torch.linspace(-1, 1, 5), configs, cache)


# ---------------------------------------------------------------------------------------------
# slices, Ellipsis, ranges


@CACHES
def test_slice_then_tuple_then_int(cache: str) -> None:
    x = torch.arange(210.0).reshape(5, 6, 7)
    values = [slice(0, 2), (slice(0, 2), 1), 1, (Ellipsis, 1), None, (None, 1), Ellipsis, [0, 2], slice(0, 2)]
    _check(lambda x, i: x[i], x, values, cache)


def test_ellipsis_or_a_full_slice() -> None:
    _check(lambda x, i: x[i, 0], torch.arange(24.0).reshape(2, 3, 4), [Ellipsis, slice(None), Ellipsis])


@CACHES
def test_setitem_with_another_slice(cache: str) -> None:
    def fn(x: torch.Tensor, i: Any) -> torch.Tensor:
        y = x.clone()
        y[i] = -1.0
        return y

    _check(fn, torch.arange(6.0), [slice(0, 2), slice(1, 4), 3, slice(None, None, 2)], cache)


def test_range_object() -> None:
    def fn(x: torch.Tensor, r: range) -> torch.Tensor:
        for i in r:
            x = x * 2 + i
        return x

    _check(fn, torch.zeros(2), [range(3), range(4), range(1, 4), range(0, 6, 2), range(0)])


# ---------------------------------------------------------------------------------------------
# dtypes, devices, layouts, memory formats


def test_dtype() -> None:
    dtypes = [torch.float64, torch.float16, torch.int64, torch.bfloat16, torch.bool, torch.float64]
    _check(lambda x, d: x.to(d), torch.linspace(-2, 2, 5), dtypes)


def test_dtype_of_a_factory() -> None:
    _check(
        lambda x, d: torch.ones(3, dtype=d) * 2,
        torch.zeros(1),
        [torch.float32, torch.int32, None, torch.bool],
    )


def test_device() -> None:
    devices = [torch.device("cpu"), torch.device("meta"), torch.device("cuda", 0), torch.device("cpu")]
    _check(lambda x, d: x * 2 if d.type == "cpu" else x - 1, torch.zeros(2), devices)


def test_layout() -> None:
    layouts = [torch.strided, torch.sparse_coo, torch.strided, torch.sparse_csr]
    _check(lambda x, layout: x * 2 if layout == torch.strided else x - 1, torch.zeros(2), layouts)


def test_memory_format() -> None:
    formats = [torch.contiguous_format, torch.channels_last, torch.preserve_format]
    _check(lambda x, m: x * 2 if m is torch.channels_last else x - 1, torch.zeros(2), formats)


# ---------------------------------------------------------------------------------------------
# named tuples, dataclasses, functools.partial, objects' attributes


@CACHES
def test_named_tuple_fields(cache: str) -> None:
    values = [Pair(2, 1), Pair(3, 1), Pair(2, 0.5), (2, 1), Pair(True, 1)]
    _check(lambda x, p: x * p[0] + p[1], torch.arange(3.0), values, cache)


@CACHES
def test_dataclass_fields(cache: str) -> None:
    _check(lambda x, b: x * b.v + b.w, torch.arange(3.0), [Box(2), Box(3), Box(2, 1), Box(2.5)], cache)


def test_dataclass_mutated_between_calls() -> None:
    x, box = torch.arange(3.0), Box(2)

    def call(scale: Any) -> Callable:
        def prepare() -> tuple:
            box.v = scale
            return (x, box), {}

        return prepare

    check_calls(lambda x, b: x * b.v, [call(2), call(3), call(1.5)])


def _affine(x: torch.Tensor, k: Any = 2, c: Any = 0) -> torch.Tensor:
    return x * k + c


def _shift(x: torch.Tensor, c: Any = 1) -> torch.Tensor:
    return x + c


@CACHES
def test_partial_bound_arguments(cache: str) -> None:
    partials = [
        functools.partial(_affine, k=2),
        functools.partial(_affine, k=3),
        functools.partial(_affine, k=2, c=1),
        functools.partial(_affine, 2.5),
        functools.partial(_affine, k=2),
    ]
    _check(lambda x, p: p(x), torch.arange(3.0), partials, cache)


def test_partial_function() -> None:
    partials = [
        functools.partial(_affine, c=1),
        functools.partial(_shift, c=1),
        functools.partial(torch.clamp, min=0.5),
    ]
    _check(lambda x, p: p(x), torch.arange(3.0), partials)


def _pick(v: Any) -> Any:
    return v


def test_partial_keyword_bound_to_an_empty_tuple() -> None:
    values = [functools.partial(_pick, v=()), functools.partial(_pick, v=True), functools.partial(_pick, v=1)]
    _check(lambda x, p: x * 2 if p() else x / 2, torch.ones(2), values)


class _Knob:
    def __init__(self, k: Any) -> None:
        self.k = k

    @property
    def double(self) -> Any:
        return self.k * 2


@pytest.mark.parametrize("read", ["attribute", "property"])
def test_attribute_of_an_object_bound_in_a_partial(read: str) -> None:
    def fn(x: torch.Tensor, p: Callable) -> torch.Tensor:
        return x * (p().k if read == "attribute" else p().double)

    _check(fn, torch.ones(2), [functools.partial(_pick, _Knob(0.5)), functools.partial(_pick, _Knob(3))])


def test_function_argument() -> None:
    _check(lambda x, f: f(x), torch.linspace(-1, 1, 5), [torch.relu, torch.tanh, _shift, torch.Tensor.abs])


def test_attribute_of_a_plain_object() -> None:
    x, holder = torch.arange(3.0), types.SimpleNamespace(scale=2)

    def call(scale: Any) -> Callable:
        def prepare() -> tuple:
            holder.scale = scale
            return (x, holder), {}

        return prepare

    check_calls(lambda x, o: x * o.scale, [call(2), call(3), call(0.5), call(True)])


def test_objects_of_other_classes_with_the_same_attribute() -> None:
    class A:
        scale = 2

        def apply(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    class B(A):
        def apply(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.scale

    _check(lambda x, o: o.apply(x), torch.arange(3.0), [A(), B(), A()])


def test_attribute_of_a_module() -> None:
    import thunder

    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale, self.mode = 2, "mul"

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale if self.mode == "mul" else x + self.scale

    model = Scale()
    jitted = thunder.jit(model)
    x = torch.arange(3.0)
    for scale, mode in [(2, "mul"), (3, "mul"), (3, "add"), (0.5, "add"), (2, "mul")]:
        model.scale, model.mode = scale, mode
        torch.testing.assert_close(jitted(x), model(x), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# globals and closure cells

SCALE: Any = 2
ACTIVATION: Callable = torch.relu


def _reads_globals(x: torch.Tensor) -> torch.Tensor:
    return ACTIVATION(x) * SCALE


@CACHES
def test_globals(cache: str) -> None:
    x = torch.linspace(-1, 1, 5)

    def set_globals(scale: Any, activation: Callable) -> Callable:
        def prepare() -> tuple:
            globals().update(SCALE=scale, ACTIVATION=activation)
            return (x,), {}

        return prepare

    try:
        check_calls(
            _reads_globals,
            [
                set_globals(2, torch.relu),
                set_globals(3, torch.relu),
                set_globals(3, torch.tanh),
                set_globals(1.5, torch.tanh),
            ],
            cache=cache,
        )
    finally:
        globals().update(SCALE=2, ACTIVATION=torch.relu)


@CACHES
def test_closure_cells(cache: str) -> None:
    shape: Any = (6, 4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(shape)

    x = torch.arange(24.0)

    def set_shape(new: Any) -> Callable:
        def prepare() -> tuple:
            nonlocal shape
            shape = new
            return (x,), {}

        return prepare

    check_calls(
        fn, [set_shape((6, 4)), set_shape((3, 8)), set_shape(torch.Size([2, 12])), set_shape(24)], cache=cache
    )


# ---------------------------------------------------------------------------------------------
# how the value arrives: keyword, *args, **kwargs


@CACHES
def test_keyword_and_variadic_arguments(cache: str) -> None:
    x = torch.arange(24.0)

    def fn(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return x.reshape(args[0]) * kwargs.get("k", 1)

    calls = [((x, (6, 4)), {"k": 2}), ((x, (3, 8)), {"k": 2}), ((x, (3, 8)), {"k": 3}), ((x, (3, 8)), {})]
    check_calls(fn, calls, cache=cache)


def test_one_object_passed_twice() -> None:
    import thunder

    # no cloning here: the two arguments must be one object
    x, shape = torch.arange(24.0), [6, 4]
    jitted = thunder.jit(lambda x, q, p: x.reshape(p))
    assert jitted(x, shape, shape).shape == (6, 4)
    assert jitted(x, shape, 24).shape == (24,)
    assert jitted(x, shape, (3, 8)).shape == (3, 8)


# ---------------------------------------------------------------------------------------------
# Not guards: bugs the guard fuzzer met (fixed)


def test_index_with_a_bool() -> None:
    _check(lambda x, i: x[i], torch.arange(6.0).reshape(2, 3), [True, False])


def test_str_in_tensor_arithmetic_raises_type_error() -> None:
    _check(lambda x, s: x + s, torch.zeros(2), ["a"])


def test_partial_of_a_torch_function_with_keywords() -> None:
    _check(lambda x, p: p(x), torch.zeros(2), [functools.partial(torch.add, other=1)])
