"""``x[key] = v`` (and ``x[key]``) for keys that mix index tensors with slices, None, Ellipsis, ints,
bools and masks, through one jitted function each, against eager PyTorch: the tensor written into,
the values read, or the type of the error eager raises; then gradients, augmented assignments and a
static KV cache's update, each over several calls with changing indices."""

from __future__ import annotations

import itertools

import pytest
import torch

import thunder

SHAPE = (3, 4, 5)


def _entries() -> list:
    """Key entries: (name, first call's entry, second call's entry); tensors change between calls."""
    t = torch.tensor
    return [
        ("idx", t([0, 2]), t([2, 1])),
        ("neg", t([-1, 0]), t([-3, -2])),
        ("idx2d", t([[0], [2]]), t([[1], [0]])),
        ("dup", t([1, 1]), t([0, 0])),
        ("t0", t(1), t(2)),
        ("mask", t([True, False, True]), t([False, True, True])),
        ("tbool", t(True), t(False)),
        ("list", [0, 2], [0, 2]),
        ("True", True, True),
        ("False", False, False),
        ("None", None, None),
        ("...", Ellipsis, Ellipsis),
        ("0", 0, 0),
        ("-1", -1, -1),
        (":", slice(None), slice(None)),
        ("1:3", slice(1, 3), slice(1, 3)),
    ]


def _keys() -> list:
    entries = _entries()
    advanced = [
        e for e in entries if e[0] in ("idx", "neg", "idx2d", "dup", "t0", "mask", "tbool", "list", "True")
    ]
    keys = [(e,) for e in entries if e[0] not in (":", "...", "None", "0", "-1", "1:3")]
    keys += [pair for pair in itertools.product(entries, repeat=2) if any(e in advanced for e in pair)]
    triples = [
        ("idx", ":", "idx"), (":", ":", "idx"), (":", "idx", ":"), ("idx", "1:3", "neg"), ("0", "idx", "idx"),
        ("t0", ":", "idx"), ("idx", ":", "t0"), ("idx", "...", "idx"), ("None", "idx", ":"), ("idx", "None", "idx"),
        (":", "None", "idx"), ("True", "idx", ":"), ("idx", ":", "True"), ("mask", ":", "0"), (":", "1:3", "mask"),
        ("False", "idx", ":"), ("idx2d", ":", "idx"), ("idx2d", "idx", "1:3"), ("...", "idx", "None"),
        ("mask", "None", ":"), ("tbool", ":", "idx"), ("t0", "t0", "idx"), (":", "t0", "1:3"), ("list", ":", "list"),
    ]  # fmt: skip
    by_name = {e[0]: e for e in entries}
    keys += [tuple(by_name[n] for n in triple) for triple in triples]
    return keys


def _key(entries: tuple, call: int) -> object:
    key = tuple(e[1 + call] for e in entries)
    return key[0] if len(key) == 1 else key


def _name(entries: tuple) -> str:
    return "[" + ", ".join(e[0] for e in entries) + "]"


def _outcome(fn, *args):  # noqa: ANN001, ANN202
    try:
        return fn(*args)
    except (IndexError, RuntimeError, ValueError, TypeError) as error:
        return error


def _same(expected: object, actual: object) -> bool:
    if expected is None or actual is None:
        return expected is actual
    if isinstance(expected, Exception) or isinstance(actual, Exception):
        return type(expected) is type(actual)
    return expected.shape == actual.shape and torch.equal(expected, actual)


def _write(x: torch.Tensor, key: object, value: object) -> None:
    x[key] = value


_MASKS = ("mask", "tbool")
_ADVANCED = ("idx", "neg", "idx2d", "dup", "list", "True", "False", *_MASKS)


_REFUSAL = "boolean mask beside other index tensors|does not match the shape of the indexed|shape mismatch"


def _refused(entries: tuple) -> bool:
    """A mask beside another index: the count of its Trues broadcasts with the other index (a
    data-dependent shape), which thunder refuses with a NotImplementedError naming the construct."""
    names = [e[0] for e in entries]
    return any(n in _MASKS for n in names) and sum(n in _ADVANCED for n in names) > 1


