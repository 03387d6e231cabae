from thunder.core.sources import (
    ArgumentSource,
    AttributeSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    KeywordSource,
)
from thunder.interpreter.vm import InterpreterHooks, interpret


class Wrapped:
    """What a compiler would substitute for a loaded value."""

    def __init__(self, value, source):
        self.value = value
        self.source = source


class RecordingHooks(InterpreterHooks):
    def __init__(self, wrap_types=()):
        self.loads = []
        self.wrap_types = wrap_types

    def on_load(self, value, source):
        self.loads.append((source.describe(), value))
        if isinstance(value, self.wrap_types):
            return Wrapped(value, source)
        return value

    def described(self):
        return [description for description, _ in self.loads]


class Config:
    pass


SCALE = 3
SETTINGS = {"gain": 2}


def test_argument_attribute_path_and_global():
    config = Config()
    config.inner = Config()
    config.inner.weight = 5

    def f(cfg):
        return cfg.inner.weight * SCALE + SETTINGS["gain"]

    hooks = RecordingHooks()
    assert interpret(f, (config,), {}, hooks, arg_sources=[ArgumentSource(0)]) == 17
    described = hooks.described()
    assert "args[0].inner" in described
    assert "args[0].inner.weight" in described
    assert f"global {__name__}.SCALE" in described
    assert f"global {__name__}.SETTINGS['gain']" in described
    sources = {description: value for description, value in hooks.loads}
    assert sources["args[0].inner.weight"] == 5


def test_source_objects_have_the_right_shape():
    config = Config()
    config.items = [10, 20]
    seen = []

    class Hooks(InterpreterHooks):
        def on_load(self, value, source):
            seen.append(source)
            return value

    def f(cfg, *, k):
        return cfg.items[1] + k.real

    interpret(
        f,
        (config,),
        {"k": 3},
        Hooks(),
        arg_sources=[ArgumentSource(0)],
        kwarg_sources={"k": KeywordSource("k")},
    )
    item = next(source for source in seen if isinstance(source, ItemSource))
    assert item.key == 1 and isinstance(item.base, AttributeSource) and item.base.name == "items"
    assert isinstance(item.base.base, ArgumentSource) and item.base.base.index == 0
    assert any(isinstance(source, GlobalSource) is False for source in seen)


def test_closure_source_and_wrapped_value():
    table = {"a": 1}

    def f(key):
        return table[key]

    hooks = RecordingHooks(wrap_types=(dict,))
    loaded = []

    class Hooks(RecordingHooks):
        def on_load(self, value, source):
            loaded.append(source)
            return super().on_load(value, source)

    hooks = Hooks()
    assert interpret(f, ("a",), {}, hooks) == 1
    closure = [source for source in loaded if isinstance(source, ClosureSource)]
    assert len(closure) == 1 and closure[0].function is f and closure[0].index == 0
    assert "closure variable 'table'" in closure[0].describe()
    assert any(isinstance(source, ItemSource) and source.key == "a" for source in loaded)


def test_on_load_return_value_is_used():
    class Box:
        value = 4

    class Hooks(InterpreterHooks):
        def on_load(self, value, source):
            if isinstance(source, AttributeSource) and source.name == "value":
                return value * 100
            return value

    def f(box):
        return box.value + 1

    assert interpret(f, (Box(),), {}, Hooks(), arg_sources=[ArgumentSource(0)]) == 401


def test_iteration_and_unpacking_give_item_sources():
    def f(xs, pair):
        total = 0
        for x in xs:
            total += x.v
        a, b = pair
        return total + a.v + b.v

    class V:
        def __init__(self, v):
            self.v = v

    hooks = RecordingHooks()
    xs = [V(1), V(2)]
    result = interpret(f, (xs, (V(3), V(4))), {}, hooks, arg_sources=[ArgumentSource(0), ArgumentSource(1)])
    assert result == 10
    described = hooks.described()
    assert "args[0][0]" in described and "args[0][1]" in described
    assert "args[0][1].v" in described
    assert "args[1][0].v" in described and "args[1][1]" in described


def test_getattr_builtin_and_cells_of_vm_created_functions():
    class Holder:
        weight = 2

    outer_value = [7]

    def f(holder):
        def inner():
            return outer_value[0]

        return holder.weight + inner()

    hooks = RecordingHooks()
    assert interpret(f, (Holder(),), {}, hooks, arg_sources=[ArgumentSource(0)]) == 9
    described = hooks.described()
    assert "args[0].weight" in described
    assert any("closure variable 'outer_value'" in d for d in described)


def test_untracked_values_are_not_bases():
    class Obj:
        pass

    def f():
        o = Obj()
        o.x = 1
        return o.x

    hooks = RecordingHooks()
    assert interpret(f, (), {}, hooks) == 1
    assert not any("x" == d.split(".")[-1] for d in hooks.described())


def test_user_property_and_getattr_are_interpreted():
    class Lazy:
        def __init__(self):
            self._data = {"w": 5}

        @property
        def doubled(self):
            return self._data["w"] * 2

        def __getattr__(self, name):
            return self._data[name]

    hooks = RecordingHooks()
    hooks.instruction_log = []

    def f(obj):
        return obj.doubled + obj.w

    assert interpret(f, (Lazy(),), {}, hooks, arg_sources=[ArgumentSource(0)]) == 15
    qualnames = {record[0] for record in hooks.instruction_log}
    assert any(name.endswith("Lazy.doubled") for name in qualnames)
    assert any(name.endswith("Lazy.__getattr__") for name in qualnames)
    assert "args[0]._data['w']" in hooks.described()


def test_dict_items_and_values_give_item_sources():
    class V:
        def __init__(self, v):
            self.v = v

    def f(d):
        total = 0
        for key, value in d.items():
            total += value.v
        for value in d.values():
            total += value.v
        return total

    hooks = RecordingHooks()
    assert interpret(f, ({"a": V(1), "b": V(2)},), {}, hooks, arg_sources=[ArgumentSource(0)]) == 6
    described = hooks.described()
    assert "args[0]['a']" in described and "args[0]['b'].v" in described
