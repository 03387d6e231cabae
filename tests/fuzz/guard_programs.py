"""Programs for the guard fuzzer: one Python value, used the way real code uses it, changing between calls.

A case is a *use* (the value as a shape, an index, a branch condition, a loop count, a number in
arithmetic, a dtype or device, a config dict, a callable), a *wrap* (the value bare or inside a
tuple, list, dict, named tuple, dataclass or ``functools.partial``; some wraps are one container
mutated in place between calls), a *route* (how the function reaches it: positional or keyword
argument, ``*args``, ``**kwargs``, a global, a closure cell, an attribute of a plain object or of an
``nn.Module``) and a sequence of values: the same kind with another value, or another kind (an int,
then a float, then a bool; a slice, then a tuple). A case reads one such value, or two (each use then
a helper function; the two may share objects, as real arguments do). The program is Python source,
so a failure prints as a function one can paste.
"""

from __future__ import annotations

import enum
import functools
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

__all__ = [
    "GuardCase", "Part", "Use", "USES", "WRAPS", "ROUTES", "guard_cases", "build", "NAMESPACE",
    "Color", "Shade", "Level", "Pair", "Box", "Frozen", "Holder",
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The kinds of values: the enums, records and callables programs see (test_guard_regressions.py's too)


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


class Shade(enum.Enum):  # equal values to Color's, another enum: only identity tells them apart
    RED = 1
    GREEN = 2


class Level(enum.IntEnum):  # equal to the ints 1 and 2
    LOW = 1
    HIGH = 2


class Pair(NamedTuple):
    a: Any
    b: Any


@dataclass
class Box:
    v: Any
    w: Any = 0


@dataclass(frozen=True)
class Frozen:
    v: Any


class Holder:
    """A plain object whose attribute the program reads."""


class Knob:
    """An object whose method and property read its attributes."""

    def __init__(self, k: Any) -> None:
        self.k = k

    @property
    def double(self) -> Any:
        return self.k * 2

    def apply(self, x: Any) -> Any:
        return x * self.k

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.k!r})"


class ShiftKnob(Knob):
    def apply(self, x: Any) -> Any:
        return x + self.k


SENTINEL = object()
OTHER_SENTINEL = object()


def affine(x: Any, k: Any = 2, c: Any = 0) -> Any:
    return x * k + c


def shift(x: Any, c: Any = 1) -> Any:
    return x + c


def pick(v: Any) -> Any:
    """The partial wrap: ``functools.partial(pick, value)()`` is the value."""
    return v