def _repeats(entries: tuple) -> bool:
    return any(e[0] == "dup" for e in entries)


def _values(x: torch.Tensor, key: object, generator: torch.Generator) -> list:
    """A number, a tensor of the indexing result's shape, and one of its last dim behind a 1."""
    values: list = [7.5]
    try:
        shape = x[key].shape
    except (IndexError, RuntimeError):
        return values
    values.append(torch.randn(shape, generator=generator))
    if len(shape):
        values.append(torch.randn(1, shape[-1], generator=generator))
    return values


def test_writes_match_eager_for_mixed_keys() -> None:
    write = thunder.jit(_write)
    generator = torch.Generator().manual_seed(0)
    mismatches = []
    for entries in _keys():
        for call in (0, 1):
            key = _key(entries, call)
            x = torch.randn(SHAPE, generator=generator)
            for value in _values(x, key, generator):
                if _repeats(entries) and isinstance(value, torch.Tensor):
                    continue  # a repeated index written with different values: eager's answer is either
                expected, actual = x.clone(), x.clone()
                error_e = _outcome(_write, expected, key, value)
                if _refused(entries):  # refused, unless eager's error comes first
                    raised = (
                        (NotImplementedError, type(error_e)) if error_e is not None else NotImplementedError
                    )
                    with pytest.raises(raised, match=_REFUSAL):
                        write(actual, key, value)
                    continue
                error_t = _outcome(write, actual, key, value)
                if not _same(error_e, error_t) or not _same(expected, actual):
                    mismatches.append(
                        (_name(entries), call, getattr(value, "shape", value), error_e, error_t)
                    )
    assert mismatches == []


def test_reads_match_eager_for_mixed_keys() -> None:
    read = thunder.jit(lambda x, key: x[key] * 1)
    generator = torch.Generator().manual_seed(1)
    mismatches = []
    for entries in _keys():
        if any(e[0] in ("mask", "tbool") for e in entries):
            continue  # a data-dependent shape: thunder raises NotImplementedError (test below)
        for call in (0, 1):
            key = _key(entries, call)
            x = torch.randn(SHAPE, generator=generator)
            expected, actual = _outcome(lambda: x[key] * 1), _outcome(read, x, key)
            if not _same(expected, actual):
                mismatches.append((_name(entries), call, expected, actual))
    assert mismatches == []


def test_reading_with_a_mask_is_refused_as_data_dependent() -> None:
    """Also ``x[:, mask] += 1``, which reads ``x[:, mask]`` first."""
    read = thunder.jit(lambda x, mask: x[:, mask])
    with pytest.raises(NotImplementedError, match="boolean mask"):
        read(torch.randn(2, 3), torch.tensor([True, False, True]))

    def update(x: torch.Tensor, mask: torch.Tensor) -> None:
        x[:, mask] += 1

    with pytest.raises(NotImplementedError, match="boolean mask"):
        thunder.jit(update)(torch.randn(2, 3), torch.tensor([True, False, True]))


# key forms written with a value that requires grad into a tensor that does: (name, key from the call's
# index tensors); the value is shaped like eager's indexing result
GRAD_KEYS = {
    "[:, idx]": lambda idx, mask: (slice(None), idx),
    "[idx, 1:]": lambda idx, mask: (idx, slice(1, None)),
    "[..., idx]": lambda idx, mask: (Ellipsis, idx),
    "[:, :, idx]": lambda idx, mask: (slice(None), slice(None), idx),
    "[idx, :, idx]": lambda idx, mask: (idx, slice(None), idx),
    "[None, idx]": lambda idx, mask: (None, idx),
    "[1, idx, None]": lambda idx, mask: (1, idx, None),
    "[:, mask]": lambda idx, mask: (slice(None), mask),
    "[idx[:, None], idx]": lambda idx, mask: (idx[:, None], idx),
}
GRAD_CALLS = [
    (torch.tensor([0, 2]), torch.tensor([True, False, True, False])),
    (torch.tensor([-1, 1]), torch.tensor([False, True, True, True])),
    (torch.tensor([1]), torch.tensor([False, False, False, True])),
]


