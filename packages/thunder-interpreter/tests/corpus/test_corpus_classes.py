"""Corpus: classes, super(), properties and descriptors, __getattr__, dataclasses, __call__,
match statements and the walrus operator."""

from __future__ import annotations

import dataclasses
import enum
from typing import NamedTuple

import pytest
import torch

PROGRAMS: list = []


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


class Base:
    scale = 2.0

    def __init__(self, offset):
        self.offset = offset

    def apply(self, x):
        return x * self.scale + self.offset

    @classmethod
    def make(cls, offset):
        return cls(offset)

    @staticmethod
    def twice(x):
        return x * 2


class Child(Base):
    scale = 3.0

    def __init__(self, offset, extra):
        super().__init__(offset)
        self.extra = extra

    def apply(self, x):
        return super().apply(x) + self.extra


class Grandchild(Child):
    def apply(self, x):
        return super(Child, self).apply(x) - 1  # skips Child on purpose


class Mixin:
    def describe(self):
        return f"{type(self).__name__}:{super().describe()}"


class Described:
    def describe(self):
        return "described"


class Combined(Mixin, Described):
    pass


class Positive:
    """A data descriptor that clamps what is stored."""

    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.name)

    def __set__(self, obj, value):
        setattr(obj, self.name, max(value, 0.0))


class Config:
    rate = Positive()

    def __init__(self, rate):
        self.rate = rate


class Temperature:
    def __init__(self, celsius):
        self._celsius = celsius

    @property
    def fahrenheit(self):
        return self._celsius * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self._celsius = (value - 32) * 5 / 9


class Lazy:
    def __init__(self):
        self.known = 1.0

    def __getattr__(self, name):
        if name.startswith("scale_"):
            return float(name.removeprefix("scale_"))
        raise AttributeError(name)


@dataclasses.dataclass
class Settings:
    width: int
    gain: float = 1.5
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    x: float
    y: float

    def norm1(self):
        return abs(self.x) + abs(self.y)


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


class Mode(enum.Enum):
    ADD = "add"
    MUL = "mul"


class Affine:
    def __init__(self, weight, bias):
        self.weight = weight
        self.bias = bias

    def __call__(self, x):
        return x * self.weight + self.bias


class Vector:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        return Vector(self.data + other.data)

    def __mul__(self, k):
        return Vector(self.data * k)

    __rmul__ = __mul__

    def __neg__(self):
        return Vector(-self.data)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.data.shape[0]

    def __eq__(self, other):
        return isinstance(other, Vector) and self.data.shape == other.data.shape

    def __hash__(self):
        return 0

    def __bool__(self):
        return len(self) > 0

    def __contains__(self, item):
        return item == "data"


@program("t", lambda seed: seed * 0.5)
def class_with_methods_classmethod_staticmethod(a, offset):
    base = Base.make(offset)
    return base.apply(a), Base.twice(a), base.scale


@program("t")
def single_inheritance_and_super(a):
    return Child(1.0, 0.5).apply(a), Grandchild(1.0, 0.5).apply(a)


@program("t")
def cooperative_multiple_inheritance(a):
    return a, Combined().describe(), [c.__name__ for c in Combined.__mro__]


@program("t", lambda seed: seed - 1.0)
def data_descriptor(a, rate):
    config = Config(rate)
    return a * config.rate, config.rate


@program("t")
def property_getter_and_setter(a):
    temperature = Temperature(10.0)
    first = temperature.fahrenheit
    temperature.fahrenheit = 212.0
    return a * first, temperature._celsius


@program("t")
def dunder_getattr_fallback(a):
    lazy = Lazy()
    return a * lazy.scale_3 + lazy.known, hasattr(lazy, "missing"), getattr(lazy, "missing", 7)


@program("t", lambda seed: seed + 2)
def dataclass_instances(a, width):
    settings = Settings(width)
    settings.tags.append("x")
    other = dataclasses.replace(settings, gain=2.0)
    return (
        a[:, : settings.width] * other.gain,
        dataclasses.asdict(settings),
        settings == Settings(width, 1.5, ["x"]),
    )


