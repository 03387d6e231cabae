def test_builds_and_comprehensions(check):
    def f(xs, d):
        t = (1, *xs, 2)
        l = [*xs, *t]
        s = {1, *xs}
        m = {"a": 1, **d, "b": 2}
        k = {"x": 1, "y": 2}
        comp = [x * y for x in xs for y in xs if x != y]
        sc = {x % 2 for x in xs}
        dc = {x: x * x for x in xs}
        gen = sum(x for x in xs)
        return t, l, s, m, k, comp, sc, dc, gen

    check(f, [1, 2, 3], {"c": 3})


def test_unpacking(check):
    def f(xs):
        a, b, c = xs
        first, *rest = xs
        *init, last = xs
        p, *mid, q = range(5)
        (x, y), z = (1, 2), 3
        return a, b, c, first, rest, init, last, p, mid, q, x, y, z

    check(f, [1, 2, 3])
    check(f, [1, 2])
    check(f, (1, 2, 3, 4))


def test_subscripts_and_slices(check):
    def f(xs, d):
        ys = list(xs)
        ys[0] = 100
        ys[1:3] = [7, 8]
        del ys[-1]
        d = dict(d)
        d["new"] = 1
        del d["a"]
        return xs[1:], xs[:2], xs[::2], xs[1:-1:1], xs[-1], ys, d, xs[slice(1, 2)]

    check(f, [1, 2, 3, 4, 5], {"a": 1})


def test_fstrings(check):
    def f(x, width):
        return f"{x}", f"{x!r}", f"{x!s:>{width}}", f"{x!a}", f"{x:.2f}", f"a{x}b{width}c"

    check(f, 3.14159, 8)


def test_dict_update_errors(check):
    def f(x):
        return {**x}

    check(f, 1)

    def g(x):
        return [*x]

    check(g, 1)