NAMESPACE: dict[str, Any] = {
    "torch": torch, "F": F, "functools": functools, "math": math, "Color": Color, "Shade": Shade,
    "Level": Level, "Pair": Pair, "Box": Box, "Frozen": Frozen, "Holder": Holder, "SENTINEL": SENTINEL,
    "affine": affine, "shift": shift, "pick": pick,
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Uses: the tensor ``x``, the body over ``x`` and the value ``v``, and values grouped by kind


@dataclass(frozen=True)
class Use:
    name: str
    tensor: str  # an expression making ``x``
    body: str  # lines over ``x`` and ``v``; the last one returns
    values: dict[str, tuple]  # kind -> values of that kind


S = torch.Size
ARANGE24 = "torch.arange(24.0)"
ARANGE210 = "torch.arange(210.0).reshape(5, 6, 7)"
SMALL = "torch.arange(6.0) / 3 - 1"
NUMBERS = {
    "int": (0, 1, 2, 3, -1, 7, 2**40),
    "float": (0.0, 0.5, 2.0, -1.25, 3.0, 1e-3),
    "bool": (True, False),
}
SHAPES_24 = {
    "size": (S([6, 4]), S([3, 8]), S([2, 3, 4]), S([24]), S([4, 6]), S([2, 12])),
    "tuple": ((6, 4), (3, 8), (2, -1), (-1,), (24,), (2, 3, 4), (7,), (4, -1, 2)),
    "list": ([6, 4], [3, 8], [-1, 2], [24]),
    "int": (24, -1, 12),
}
INDICES = {
    "int": (0, 1, -1, 4, 5),
    "slice": (slice(0, 2), slice(1, 4), slice(None, None, 2), slice(-3, None), slice(1, None, 3), slice(None)),
    "none": (None,),
    "ellipsis": (Ellipsis,),
    "tuple": ((slice(0, 2), 1), (slice(1, 4), 2), (Ellipsis, 0), (None, 1), (0, slice(None, None, 2), -1),
              (1, 2), (slice(None), None, 3), (Ellipsis, slice(1, 3)), (0, Ellipsis, None)),
    "list": ([0, 2], [1, 1, 3], [-1]),
    "bool": (True, False),
}  # fmt: skip
ANYTHING = {
    **NUMBERS,
    "none": (None,),
    "str": ("", "a", "mean"),
    "enum": (Color.RED, Color.GREEN, Shade.RED, Level.LOW),
    "tuple": ((), (0,), (1, 2)),
    "list": ([], [0]),
    "dict": ({}, {"a": 1}),
    "object": (SENTINEL, OTHER_SENTINEL),
}
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool)
DEVICES = {
    "device": (torch.device("cpu"), torch.device("meta"), torch.device("cuda", 0), torch.device("cuda", 1)),
    "str": ("cpu", "meta", "cuda"),
}
CONFIGS = (
    {"scale": 2}, {"scale": 3, "shift": 1}, {"shift": 1, "scale": 2.5}, {"scale": True}, {},
    {"scale": 2, "shift": 1.5}, {"scale": -1, "extra": None},
)  # fmt: skip
CALLABLES = {
    "partial": (functools.partial(affine, k=2), functools.partial(affine, k=3), functools.partial(affine, k=2, c=1),
                functools.partial(affine, 2.5), functools.partial(shift, 1), functools.partial(shift, c=-2.0),
                functools.partial(torch.clamp, min=0.0), functools.partial(torch.clamp, max=0.0),
                functools.partial(functools.partial(affine, k=2), c=5), functools.partial(torch.add, other=1)),
    "function": (affine, shift, torch.relu, torch.tanh, torch.Tensor.abs),
}  # fmt: skip


def _use(name: str, tensor: str, body: str, **values: tuple) -> Use:
    return Use(name, tensor, body, values)