@program("t")
def frozen_dataclass(a):
    point = FrozenPoint(1.0, -2.0)
    try:
        point.x = 3.0
    except dataclasses.FrozenInstanceError:
        pass
    return a * point.norm1(), hash(point) == hash(FrozenPoint(1.0, -2.0))


@program("t", "t")
def named_tuple_of_tensors(a, b):
    pair = Pair(a, b)
    left, right = pair
    return pair.left + right, pair._fields, Pair(*pair)._replace(right=left).right


@program("t", lambda seed: ["add", "mul"][seed % 2])
def enum_lookup(a, name):
    mode = Mode(name)
    if mode is Mode.ADD:
        return a + 1
    return a * 2


@program("t")
def callable_object(a):
    layer = Affine(2.0, 1.0)
    return layer(a), callable(layer)


@program("t")
def operator_overloading_on_user_class(a):
    v = Vector(a)
    w = -(v + v * 2) + 3 * v
    return w.data, len(w), w[0], bool(w), v == w, "data" in v


@program("t")
def class_defined_inside_the_function(a):
    class Local:
        factor = 4

        def run(self, x):
            return x * self.factor

    return Local().run(a), Local.__name__


@program("t")
def class_attributes_and_instance_shadowing(a):
    class Counter:
        count = 0

        def bump(self):
            self.count += 1
            return self

    counter = Counter().bump().bump()
    return a * counter.count, Counter.count


@program("t")
def slots_class(a):
    class Point:
        __slots__ = ("x", "y")

        def __init__(self, x, y):
            self.x, self.y = x, y

    p = Point(a, 2.0)
    return p.x * p.y, hasattr(p, "__dict__")


@program("t")
def custom_new_and_init(a):
    class Singletonish:
        instances = 0

        def __new__(cls, value):
            cls.instances += 1
            return super().__new__(cls)

        def __init__(self, value):
            self.value = value

    obj = Singletonish(a)
    return obj.value * 2, type(obj).instances > 0


@program("t")
def isinstance_and_issubclass_on_user_classes(a):
    child = Child(0.0, 0.0)
    return a, isinstance(child, Base), issubclass(Grandchild, Child), isinstance(a, torch.Tensor)


@program("t")
def setattr_getattr_delattr_on_objects(a):
    class Bag:
        pass

    bag = Bag()
    setattr(bag, "weight", 3.0)  # noqa: B010
    bag.bias = 1.0
    value = getattr(bag, "weight") * a + bag.bias  # noqa: B009
    delattr(bag, "weight")
    return value, hasattr(bag, "weight"), vars(bag)


@program("t")
def abstract_base_class(a):
    import abc

    class Shape(abc.ABC):
        @abc.abstractmethod
        def area(self): ...

        def double(self):
            return self.area() * 2

    class Square(Shape):
        def __init__(self, side):
            self.side = side

        def area(self):
            return self.side * self.side

    return Square(a).double()


@program("t", lambda seed: seed)
def match_literals_and_guards(a, n):
    match n:
        case 0:
            return a
        case 1 | 2 if a.shape[0] > 1:
            return a * n
        case _:
            return -a


@program("t", lambda seed: [(1, 2), [3], {"k": 4}][seed % 3])
def match_sequences_and_mappings(a, value):
    match value:
        case (x, y):
            return a * (x + y)
        case [x]:
            return a + x
        case {"k": k, **rest}:
            return a - k, rest
    return a


@program("t", lambda seed: seed % 3)
def match_class_patterns(a, n):
    point = [FrozenPoint(1.0, 2.0), Settings(3), 5.0][n]
    match point:
        case FrozenPoint(x=x, y=y):
            return a * (x + y)
        case Settings(width=w):
            return a + w
        case float(f):
            return a - f


@program("t", "t")
def match_on_tensor_properties(a, b):
    match a.shape:
        case (rows, 4):
            return a + b * rows
        case _:
            return a


@program("t", lambda seed: seed + 1)
def walrus_in_if_and_while(a, n):
    if (half := n // 2) > 0:
        a = a * half
    count = 0
    while (count := count + 1) < n:
        a = a + 1
    return a, half, count


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)
