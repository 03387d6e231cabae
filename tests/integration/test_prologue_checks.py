"""The prologue still rejects every change it rejected, once its checks are the fast ones.

After its first call a prologue checks its tensors with torch's C++ tensor check (``TensorChecks``),
its identities and literal values inline, and reads through hoisted fetches. Each test here calls a
jitted module until that state is reached, changes one thing the computation depends on, and checks
that the next call recompiles (or, where the change needs no new program, sees it) and answers as
eager does. Tensor cases run twice: with torch's check and with the Python one it replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder
from thunder.core import prologue

transformers = pytest.importorskip("transformers")


@pytest.fixture(params=["torch's tensor check", "python tensor check"])
def tensor_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python tensor check":
        monkeypatch.setattr(prologue, "TORCH_TENSOR_GUARDS", None)
    elif prologue.TORCH_TENSOR_GUARDS is None:
        pytest.skip("this torch has no torch._C._dynamo.guards.TensorGuards")
    return request.param


def _mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)
    )


def _warm(jitted: Callable, *args: Any) -> None:
    for _ in range(3):  # the first call makes the C++ check, the next ones run it
        jitted(*args)


def _changes() -> dict[str, Callable[[torch.nn.Sequential], Any]]:
    """Changes to a module after compiling, each of which must make a new entry."""

    def new_shape(model: torch.nn.Sequential) -> None:
        model[3].weight.data = torch.randn(3, 8)  # the same Parameter objects, other shapes
        model[3].bias.data = torch.randn(3)

    def add_hook(model: torch.nn.Sequential) -> None:
        model[1].register_forward_hook(lambda module, args, output: output * 2)

    def swap(model: torch.nn.Sequential) -> None:
        model[1] = torch.nn.Tanh()

    return {
        "dtype of the same objects": lambda model: model.double(),
        "shape of the same parameter": new_shape,
        "requires_grad flipped in place": lambda model: model[3].weight.requires_grad_(False),
        "a forward hook": add_hook,
        "training": lambda model: model.train(),
        "a submodule swapped": swap,
    }


def test_a_plain_tensor_for_a_parameter(tensor_check: str) -> None:
    """Not a change to the Python check (a tensor of the same metadata), but one to torch's (its class):
    another entry, which answers the same."""
    model = _mlp().eval()
    jitted = thunder.jit(model)
    x = torch.randn(3, 4)
    _warm(jitted, x)
    model[3]._parameters["weight"] = model[3].weight.detach().clone().requires_grad_()
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == (2 if tensor_check == "torch's tensor check" else 1)


@pytest.mark.parametrize("change", list(_changes()))
def test_a_changed_module_recompiles(change: str, tensor_check: str) -> None:
    torch.manual_seed(0)
    model = _mlp().eval()
    jitted = thunder.jit(model)
    x = torch.randn(3, 4)
    _warm(jitted, x)
    assert thunder.cache_misses(jitted) == 1
    _changes()[change](model)
    x = x.to(next(model.parameters()).dtype)
    torch.manual_seed(1)
    actual = jitted(x)
    torch.manual_seed(1)
    expected = model(x) if change != "training" else None
    assert thunder.cache_misses(jitted) == 2
    if expected is not None:  # dropout draws differ from eager's: compared by shape only
        torch.testing.assert_close(actual, expected)


def test_a_replaced_parameter_of_the_same_kind_is_read_without_recompiling(tensor_check: str) -> None:
    model = _mlp().eval()
    jitted = thunder.jit(model)
    x = torch.randn(3, 4)
    _warm(jitted, x)
    model[3].weight = torch.nn.Parameter(torch.randn(2, 8))
    torch.testing.assert_close(jitted(x), model(x))
    assert thunder.cache_misses(jitted) == 1


@pytest.mark.parametrize(
    "argument",
    [torch.randn(3, 5), torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4).requires_grad_(), [1.0]],
    ids=["shape", "dtype", "requires_grad", "not a tensor"],
)
def test_a_changed_tensor_argument_recompiles(argument: Any, tensor_check: str) -> None:
    jitted = thunder.jit(lambda x: x * 2)
    _warm(jitted, torch.randn(3, 4))
    result = jitted(argument)
    assert thunder.cache_misses(jitted) == 2
    assert result == argument * 2 if isinstance(argument, list) else torch.equal(result, argument * 2)


def test_fsdp_shapes_replace_the_tensor_checks(tensor_check: str) -> None:
    jitted = thunder.jit(lambda x, w: x @ w)
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    jitted(x, w)
    traced = thunder.last_prologue_traces(jitted)[-1]
    names = [arg.name for arg in thunder.last_traces(jitted)[0].args]
    sharded = prologue.with_tensor_shapes(traced, {names[1]: (2, 4)}).python_callable()
    with pytest.raises(prologue.GuardFailure):
        sharded(x, w)
    assert sharded(x, torch.randn(2, 4))[0] is x
    assert traced.python_callable()(x, w)[1] is w  # the original prologue is unchanged


def _llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def _cache(model: torch.nn.Module, length: int = 16) -> Any:
    cache = transformers.StaticCache(config=model.config, max_cache_len=length)
    cache.early_initialization(1, 2, 8, torch.float32, "cpu")
    return cache


def _decode(call: Callable, cache: Any, steps: int = 4) -> list[torch.Tensor]:
    cache.reset()
    ids, logits = torch.tensor([[3, 5, 7]]), []
    with torch.no_grad():
        for position in range(steps):
            start = 0 if position == 0 else 2 + position
            positions = torch.arange(start, start + ids.shape[1])[None]
            output = call(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=positions)
            logits.append(output.logits)
            ids = output.logits[:, -1:].argmax(-1)
    return logits


def _decode_changes() -> dict[str, Callable[[torch.nn.Module, Any], Any]]:
    """Changes between two decodes; each returns the cache the second decode uses."""

    def hook(model: torch.nn.Module, cache: Any) -> Any:
        model.model.layers[1].mlp.register_forward_hook(lambda module, args, output: output * 0.5)
        return cache

    def new_cache_tensor(model: torch.nn.Module, cache: Any) -> Any:
        for layer in cache.layers:  # the same cache object, longer tensors
            layer.keys, layer.values = torch.zeros(1, 2, 24, 8), torch.zeros(1, 2, 24, 8)
            layer.max_cache_len = 24
        return cache

    def requires_grad(model: torch.nn.Module, cache: Any) -> Any:
        model.model.layers[0].self_attn.o_proj.weight.requires_grad_(False)
        return cache

    def swap(model: torch.nn.Module, cache: Any) -> Any:
        model.model.layers[0].mlp.act_fn = torch.nn.GELU()
        return cache

    return {
        "a longer cache": lambda model, cache: _cache(model, 24),
        "a hook on a layer's mlp": hook,
        "a cache layer's tensors replaced": new_cache_tensor,
        "requires_grad of one weight": requires_grad,
        "an activation swapped": swap,
    }


@pytest.mark.parametrize("change", list(_decode_changes()))
def test_a_changed_decoder_recompiles(change: str, tensor_check: str) -> None:
    torch.manual_seed(0)
    model = _llama()
    jitted = thunder.jit(model)
    cache = _cache(model)
    _decode(jitted, cache)
    _decode(jitted, cache)
    misses = thunder.cache_misses(jitted)
    assert misses == 2  # the prompt and the one-token step
    cache = _decode_changes()[change](model, cache)
    actual = _decode(jitted, cache)
    expected = _decode(model, cache)
    assert thunder.cache_misses(jitted) > misses
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_a_new_parameter_in_a_decoder_is_read(tensor_check: str) -> None:
    torch.manual_seed(0)
    model = _llama()
    jitted = thunder.jit(model)
    cache = _cache(model)
    _decode(jitted, cache)
    _decode(jitted, cache)
    model.model.layers[1].self_attn.q_proj.weight = torch.nn.Parameter(torch.randn(32, 32))
    actual, expected = _decode(jitted, cache), _decode(model, cache)
    assert thunder.cache_misses(jitted) == 2
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize(
    "first, second",
    [
        (torch.float32, torch.float64),
        (torch.Size([3]), torch.Size([4])),
        (torch.Size([3]), (3,)),
        (b"a", b"b"),
        (torch.device("cpu"), torch.device("meta")),
        (2, 2.0),
        (True, 1),
        ("a", "b"),
        (None, 0),
    ],
    ids=[
        "dtype",
        "size",
        "size or tuple",
        "bytes",
        "device",
        "int or float",
        "bool or int",
        "str",
        "None or 0",
    ],
)
def test_a_changed_value_recompiles(first: Any, second: Any) -> None:
    """Values are compared inline by type and value (dtypes, True, False and None by identity)."""
    jitted = thunder.jit(lambda x, value: (x * 2, value))
    x = torch.randn(2)
    for _ in range(2):
        assert jitted(x, first)[1] == first
    assert jitted(x, second)[1] == second and thunder.cache_misses(jitted) == 2


def test_a_nan_value_still_hits() -> None:
    jitted = thunder.jit(lambda x, value: x * value)
    x = torch.randn(2)
    for _ in range(3):
        jitted(x, float("nan"))
    assert thunder.cache_misses(jitted) == 1
