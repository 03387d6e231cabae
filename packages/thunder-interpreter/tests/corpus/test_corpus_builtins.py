"""Corpus: the builtins models use, called on Python values and on tensors."""

from __future__ import annotations

import collections
import itertools
import math

import pytest
import torch

PROGRAMS: list = []


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


@program("t", "t")
def isinstance_checks(a, b):
    checks = (
        isinstance(a, torch.Tensor),
        isinstance(a, (int, torch.Tensor)),
        isinstance(3, int),
        isinstance([a], list),
        isinstance(a, torch.nn.Parameter),
    )
    return (a + b) * sum(checks), checks


@program("t", lambda seed: list(range(seed + 2)))
def len_range_enumerate_zip(a, items):
    out = a * len(items)
    for i, (x, y) in enumerate(zip(items, range(10, 20))):
        out = out + i * x - y
    return out, list(range(2, 10, 3)), list(enumerate("ab", start=1))


@program("t", "t")
def map_and_filter(a, b):
    doubled = list(map(lambda x: x * 2, [a, b]))
    evens = list(filter(lambda n: n % 2 == 0, range(7)))
    lengths = list(map(len, ["a", "bb"]))
    return doubled, evens, lengths, list(map(torch.add, [a], [b]))


@program("t", lambda seed: [3, 1, seed, 2])
def sorted_min_max_sum(a, values):
    ordered = sorted(values)
    by_key = sorted(["bb", "a", "ccc"], key=len, reverse=True)
    return a * max(values) - min(values), ordered, by_key, sum(values), min(3, 1.5), max("ab", "b", key=len)


@program("t", "t")
def min_max_with_key_over_tensors_shapes(a, b):
    widest = max([a, b[:, :2]], key=lambda t: t.shape[1])
    return widest * 2


@program("t")
def getattr_setattr_hasattr(a):
    class Holder:
        pass

    holder = Holder()
    setattr(holder, "value", a)  # noqa: B010
    return getattr(holder, "value") * 2, hasattr(holder, "value"), getattr(holder, "other", None)  # noqa: B009


@program("t", lambda seed: 2.5 + seed)
def numeric_builtins(a, x):
    return (a * abs(-x) + round(x) + int(x) + float(3), pow(2, 3), divmod(7, 2), round(x, 2),
            math.floor(x), math.ceil(x), bool(0), complex(1, 2).real)  # fmt: skip


@program("t")
def string_builtins(a):
    name = "Linear_Layer"
    return (a, name.lower(), name.split("_"), "-".join(["a", "b"]), name.startswith("Lin"), str(3), repr("x"),
            f"{name:>15}", name.replace("_", " "), ord("a"), chr(98), "{0}-{1}".format(1, 2))  # fmt: skip  # noqa: UP030, UP032


@program("t")
def container_constructors(a):
    return (a, list((1, 2)), tuple([1, 2]), dict(a=1, b=2), set([1, 1, 2]), frozenset({3}),
            dict(zip("ab", range(2))), list(reversed([1, 2, 3])))  # fmt: skip


@program("t", "t")
def any_all_and_truthiness(a, b):
    flags = [a.shape[0] > 1, b.shape[1] == 4]
    return a * all(flags) + b * any(flags), bool([]), bool({"k": 1}), not None


@program("t")
def type_and_id_and_callable(a):
    return a, type(3).__name__, type(a) is torch.Tensor, callable(len), id(a) == id(a)  # noqa: UP003


@program("t", lambda seed: {"lr": 0.1 * (seed + 1), "steps": seed + 1})
def dict_methods(a, options):
    options = dict(options)
    options.setdefault("decay", 0.5)
    options.update(extra=1)
    popped = options.pop("extra")
    total = a * options["lr"] * options.get("steps", 0) * options.get("missing", 2)
    return total, sorted(options.keys()), popped, list(options.items())[0]


@program("t", "t")
def list_methods(a, b):
    items = [a, b]
    items.append(a + b)
    items.insert(0, b)
    items.extend([a])
    last = items.pop()
    items.reverse()
    return items, last, len(items), [1, 2, 2].count(2), [1, 2, 3].index(2)


@program("t")
def set_operations(a):
    x, y = {1, 2, 3}, {2, 3, 4}
    return a * len(x & y), sorted(x | y), sorted(x - y), sorted(x ^ y), 2 in x


@program("t", "t")
def itertools_and_collections(a, b):
    pairs = list(itertools.product([0, 1], repeat=2))
    chained = list(itertools.chain([a], [b]))
    counts = collections.Counter("abca")
    ordered = collections.OrderedDict(x=1)
    default = collections.defaultdict(list)
    default["k"].append(1)
    window = collections.deque([1, 2, 3], maxlen=2)
    return pairs, chained[1] * 2, counts["a"], list(ordered), dict(default), list(window)


@program("t")
def accumulate_and_pairwise(a):
    cumulative = list(itertools.accumulate([1, 2, 3]))
    return a * cumulative[-1], cumulative, list(itertools.islice(itertools.count(5), 3))


@program("t", "t")
def zip_longest_and_starmap(a, b):
    pairs = list(itertools.zip_longest([a], [b, b], fillvalue=None))
    sums = list(itertools.starmap(lambda x, y: x + y, [(a, b), (b, a)]))
    return len(pairs), pairs[1][0], sums


@program("t")
def hash_and_equality_of_python_values(a):
    return a, hash((1, "a")) == hash((1, "a")), (1, 2) == (1, 2), [1] != [2]


@program("t")
def iter_and_next_builtins(a):
    iterator = iter([a, a * 2])
    first = next(iterator)
    second = next(iterator)
    return first + second, next(iterator, "done")


@program("t", lambda seed: seed)
def print_does_not_break_tracing(a, n):
    import io

    buffer = io.StringIO()
    print("value", n, file=buffer)
    return a * n, buffer.getvalue()


@program("t")
def slice_objects_and_index(a):
    cut = slice(1, None)
    return a[cut], cut.start, (3).__index__(), [0, 1, 2][slice(None, None, -1)]


@program("t")
def tensor_metadata_builtins(a):
    return (
        a * 2,
        a.dtype == torch.float32,
        a.dtype != torch.int64,
        a.device.type,
        a.shape == (a.shape[0], 4),
        list(a.shape),
    )


@program("t")
def torch_dtype_and_device_values(a):
    target = torch.float64
    return a.to(target), a.to(dtype=torch.float16).float(), a.double().dtype


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)
