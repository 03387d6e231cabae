from dataclasses import dataclass


@dataclass
class Point:
    x: int
    y: int


def describe(value):
    match value:
        case 0 | 1:
            return "small"
        case [1, *rest]:
            return ("list starting 1", rest)
        case (a, b):
            return ("pair", a, b)
        case {"kind": "circle", "r": r, **others}:
            return ("circle", r, others)
        case Point(x=0, y=y):
            return ("on y axis", y)
        case Point(x, y) if x == y:
            return ("diagonal", x)
        case Point():
            return "point"
        case int(n) if n > 100:
            return ("big", n)
        case str() as s:
            return ("string", s)
        case _:
            return "other"


def test_match_statement(check):
    for value in [
        0,
        1,
        [1, 2, 3],
        (4, 5),
        {"kind": "circle", "r": 2, "z": 1},
        Point(0, 3),
        Point(2, 2),
        Point(1, 2),
        500,
        "hi",
        3.5,
    ]:
        check(describe, value)