@pytest.mark.parametrize("name", list(GRAD_KEYS))
def test_gradients_of_writes_match_eager(name: str) -> None:
    make_key = GRAD_KEYS[name]

    def f(x: torch.Tensor, v: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y[make_key(idx, mask)] = v * 3
        return y.sin()

    jitted = thunder.jit(f)
    generator = torch.Generator().manual_seed(2)
    for idx, mask in GRAD_CALLS:
        x = torch.randn(4, 4, 5, generator=generator)
        v = torch.randn((x * 2)[make_key(idx, mask)].shape, generator=generator)
        cotangent = torch.randn(4, 4, 5, generator=generator)
        results = []
        for fn in (f, jitted):
            xs, vs = x.clone().requires_grad_(), v.clone().requires_grad_()
            out = fn(xs, vs, idx, mask)
            out.backward(cotangent)
            results.append((out.detach(), xs.grad, vs.grad))
        for expected, actual in zip(*results):
            torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("name", ["[:, idx]", "[idx, 1:]", "[..., idx]", "[idx, :, idx]", "[1, idx, None]"])
def test_augmented_assignments_match_eager(name: str) -> None:
    make_key = GRAD_KEYS[name]

    def update(x: torch.Tensor, v: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x[make_key(idx, mask)] += 1
        x[make_key(idx, mask)] *= v.sum()
        return x

    def trained(x: torch.Tensor, v: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return update(x * 1, v, idx, mask).cos()

    jitted_update, jitted_trained = thunder.jit(update), thunder.jit(trained)
    generator = torch.Generator().manual_seed(3)
    for idx, mask in GRAD_CALLS:
        x, v = torch.randn(4, 4, 5, generator=generator), torch.randn(3, generator=generator)
        expected, actual = x.clone(), x.clone()
        update(expected, v, idx, mask)
        returned = jitted_update(actual, v, idx, mask)
        torch.testing.assert_close(actual, expected)  # the input, written in place
        assert returned is actual
        grads = []
        for fn in (trained, jitted_trained):
            xs, vs = x.clone().requires_grad_(), v.clone().requires_grad_()
            fn(xs, vs, idx, mask).sum().backward()
            grads.append((xs.grad, vs.grad))
        torch.testing.assert_close(grads[1], grads[0])


def test_a_static_cache_update_by_position_tensor_matches_eager() -> None:
    """transformers' StaticLayer.update without index_copy_: ``keys[:, :, cache_position] = k``."""

    def update(keys: torch.Tensor, values: torch.Tensor, position: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor:  # fmt: skip
        keys[:, :, position] = k
        values[:, :, position] = v
        return (keys * values).sum(-1)

    jitted = thunder.jit(update)
    generator = torch.Generator().manual_seed(4)
    caches = [torch.zeros(2, 3, 8, 4) for _ in range(4)]
    for position in (torch.arange(0, 3), torch.tensor([3]), torch.tensor([4]), torch.arange(5, 8)):
        k = torch.randn(2, 3, len(position), 4, generator=generator)
        v = torch.randn(2, 3, len(position), 4, generator=generator)
        expected = update(caches[0], caches[1], position, k, v)
        actual = jitted(caches[2], caches[3], position, k, v)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(caches[2], caches[0])
        torch.testing.assert_close(caches[3], caches[1])


def test_a_repeated_index_writes_like_index_put() -> None:
    """Deterministic repeats only: the same value at a repeated position, and ``index_put_`` with
    ``accumulate=True`` through a key with slices (``x[:, idx] += v`` reads once, writes once)."""

    def f(x: torch.Tensor, idx: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        x[:, idx] = 5.0
        x[..., 0].index_put_((idx,), v, accumulate=True)
        return x

    jitted = thunder.jit(f)
    for idx in (torch.tensor([1, 1, 2]), torch.tensor([0, 0, 0])):
        x = torch.randn(3, 4)
        v = torch.arange(3.0)
        expected, actual = f(x.clone(), idx, v), jitted(x.clone(), idx, v)
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("key", ["[:, mask]", "[mask]"])
def test_one_row_per_true_checks_the_count_of_trues_when_run(key: str) -> None:
    """The count of Trues is the data's: each call's mask, with the same rows, as eager."""

    def write(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if key == "[mask]":
            x[mask] = rows.t()
        else:
            x[:, mask] = rows
        return x

    jitted = thunder.jit(write)
    rows = torch.arange(6.0).reshape(3, 2)
    for mask in ([True, False, True, False], [True, True, True, False], [False, False, False, True],
                 [False, True, False, True]):  # fmt: skip
        mask = torch.tensor(mask)
        x = torch.zeros(3, 4) if key == "[:, mask]" else torch.zeros(4, 3)
        expected = _outcome(write, x.clone(), mask, rows)
        actual = _outcome(jitted, x.clone(), mask, rows)
        assert _same(expected, actual), (mask, expected, actual)


OVERLAPPING_WRITES = {  # x[key] = v where v is a view of x: eager's error, or (order-dependent) refused
    "rows into the next rows": (lambda x: x.__setitem__(slice(1, None), x[:-1]), RuntimeError),
    "rows by index from overlapping rows": (
        lambda x: x.__setitem__(torch.tensor([1, 2]), x[:2]),
        RuntimeError,
    ),
    "columns by index from overlapping columns": (
        lambda x: x.__setitem__((slice(None), torch.tensor([1, 2])), x[:, :2]),
        NotImplementedError,
    ),
}
OVERLAPPING_UPDATES = {  # x.op_(v) where v is a view of x: the same rule (eager's TensorIterator)
    "a row added to every row": (lambda x: x.add_(x[0]), RuntimeError),
    "lerp towards a row": (lambda x: x.lerp_(x[1], 0.5), RuntimeError),
    "a transpose added": (lambda x: x[:, :3].add_(x[:, :3].t()), NotImplementedError),
    "shifted columns multiplied": (lambda x: x[:, 1:].mul_(x[:, :-1]), NotImplementedError),
}
OVERLAPPING_WRITES.update(OVERLAPPING_UPDATES)
DISJOINT_WRITES = {  # ... where eager's answer is the functional one
    "a row from another": lambda x: x.__setitem__(0, x[1]),
    "a row onto itself": lambda x: x.__setitem__(1, x[1]),
    "a column from another": lambda x: x.__setitem__((slice(None), 0), x[:, -1]),
    "rows by index from a new tensor": lambda x: x.__setitem__(torch.tensor([0, 2]), x[:2] * 2),
    "a tensor added to itself": lambda x: x.add_(x),
    "a row added to the other rows": lambda x: x[1:].add_(x[0]),
    "x[0] += x[1]": lambda x: x[0].__iadd__(x[1]),
}


@pytest.mark.parametrize("name", list(OVERLAPPING_WRITES))
def test_a_value_overlapping_what_it_writes_raises(name: str) -> None:
    write, error = OVERLAPPING_WRITES[name]

    def f(x: torch.Tensor) -> torch.Tensor:
        write(x)
        return x

    if error is RuntimeError:  # eager's own check (both dense, partly overlapping)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            f(torch.randn(3, 4))
    with pytest.raises(error, match="refer to a single memory location|depends on the order"):
        thunder.jit(f)(torch.randn(3, 4))


@pytest.mark.parametrize("name", list(DISJOINT_WRITES))
def test_a_value_viewing_other_memory_of_the_target_writes_as_eager(name: str) -> None:
    write = DISJOINT_WRITES[name]

    def f(x: torch.Tensor) -> torch.Tensor:
        write(x)
        return x

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3, 4)
        torch.testing.assert_close(jitted(x.clone()), f(x.clone()))


def test_an_overlap_check_follows_the_input_layout() -> None:
    """Eager's overlap error needs both views dense, which depends on the input's strides: a
    transposed input makes the same write order-dependent in eager, which thunder refuses."""

    def f(x: torch.Tensor) -> torch.Tensor:
        x.sub_(x.narrow(0, 0, 1))
        return x

    jitted = thunder.jit(f)
    contiguous = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        f(contiguous.clone())
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        jitted(contiguous.clone())
    transposed = torch.randn(4, 3).t()
    f(transposed.clone().t().contiguous().t())  # eager: no error (it cannot check), order-dependent
    with pytest.raises(NotImplementedError, match="depends on the order"):
        jitted(transposed.clone().t().contiguous().t())
