"""Corpus: operators, containers, unpacking, slicing, formatting and control flow opcodes."""

from __future__ import annotations

import operator

import pytest

PROGRAMS: list = []


def program(*spec, **options):
    def register(fn):
        PROGRAMS.append(pytest.param(fn, spec, options, id=fn.__name__))
        return fn

    return register


@program("t", "t")
def binary_tensor_operators(a, b):
    return a + b, a - b, a * b, a / (b.abs() + 1), a @ b.T, a**2, -a, +a, abs(a)


@program("t", lambda seed: seed + 2)
def binary_number_operators(a, n):
    values = (n + 1, n - 1, n * 3, n / 2, n // 2, n % 2, n**2, n << 1, n >> 1, n & 3, n | 4, n ^ 5, ~n, -n)
    return a * sum(values), values


@program("t")
def floor_div_and_mod_on_tensors(a):
    return a // 0.5, a % 0.7, 2.0 // (a.abs() + 1)


@program("t", "t")
def comparisons_produce_masks(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


@program("t", lambda seed: seed)
def chained_number_comparison(a, n):
    if 0 <= n < 2:
        return a + 1
    return a - 1


@program("t")
def augmented_assignment_rebinds(a):
    b = a
    b = b + 1
    b = b * 2  # in-place tensor updates belong to the epilogue (another corpus)
    return a, b


@program("t", lambda seed: [seed, seed + 1])
def augmented_assignment_on_lists(a, items):
    items = list(items)
    items += [3]
    count = 0
    count += len(items)
    count -= 1
    count *= 2
    return a * count


@program("t")
def identity_and_membership(a):
    x = None
    checks = (x is None, a is not None, 3 in [1, 2, 3], "k" not in {"a": 1}, 2 in (1, 2))
    return a * sum(checks)


@program("t")
def boolean_short_circuit(a):
    empty = []
    first = empty or [a]
    second = first and first[0]
    none = None
    third = none and none.missing
    return second * 2, third, (not empty)


@program("t", lambda seed: seed % 2 == 0)
def conditional_expression(a, flag):
    return a.sin() if flag else a.cos()


@program("t", "t")
def build_containers(a, b):
    pair = (a, b)
    items = [a, b, a]
    mapping = {"a": a, "b": b}
    keys = {"x", "y"}
    return pair[0] + items[2] + mapping["b"], len(keys), sorted(keys)


@program("t", "t")
def const_key_map_and_dict_merge(a, b):
    base = {"a": a, "b": b}
    merged = {**base, "c": a * 2}
    merged |= {"d": b}
    return merged


@program("t", "t")
def list_extend_and_star_literals(a, b):
    first = [a, b]
    combined = [*first, *first, a + b]
    as_tuple = (*combined,)
    as_set = {*range(3), 5}
    return as_tuple[-1], len(combined), sorted(as_set)


@program("t", "t", "t")
def unpack_sequence_variants(a, b, c):
    x, y, z = a, b, c
    (p, q), r = (x, y), z
    first, *rest = [x, y, z]
    *init, last = (x, y, z)
    head, *middle, tail = [x, y, z, a]
    return p + q + r, first + rest[0], init[1] + last, len(middle), head - tail


@program("t")
def unpack_a_tensor_along_dim0(a):
    first, *others = a
    return first, len(others)


@program("t")
def slicing_tensors(a):
    return a[1:], a[:, 1:3], a[::2], a[-1], a[:, 0], a[-2:, 1]


@program("t", lambda seed: list(range(seed + 4)))
def slicing_lists_and_store_slice(a, items):
    items = list(items)
    items[1:3] = [10, 11]
    del items[0]
    head = items[:2]
    items[::2] = [0] * len(items[::2])
    return a * sum(head), items, items[-2:]


@program("t", lambda seed: seed + 1)
def subscript_store_and_delete(a, n):
    table = {"x": a}
    table["y"] = a * n
    del table["x"]
    rows = [0, 1, 2]
    rows[n % 3] = 7
    return table, rows


@program("t", lambda seed: seed * 1.5)
def fstrings_and_formatting(a, scale):
    name = f"{scale!r}|{scale:.2f}|{'x'!s}|{len(a)}|{a.shape[1]:>4}"
    message = "%s-%d" % ("k", 3) + "{}".format(scale)  # noqa: UP031, UP032
    return a * scale, name, message


@program("t", lambda seed: seed + 3)
def for_loop_with_break_continue_else(a, n):
    total = a
    for i in range(n):
        if i == 1:
            continue
        if i == 4:
            break
        total = total + i
    else:
        total = total * 2
    return total


@program("t", lambda seed: seed + 2)
def while_loop_with_else(a, n):
    i = 0
    while i < n:
        a = a * 1.5
        i += 1
    else:
        a = a - 1
    return a, i


@program("t")
def nested_loops(a):
    total = a
    for i in range(3):
        for j in range(i):
            total = total + (i * j)
    return total


@program("t")
def deleting_locals(a):
    tmp = a * 2
    out = tmp + 1
    del tmp
    try:
        tmp  # noqa: B018, F821 -- reading a deleted local raises UnboundLocalError
    except UnboundLocalError:
        out = out + 1
    return out


@program("t")
def many_constants_need_extended_args(a):
    values = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
        28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,
        54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
        80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103,
        104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123,
        124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143,
        144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163,
        164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183,
        184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203,
        204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
        224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243,
        244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255, 256, 257, 258, 259, 260, 261, 262, 263,
    ]  # fmt: skip
    return a + values[-1]


@program("t")
def long_jump_over_a_large_block(a):
    if a.shape[0] > 100:
        a = a + 1
        a = a + 2
        a = a + 3
        a = a + 4
        a = a + 5
        a = a + 6
        a = a + 7
        a = a + 8  # noqa: E702
        a = a + 1
        a = a + 2
        a = a + 3
        a = a + 4
        a = a + 5
        a = a + 6
        a = a + 7
        a = a + 8  # noqa: E702
        a = a + 1
        a = a + 2
        a = a + 3
        a = a + 4
        a = a + 5
        a = a + 6
        a = a + 7
        a = a + 8  # noqa: E702
        a = a + 1
        a = a + 2
        a = a + 3
        a = a + 4
        a = a + 5
        a = a + 6
        a = a + 7
        a = a + 8  # noqa: E702
        a = a + 1
        a = a + 2
        a = a + 3
        a = a + 4
        a = a + 5
        a = a + 6
        a = a + 7
        a = a + 8  # noqa: E702
    return a * 2


@program("t", lambda seed: seed)
def return_constant_paths(a, n):
    if n == 0:
        return None
    if n == 1:
        return 1
    return a


@program("t")
def swap_and_copy_by_tuple_assignment(a):
    x, y = a, a * 2
    x, y = y, x
    x, y, z = y, x, x + y
    return x, y, z


@program("t", "t")
def operator_module_functions(a, b):
    return operator.add(a, b), operator.mul(a, 2), operator.itemgetter(0)(a), operator.neg(b)


@program("t")
def shape_arithmetic(a):
    rows, cols = a.shape
    scale = rows * cols / a.numel()
    return a.reshape(cols, rows) * scale, a.size(0), a.ndim, a.dim()


@program("t")
def tensor_iteration_and_len(a):
    total = a[0] * 0
    for row in a:
        total = total + row
    return total, len(a)


@program("t", lambda seed: seed + 2)
def integer_and_true_division_results(a, n):
    half = n // 2
    ratio = n / 4
    return a[:half] * ratio, divmod(n, 3), round(ratio, 1)


@program("t", lambda seed: (seed, seed + 1))
def tuple_arguments_and_comparison(a, pair):
    lo, hi = pair
    return a.clamp(lo - 2.0, hi - 1.0), pair < (1, 0), max(pair)


@program("t")
def bitwise_on_bool_masks(a):
    positive = a > 0
    small = a.abs() < 1
    return positive & small, positive | small, positive ^ small, ~positive


@program("t", lambda seed: 1.0 + seed)
def float_number_math(a, x):
    import math

    return a * math.sqrt(x) + math.floor(x * 1.7) - math.pi, math.isclose(x, 1.0)


@program("t")
def empty_function_body_returns_none(a):
    pass


@program("t", lambda seed: seed - 1)
def negative_index_and_abs_of_python_numbers(a, n):
    return a[n], abs(n), -n


@pytest.mark.parametrize("fn, spec, options", PROGRAMS)
def test_program(check_jit, fn, spec, options) -> None:
    check_jit(fn, *spec, **options)