USES: tuple[Use, ...] = (
    # as shapes
    Use("reshape", ARANGE24, "return x.reshape(v)", SHAPES_24),
    Use("view", ARANGE24, "return x.view(v)", SHAPES_24),
    Use("reshape_star", ARANGE24, "return x.reshape(*v)", {k: SHAPES_24[k] for k in ("size", "tuple", "list")}),
    _use("expand", "torch.arange(4.0).reshape(1, 4)", "return x.expand(v)",
         size=(S([3, 4]), S([2, 3, 4]), S([1, 4])), tuple=((2, 3, 4), (-1, 4), (5, -1), (3, 4)), list=([2, 4],)),
    _use("new_zeros", SMALL, "return x.new_zeros(v) + 1",
         size=(S([2, 3]), S([3]), S([])), tuple=((2, 3), (4,), (1, 1, 2)), list=([3],), int=(3, 0, 5)),
    _use("split", "torch.arange(5.0)", "return torch.split_with_sizes(x, v)",
         size=(S([1, 3, 1]), S([1, 4, 0]), S([5]), S([2, 3])), tuple=((2, 3), (1, 1, 1, 2), (3, 3)), list=([5], [4, 1])),
    _use("split_any", "torch.arange(5.0)", "return x.split(v)", int=(1, 2, 3), list=([2, 3], [4, 1]), tuple=((1, 4),)),
    _use("interpolate", "torch.arange(8.0).reshape(1, 1, 8)", "return F.interpolate(x, size=v)",
         int=(4, 6, 16), tuple=((4,), (12,)), size=(S([5]), S([3])), list=([3],)),
    _use("shape_compare", ARANGE24, "return x * 2 if x.shape == v else x - 1",
         size=(S([24]), S([6, 4])), tuple=((24,), (3, 8)), list=([24],), int=(24,)),
    # as indices
    Use("getitem", ARANGE210, "return x[v]", INDICES),
    Use("setitem", ARANGE210, "y = x.clone()\ny[v] = -1.0\nreturn y", INDICES),
    _use("bounds", ARANGE24, "return x[v[0]:v[1]]",
         tuple=((0, 2), (1, 4), (None, 3), (-5, None), (2, 2)), list=([0, 3], [None, None]), size=(S([1, 5]),)),
    # in branches
    _use("enum_is", SMALL, "if v is Color.RED:\n    return x + 1\nif v is Color.GREEN:\n    return x * 2\nreturn x - 1",
         enum=(Color.RED, Color.GREEN, Color.BLUE, Shade.RED, Level.LOW), int=(1, 2), none=(None,)),
    _use("enum_eq", SMALL, "if v == Level.LOW:\n    return x + 1\nreturn x - 1",
         enum=(Level.LOW, Level.HIGH, Color.RED), int=(1, 2), float=(1.0, 2.0), bool=(True, False)),
    Use("truthy", SMALL, "if v:\n    return x * 2\nreturn x / 2", ANYTHING),
    _use("str_eq", SMALL,
         "if v == 'mean':\n    return x.mean()\nif v == 'sum':\n    return x.sum()\nreturn x",
         str=("mean", "sum", "none", "Mean", ""), none=(None,), int=(1,)),
    Use("isinstance", SMALL,
        "if isinstance(v, bool):\n    return x + 3\nif isinstance(v, int):\n    return x + 1\n"
        "if isinstance(v, float):\n    return x + 2\nif isinstance(v, (tuple, list)):\n    return x * len(v)\nreturn x",
        ANYTHING),
    Use("type_is", SMALL, "return x * 3 if type(v) is int else x", ANYTHING),
    _use("is_none", SMALL, "return x if v is None else x + v", none=(None,), **NUMBERS),
    _use("membership", SMALL, "return x * 2 if v in ('a', 'b', 1) else x",
         str=("a", "b", "c"), int=(1, 2), bool=(True, False), float=(1.0,), none=(None,)),
    _use("activation", SMALL, "return {'relu': torch.relu, 'tanh': torch.tanh, 'sigmoid': torch.sigmoid}[v](x)",
         str=("relu", "tanh", "sigmoid", "gelu")),
    _use("getattr_str", SMALL, "return getattr(torch, v)(x)", str=("sin", "cos", "exp", "relu")),
    _use("reduction", SMALL, "return F.mse_loss(x, x.flip(0), reduction=v)", str=("mean", "sum", "none", "bad")),
    _use("approximate", SMALL, "return F.gelu(x, approximate=v)", str=("none", "tanh")),
    # as loop counts and iterables
    _use("range_count", SMALL, "y = x\nfor _ in range(v):\n    y = y * 2 + 1\nreturn y",
         int=(0, 1, 2, 3), bool=(True, False), float=(2.0,), enum=(Level.LOW, Level.HIGH)),
    _use("iterate", SMALL, "y = x\nfor i in v:\n    y = y * 2 + i\nreturn y",
         range=(range(3), range(1, 4), range(0, 6, 2), range(4, 0, -1), range(0)),
         tuple=((1, 2), (2, 1), (0.5,)), list=([3], [1, 2, 3]), size=(S([2, 2]),), str=("ab",)),
    _use("length", SMALL, "return x * len(v)",
         tuple=((), (1,), (1, 2)), list=([0], [0, 0, 0]), str=("ab", "abc"), dict=({}, {"a": 1}),
         range=(range(2), range(5)), size=(S([3, 4]),)),
    _use("enumerate", SMALL, "y = x\nfor i, s in enumerate(v):\n    y = y * s + i\nreturn y",
         tuple=((1, 2), (2, 1), (2.5,), (True, 3)), list=([3], [1, 2, 3])),
    # in arithmetic
    Use("scale", SMALL, "return x * v + 1", NUMBERS),
    Use("integer_tensor", "torch.arange(6)", "return x * v", NUMBERS),
    Use("power", SMALL, "return x.abs() ** v", NUMBERS),
    Use("python_math", SMALL, "k = v * 3 // 2 + v % 2\nreturn x + k", {**NUMBERS, "int": (1, 2, 3, 5)}),
    Use("full", SMALL, "return torch.full((3,), v)", NUMBERS),
    _use("arange", SMALL, "return torch.arange(v)", int=(1, 3, 5), float=(2.5, 3.0)),
    _use("tensor_of", SMALL, "return torch.tensor(v)", **NUMBERS, list=([1, 2], [1.0, 2.0], [True]),
         tuple=((3, 4), (0.5,))),
    Use("compare", SMALL, "return x * 2 if v > 1 else x", {k: NUMBERS[k] for k in ("int", "float", "bool")}),
    _use("unpack", SMALL, "a, b = v\nreturn x * a + b",
         tuple=((2, 1), (3, 0.5), (True, 2)), list=([1, 1], [2.0, -1]), pair=(Pair(2, 1), Pair(1.5, 0))),
    _use("clamp", SMALL, "return x.clamp(min=v)", int=(0, -1), float=(-0.5, 0.25), none=(None,)),
    # dtypes, devices, layouts and memory formats
    _use("to_dtype", SMALL, "return x.to(v)", dtype=DTYPES, **DEVICES),
    _use("dtype_kw", SMALL, "return torch.ones(3, dtype=v) * 2", dtype=DTYPES, none=(None,)),
    _use("dtype_branch", SMALL, "if v is torch.float64:\n    return x.double()\nreturn x.half() if v == torch.float16 else x",
         dtype=DTYPES),
    _use("dtype_property", SMALL, "return x.to(v) if v.is_floating_point else x.long()", dtype=DTYPES),
    _use("device_branch", SMALL, "return x * 2 if v.type == 'cpu' else x - 1", device=DEVICES["device"]),
    _use("device_arg", SMALL, "return torch.zeros(2, device=v) + x.sum()",
         device=(torch.device("cpu"),), str=("cpu",), none=(None,)),
    _use("layout", SMALL, "return x * 2 if v == torch.strided else x",
         layout=(torch.strided, torch.sparse_coo, torch.sparse_csr), none=(None,)),
    _use("memory_format", "torch.arange(24.0).reshape(1, 2, 3, 4)",
         "y = x.contiguous(memory_format=v)\nreturn y * 2 if v is torch.channels_last else y",
         format=(torch.contiguous_format, torch.channels_last, torch.preserve_format)),
    # config dicts
    _use("config", SMALL, "return x * v['scale'] + v.get('shift', 0)", dict=CONFIGS),
    _use("config_items", SMALL, "y = x\nfor key, s in v.items():\n    y = y * 2 + s * len(key)\nreturn y",
         dict=({"a": 1, "bb": 2}, {"bb": 2, "a": 1}, {"a": 1}, {"a": 1.5, "bb": 2, "ccc": 3}, {"a": True})),
    _use("config_keys", SMALL, "return x * 2 if 'scale' in v else x", dict=CONFIGS),
    _use("config_kwargs", SMALL, "return torch.clamp(x, **v)",
         dict=({"min": 0.0}, {"max": 0.5}, {"min": -0.5, "max": 0.5}, {}, {"min": 1})),
    _use("keyed", SMALL, "return x * v.get(Color.RED, 0) + v.get(1, 0)",
         dict=({Color.RED: 2}, {Color.GREEN: 3, Color.RED: 1}, {1: 2, Color.RED: 5}, {Level.LOW: 4}, {True: 3},
               {1.0: 2}, {Shade.RED: 7})),
    # objects: a method, a property
    _use("method", SMALL, "return v.apply(x)", object=(Knob(1), Knob(2), ShiftKnob(1), Knob(2.5), Knob(True))),
    _use("property", SMALL, "return x * v.double", object=(Knob(1), Knob(3), ShiftKnob(3), Knob(0.5))),
    # callables
    Use("call", SMALL, "return v(x)", CALLABLES),
    _use("call_more", SMALL, "return v(x, 3)",
         partial=(functools.partial(affine, c=1), functools.partial(affine, c=2), functools.partial(shift)),
         function=(affine, shift, torch.mul)),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Wraps: where in what container the value travels


@dataclass(frozen=True)
class Wrap:
    name: str
    access: str  # how the body reaches the value from ``p``, e.g. ``{p}[1]``
    make: Callable[[Any], Any]  # value -> the object passed
    mutate: Callable[[Any, Any], None] | None = None  # (object, value): in place, one object for all calls


def _set_item(index: Any) -> Callable[[Any, Any], None]:
    def set_item(container: Any, value: Any) -> None:
        container[index] = value

    return set_item


WRAPS: tuple[Wrap, ...] = (
    Wrap("bare", "{p}", lambda v: v),
    Wrap("tuple", "{p}[1]", lambda v: (0, v)),
    Wrap("list", "{p}[0]", lambda v: [v, 2]),
    Wrap("dict", "{p}['v']", lambda v: {"a": 1, "v": v}),
    Wrap("nested", "{p}[0]['cfg'][-1]", lambda v: ({"cfg": [1, v]},)),
    Wrap("namedtuple", "{p}.b", lambda v: Pair(0, v)),
    Wrap("dataclass", "{p}.v", lambda v: Box(v)),
    Wrap("frozen", "{p}.v", lambda v: Frozen(v)),
    Wrap("partial", "{p}()", lambda v: functools.partial(pick, v)),
    Wrap("partial_kw", "{p}()", lambda v: functools.partial(pick, v=v)),
    Wrap("namespace", "{p}.v", lambda v: types.SimpleNamespace(v=v)),
    # another container type from one value to the next (chosen by the value, so cases replay)
    Wrap(
        "record_of_any_class", "{p}.v", lambda v: (Box, Frozen, types.SimpleNamespace)[len(repr(v)) % 3](v=v)
    ),
    Wrap("tuple_or_list", "{p}[0]", lambda v: (v, 0) if len(repr(v)) % 2 else [v, 0]),
    # one container, mutated between calls
    Wrap("list_mutated", "{p}[0]", lambda v: [v], _set_item(0)),
    Wrap("dict_mutated", "{p}['v']", lambda v: {"v": v}, _set_item("v")),
    Wrap("dataclass_mutated", "{p}.v", lambda v: Box(v), lambda box, v: setattr(box, "v", v)),
)


# ---------------------------------------------------------------------------------------------
# Routes: how the function reaches the object, and the cases


ROUTES: tuple[str, ...] = (
    "positional", "keyword", "star_args", "star_kwargs", "global", "closure", "object_attribute", "module_attribute",
)  # fmt: skip


@dataclass(frozen=True)
class Part:
    """One value of a case: its use, wrap and route, the values of the calls, and its name (``p``, ``q``)."""

    use: Use
    wrap: Wrap
    route: str
    values: list[Any]
    name: str = "p"

    def reach(self, star_index: int) -> str:
        """The expression the wrap's access starts from."""
        n = self.name
        return {
            "positional": n, "keyword": n, "star_args": f"args[{star_index}]", "star_kwargs": f"kwargs[{n!r}]",
            "global": n.upper(), "closure": n, "object_attribute": f"o.{n}", "module_attribute": f"self.{n}",
        }[self.route]  # fmt: skip


@dataclass
class GuardCase:
    """A function reading one or two values; each call changes them (``parts[i].values[call]``)."""

    parts: list[Part]
    cache: str

    @property
    def tensors(self) -> list[str]:
        return ["x"] if len(self.parts) == 1 else [f"x{i}" for i in range(len(self.parts))]

    @property
    def is_module(self) -> bool:
        return any(part.route == "module_attribute" for part in self.parts)

    @property
    def source(self) -> str:
        return render(self)

    def describe(self) -> str:
        lines = []
        for part in self.parts:
            values = ", ".join(f"{type(v).__name__} {v!r}" for v in part.values)
            lines.append(
                f"{part.name}: use={part.use.name} wrap={part.wrap.name} route={part.route}; values: {values}"
            )
        return "\n".join(lines) + f"\ncache={self.cache!r}\n{self.source}"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def signature(case: GuardCase) -> str:
    """``x`` (or ``x0, x1``), positional parameters, ``o``, ``*args``, keyword-only parameters, ``**kwargs``."""
    routes = [part.route for part in case.parts]
    params = list(case.tensors) + [part.name for part in case.parts if part.route == "positional"]
    params += ["o"] if "object_attribute" in routes else []
    keywords = [part.name for part in case.parts if part.route == "keyword"]
    params += ["*args"] if "star_args" in routes else ["*"] if keywords else []
    params += keywords + (["**kwargs"] if "star_kwargs" in routes else [])
    return ", ".join(params)


def _accesses(case: GuardCase) -> list[str]:
    accesses, star_index = [], 0
    for part in case.parts:
        accesses.append(part.wrap.access.format(p=part.reach(star_index)))
        star_index += part.route == "star_args"
    return accesses


def render(case: GuardCase) -> str:
    """The source of ``make()``, returning the function (or module) the case jits. One value: its use's
    body inline; two: each use a helper function, called with its tensor and value."""
    accesses = _accesses(case)
    if len(case.parts) == 1:
        body, helpers = f"v = {accesses[0]}\n{case.parts[0].use.body}", ""
    else:
        calls = ", ".join(
            f"use_{part.name}({x}, {a})" for part, x, a in zip(case.parts, case.tensors, accesses)
        )
        body = f"return {calls}"
        helpers = "".join(
            f"def use_{part.name}(x, v):\n{_indent(part.use.body, 4)}\n\n\n" for part in case.parts
        )
    cells = "".join(f"    {part.name} = None\n" for part in case.parts if part.route == "closure")
    if case.is_module:
        attributes = "".join(
            f"    model.{p.name} = None\n" for p in case.parts if p.route == "module_attribute"
        )
        return (
            f"{helpers}def make():\n{cells}    class Model(torch.nn.Module):\n"
            f"        def forward(self, {signature(case)}):\n{_indent(body, 12)}\n\n"
            f"    model = Model()\n{attributes}    return model\n"
        )
    return f"{helpers}def make():\n{cells}    def f({signature(case)}):\n{_indent(body, 8)}\n    return f\n"


def build(case: GuardCase) -> tuple[Callable, dict[str, Any]]:
    """The function (or module) of ``case`` and the namespace its source runs in (its globals)."""
    namespace = dict(NAMESPACE)
    name = "+".join(f"{p.use.name}/{p.wrap.name}/{p.route}" for p in case.parts)
    exec(compile(case.source, f"<guard case {name}>", "exec"), namespace)
    return namespace["make"](), namespace


# ---------------------------------------------------------------------------------------------
# Sequences of values


@st.composite
def value_sequences(draw: st.DrawFn, use: Use, size: int) -> list[Any]:
    """``size`` values for ``use``: mostly the same kind as the previous one with another value, else
    another kind."""
    kinds = sorted(use.values)
    kind = draw(st.sampled_from(kinds))
    values = [draw(st.sampled_from(use.values[kind]))]
    for _ in range(size - 1):
        if len(kinds) > 1 and draw(st.integers(0, 2)) == 0:
            kind = draw(st.sampled_from(kinds))
        values.append(draw(st.sampled_from(use.values[kind])))
    return values


@st.composite
def guard_cases(draw: st.DrawFn, cache: str | None = None) -> GuardCase:
    """One value (two times in three) or two, over 2 to 5 calls; sometimes the first call again at the
    end (its cache entry must still answer it)."""
    calls = draw(st.integers(2, 5))
    repeat_first = draw(st.booleans())
    parts = []
    for name in ("p", "q")[: draw(st.sampled_from((1, 1, 2)))]:
        use = draw(st.sampled_from(USES))
        values = draw(value_sequences(use, calls))
        values += values[:1] if repeat_first else []
        parts.append(Part(use, draw(st.sampled_from(WRAPS)), draw(st.sampled_from(ROUTES)), values, name))
    cache_ = cache or draw(st.sampled_from(("constant values", "symbolic values")))
    return GuardCase(parts, cache_)
