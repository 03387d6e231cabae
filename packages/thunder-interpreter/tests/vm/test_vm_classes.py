class Base:
    def __init__(self, x):
        self.x = x

    def describe(self):
        return f"base {self.x}"


class Child(Base):
    def __init__(self, x, y):
        super().__init__(x)
        self.y = y

    def describe(self):
        return super().describe() + f" child {self.y}"


class GrandChild(Child):
    def describe(self):
        parent = super()
        return "grand " + parent.describe()


def test_super_zero_and_two_arg(check):
    def f():
        c = GrandChild(1, 2)
        return c.describe(), super(GrandChild, c).describe(), Child(3, 4).describe()

    check(f)


def test_class_definition_inside_function(check):
    def f(n):
        class Local:
            scale = n

            def __init__(self, v):
                self.v = v

            def value(self):
                return self.v * self.scale

        return Local(3).value()

    check(f, 4)


def test_imports_inside_functions(check):
    def f():
        import math
        import os.path
        from collections import OrderedDict
        from os import path as p

        return math.sqrt(16), list(OrderedDict(a=1)), p.basename("/a/b"), os.path.join("a", "b")

    check(f)


def test_attribute_store_and_delete(check):
    class Obj:
        pass

    def f():
        o = Obj()
        o.a = 1
        o.b = o.a + 1
        del o.a
        return hasattr(o, "a"), o.b

    check(f)
