def test_if_elif_else(check):
    def f(x):
        if x < 0:
            return "neg"
        elif x == 0:
            return "zero"
        elif x is None:
            return "none"
        else:
            return "pos"

    for value in (-1, 0, 5):
        check(f, value)


def test_loops_break_continue_else(check):
    def f(n):
        out = []
        i = 0
        while True:
            i += 1
            if i % 2:
                continue
            if i > n:
                break
            out.append(i)
        for j in range(n):
            if j == 100:
                break
        else:
            out.append("no-break")
        for a in range(3):
            for b in range(3):
                if b > a:
                    break
                out.append((a, b))
        k = 0
        while k < 3:
            k += 1
        else:
            out.append(k)
        return out

    check(f, 7)


def test_boolean_short_circuit_and_ternary(check):
    def f(a, b):
        x = a and b
        y = a or b
        z = a if b else b
        w = not (a and not b) or (a is None)
        return x, y, z, w, (a or None) is None, (b if b is not None else 0)

    for a, b in [(0, 1), (1, 0), (2, 3), (None, None), ("", "s")]:
        check(f, a, b)


def test_none_checks(check):
    def f(x, y=None):
        if x is None:
            return 1
        if y is not None:
            return 2
        while x is not None:
            x = None
        return 3

    check(f, None)
    check(f, 1, 2)
    check(f, 1)


def test_walrus(check):
    def f(xs):
        if (n := len(xs)) > 2:
            return n, [y for x in xs if (y := x * 2) > 2]
        return n

    check(f, [1, 2, 3])
    check(f, [1])


def test_assert(check):
    def f(x):
        assert x > 0, "must be positive"
        return x

    check(f, 1)
    check(f, -1)
