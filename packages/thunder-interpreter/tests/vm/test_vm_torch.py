import pytest

torch = pytest.importorskip("torch")

from thunder.core.sources import ArgumentSource  # noqa: E402
from thunder.interpreter.vm import InterpreterHooks, interpret  # noqa: E402


class Hooks(InterpreterHooks):
    def __init__(self):
        self.instruction_log = []
        self.sources = []

    def lookaside(self, fn):
        return None

    def on_load(self, value, source):
        self.sources.append(source.describe())
        return value


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
        self.scale = 0.5

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) * self.scale
        return x + self.layers[0].bias


def test_sequential_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    hooks = Hooks()
    result = interpret(model, (x,), {}, hooks)
    torch.testing.assert_close(result, model(x))
    qualnames = {record[0] for record in hooks.instruction_log}
    assert "Sequential.forward" in qualnames and "Linear.forward" in qualnames
    assert "Module._wrapped_call_impl" not in qualnames  # hook-free modules go straight to forward


def test_module_sources_through_module_list():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 4)
    hooks = Hooks()
    result = interpret(
        lambda m, x: m(x), (model, x), {}, hooks, arg_sources=[ArgumentSource(0), ArgumentSource(1)]
    )
    torch.testing.assert_close(result, model(x))
    assert "args[0].layers" in hooks.sources
    assert "args[0].layers[0]" in hooks.sources and "args[0].layers[1]" in hooks.sources
    assert "args[0].layers[0].weight" in hooks.sources
    assert "args[0].scale" in hooks.sources


def test_module_with_hook_goes_through_call():
    model = torch.nn.Linear(2, 2)
    seen = []
    handle = model.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    try:
        x = torch.randn(1, 2)
        hooks = Hooks()
        torch.testing.assert_close(interpret(model, (x,), {}, hooks), model(x))
        assert len(seen) == 2
        assert any(record[0].startswith("Module._") for record in hooks.instruction_log)
    finally:
        handle.remove()


def test_module_construction_is_interpreted():
    def build():
        torch.manual_seed(0)
        return Block()

    model = interpret(build, (), {}, InterpreterHooks())
    reference = build()
    x = torch.randn(2, 4)
    torch.testing.assert_close(model(x), reference(x))


def test_module_dict_items_get_sources():
    class WithDict(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2), "b": torch.nn.Linear(2, 2)})

        def forward(self, x):
            return sum(head(x) for name, head in self.heads.items())

    model = WithDict()
    x = torch.randn(1, 2)
    hooks = Hooks()
    result = interpret(
        lambda m, x: m(x), (model, x), {}, hooks, arg_sources=[ArgumentSource(0), ArgumentSource(1)]
    )
    torch.testing.assert_close(result, model(x))
    assert any(source.startswith("args[0].heads") and source.endswith("['a']") for source in hooks.sources)
