"""Greedy decoding with a Hugging Face KV cache through ``thunder.jit``, against eager PyTorch.

The cache is transformers' ``StaticCache``: its key/value tensors are allocated once at the maximum
length and every step writes the new positions into them in place (``index_copy_``, which thunder
functionalizes and writes back in the epilogue). Shapes therefore stay the same from step to step,
so a decode loop compiles twice, once for the prompt and once for the one-token steps, however
many tokens it generates: the static cache is the bucketing (one bucket, the maximum length).
A prompt of another length compiles the prefill once more, with its length symbolic
(core/symbolic_shapes.py); later lengths reuse it.

``DynamicCache`` grows by rebinding its tensors (``layer.keys = torch.cat(...)``): side effects on a
Python object, which the epilogue replays after every call (interpreter/side_effects.py). Its length
changes every step; from the second decode compile on it is a symbolic size, so a generation
compiles three times whatever its length.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (the `test` extra has it)"
)

VOCAB, MAX_LENGTH, STEPS = 128, 32, 8


def gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def _decoder_config(config_class: type, **extra: Any) -> Any:
    return config_class(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        **extra,
    )  # fmt: skip


def mistral() -> torch.nn.Module:
    return transformers.MistralForCausalLM(_decoder_config(transformers.MistralConfig))


def qwen2() -> torch.nn.Module:
    return transformers.Qwen2ForCausalLM(_decoder_config(transformers.Qwen2Config))


def gemma() -> torch.nn.Module:
    return transformers.GemmaForCausalLM(_decoder_config(transformers.GemmaConfig, head_dim=8))


def static_cache(model: torch.nn.Module, batch: int) -> Any:
    """A StaticCache with its tensors allocated now (not lazily inside the compiled call)."""
    config = model.config
    cache = transformers.StaticCache(config=config, max_cache_len=MAX_LENGTH)
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    cache.early_initialization(
        batch, heads, config.hidden_size // config.num_attention_heads, torch.float32, "cpu"
    )
    return cache


def greedy_decode(model: Callable, prompt: torch.Tensor, cache: Any, steps: int = STEPS) -> torch.Tensor:
    ids, position, tokens = prompt, 0, []
    with torch.no_grad():
        for _ in range(steps):
            length = ids.shape[1]
            positions = torch.arange(position, position + length).expand(ids.shape[0], -1)
            output = model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=positions)
            next_token = output.logits[:, -1].argmax(-1)
            tokens.append(next_token)
            ids, position = next_token[:, None], position + length
    return torch.stack(tokens, dim=1)


@pytest.mark.parametrize("make_model", [gpt2, llama], ids=["gpt2", "llama"])
def test_greedy_decode_with_static_cache_matches_eager(make_model: Callable) -> None:
    torch.manual_seed(0)
    model = make_model().eval()
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    expected = greedy_decode(model, prompt, static_cache(model, 2))

    jitted = thunder.jit(model)
    cache = static_cache(model, 2)
    actual = greedy_decode(jitted, prompt, cache)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    # one compile for the prompt, one for all the one-token steps: no retrace per sequence length
    assert thunder.cache_misses(jitted) == 2
    assert thunder.cache_hits(jitted) == STEPS - 2
    # the epilogue wrote the keys and values into the caller's cache, as eager does
    eager_cache = static_cache(model, 2)
    greedy_decode(model, prompt, eager_cache)
    for actual_layer, expected_layer in zip(cache.layers, eager_cache.layers):
        torch.testing.assert_close(actual_layer.keys, expected_layer.keys)
        torch.testing.assert_close(actual_layer.values, expected_layer.values)

    # a second generation, with a new cache and prompt, runs the cached entries
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(2))
    expected = greedy_decode(model, prompt, static_cache(model, 2))
    actual = greedy_decode(jitted, prompt, static_cache(model, 2))
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jitted) == 2


def test_greedy_decode_with_dynamic_cache_matches_eager() -> None:
    torch.manual_seed(0)
    model = llama().eval()
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    eager_cache = transformers.DynamicCache(config=model.config)
    expected = greedy_decode(model, prompt, eager_cache, steps=3)
    cache = transformers.DynamicCache(config=model.config)
    actual = greedy_decode(thunder.jit(model), prompt, cache, steps=3)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    for actual_layer, expected_layer in zip(cache.layers, eager_cache.layers):  # replayed by the epilogue
        torch.testing.assert_close(actual_layer.keys, expected_layer.keys)
        torch.testing.assert_close(actual_layer.values, expected_layer.values)


# --- generate() through thunder, both spellings -------------------------------------------------

MODELS = {"gpt2": gpt2, "llama": llama, "mistral": mistral, "qwen2": qwen2, "gemma": gemma}
MODES = {
    "greedy": {"do_sample": False},
    "sample": {"do_sample": True, "top_k": 10},  # same seed: eager's sampling sees equal logits
    "beam": {"do_sample": False, "num_beams": 2},
    "padded": {"do_sample": False, "attention_mask": torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])},
}
# (model, spelling, cache, mode) run by default; every other combination is marked slow
QUICK = {
    ("llama", "module", "dynamic", "greedy"),
    ("llama", "module", "static", "greedy"),
    ("llama", "forward", "dynamic", "greedy"),
    ("llama", "forward", "static", "greedy"),
    ("gpt2", "forward", "static", "padded"),
}


def _generation_cases() -> list:
    cases = []
    for name in MODELS:
        for spelling in ("module", "forward"):
            for cache in ("dynamic", "static"):
                for mode in MODES:
                    marks = () if (name, spelling, cache, mode) in QUICK else (pytest.mark.slow,)
                    cases.append(
                        pytest.param(
                            name, spelling, cache, mode, marks=marks, id=f"{name}-{spelling}-{cache}-{mode}"
                        )
                    )
    return cases


def _generate(model: Any, prompt: torch.Tensor, cache: str, mode: str) -> torch.Tensor:
    options = dict(MODES[mode], max_new_tokens=STEPS)
    if cache == "static":
        options["cache_implementation"] = "static"
    torch.manual_seed(5)
    with torch.no_grad():
        return model.generate(prompt, **options)


@pytest.mark.parametrize("name, spelling, cache, mode", _generation_cases())
def test_generate_matches_eager(name: str, spelling: str, cache: str, mode: str) -> None:
    """``thunder.jit(model).generate(...)`` and ``model.forward = thunder.jit(model.forward)``."""
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    prompt = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    if mode == "padded":
        prompt[0, :2] = 0  # the pad token, masked out
    expected = _generate(model, prompt, cache, mode)

    if spelling == "module":
        jitted = generator = thunder.jit(model)
    else:
        jitted = thunder.jit(model.forward)
        model.forward, generator = jitted, model
    actual = _generate(generator, prompt, cache, mode)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jitted) >= 2  # the compiled forward ran: the prompt, then the steps
    if (
        cache == "static"
    ):  # Mistral's sliding-window layer counts in a Python int: symbolic from the first step
        assert thunder.cache_misses(jitted) == 2
    if spelling == "module":
        assert "forward" not in model.__dict__  # routed only while generate() ran


def test_generate_again_with_a_new_static_cache() -> None:
    """Each ``generate()`` makes its own StaticCache, which the model's output carries back: the compiled
    forward must return the cache of *that* call (it returned the first call's, a constant of the trace,
    and the second generate() wrote into the full first cache)."""
    torch.manual_seed(0)
    model = llama().eval()
    jitted = thunder.jit(model)
    for seed in (1, 2, 1):
        prompt = torch.randint(3, VOCAB, (1, 4), generator=torch.Generator().manual_seed(seed))
        expected = _generate(model, prompt, "static", "greedy")
        torch.testing.assert_close(_generate(jitted, prompt, "static", "greedy"), expected, rtol=0, atol=0)
    assert thunder.cache_misses(jitted) == 2


def test_thunder_module_behaves_as_the_model() -> None:
    model = llama().eval()
    jitted = thunder.jit(model)
    assert jitted.config is model.config and jitted.generation_config is model.generation_config
    assert jitted.device == model.device and jitted.dtype == model.dtype
    assert jitted.get_input_embeddings() is model.get_input_embeddings()
    assert jitted.can_generate() and jitted.main_input_name == model.main_input_name
    jitted.generation_config.max_new_tokens = 3  # the model's own object
    assert model.generation_config.max_new_tokens == 3
    jitted.custom_flag = True  # a new attribute stays on the wrapper ...
    assert not hasattr(model, "custom_flag")
    jitted.main_input_name = "input_ids"  # ... one the model has is set on the model
    assert model.__dict__["main_input_name"] == "input_ids"
    with pytest.raises(AttributeError, match="no_such_attribute"):
        jitted.no_such_attribute
    ids = torch.randint(3, VOCAB, (1, 4))
    torch.testing.assert_close(jitted(ids).logits, model(ids).logits)
    assert thunder.cache_misses(jitted) == 1  # model(ids) above ran eagerly


@pytest.mark.parametrize(
    "name",
    ["llama", *(pytest.param(n, marks=pytest.mark.slow) for n in ("gpt2", "qwen2", "gemma", "mistral"))],
)
def test_dynamic_cache_compiles_a_constant_number_of_times(name: str) -> None:
    """Point 3 of issue 23: every decode step grows the cache by one, a new shape (and, for Mistral, a
    new count of tokens in its sliding-window layer's Python int). The cache length
    becomes a symbolic size (core/symbolic_shapes.py) on the second decode compile, so a generation
    compiles three times however many tokens it makes: the prompt, the first step (static: one
    length seen so far), then one program for every later cache length. A new prompt length compiles
    the prompt once more, symbolic in its length; after that no prompt length compiles anything."""
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    jitted = thunder.jit(model)
    expected_misses = {5: 3, 7: 4, 4: 4, 11: 4}
    for length, misses in expected_misses.items():
        prompt = torch.randint(3, VOCAB, (2, length), generator=torch.Generator().manual_seed(length))
        for steps in (STEPS, 2 * STEPS):
            options = {"do_sample": False, "max_new_tokens": steps}
            with torch.no_grad():
                expected = model.generate(prompt, **options)
                actual = jitted.generate(prompt, **options)
            torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert thunder.cache_misses(jitted) == misses
    assert thunder.compile_stats(jitted).dynamic_fallbacks == []
    decode = str(thunder.last_traces(jitted)[-1])
    assert "torch.cat([keys, " in decode and "1 + s" in decode  # the grown cache's length is 1 + s..


@pytest.mark.parametrize(
    "window, misses",
    [(None, 3), pytest.param(8, 5, marks=pytest.mark.slow)],
    ids=["default-window", "window-crossed"],
)
def test_mistral_sliding_window_cache_compiles_a_constant_number_of_times(
    window: int | None, misses: int
) -> None:
    """Mistral's config has a sliding window, so its DynamicCache is made of sliding-window layers that
    count the tokens seen in a Python int (``cumulative_length += n``) and decide on it (``is_full``,
    ``kv_offset``): guarded by value, every decode step compiled again. The int changed between the
    prompt's compile and the first step's, so it is a symbolic int from then on (core/symbolic_shapes.py);
    the epilogue writes each call's count back. The default window (4096) is never reached: the prompt,
    the first step (the cache's tensors static), then every later step. A window of 8 is crossed
    during the generation: the steps at its edge (where the kept keys stop growing, where ``is_full``
    turns) compile their own entries, then one entry serves every later full-window step."""
    assert _decoder_config(transformers.MistralConfig).sliding_window is not None
    torch.manual_seed(0)
    extra = {} if window is None else {"sliding_window": window}
    model = transformers.MistralForCausalLM(_decoder_config(transformers.MistralConfig, **extra)).eval()
    jitted = thunder.jit(model)
    prompt = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    for steps in (STEPS, 2 * STEPS):
        options = {"do_sample": False, "max_new_tokens": steps}
        with torch.no_grad():
            expected = model.generate(prompt, **options)
            actual = jitted.generate(prompt, **options)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert thunder.cache_misses(jitted) == misses
    assert thunder.compile_stats(jitted).dynamic_fallbacks == []
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert re.search(r"s\d+ = .*\.cumulative_length\n", prologue)


def test_static_cache_prefill_compiles_once_for_any_prompt_length() -> None:
    """A StaticCache keeps the decode step's shapes; the prompt's length changes from one generation to
    the next, and the prefill becomes symbolic in it on its second compile."""
    torch.manual_seed(0)
    model = llama().eval()
    jitted = thunder.jit(model)
    for length in (5, 7, 4, 9, 6, 2):
        prompt = torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(length))
        expected = greedy_decode(model, prompt, static_cache(model, 2), steps=3)
        actual = greedy_decode(jitted, prompt, static_cache(model, 2), steps=3)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    # prompt of 5, the one-token steps, then the prompt symbolic in its length (7, 4, 9, 6 and 2 hit it)
    assert thunder.cache_misses(jitted) == 3
    prologues = [str(e.prologue_traces[-1]) for e in thunder.core.pipeline._jitted(jitted)._cache]
    assert any("= input_ids.shape[1]" in p for p in prologues)


def test_generate_with_a_static_cache_and_changing_prompt_lengths() -> None:
    """generate() sizes its StaticCache to the prompt plus the new tokens, so both the prompt and the
    cache change length between generations: after two of them, no new compile."""
    torch.manual_seed(0)
    model = llama().eval()
    jitted = thunder.jit(model)
    misses = []
    for length in (5, 7, 4, 9, 6, 8):
        prompt = torch.randint(3, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))
        expected = _generate(model, prompt, "static", "greedy")
        torch.testing.assert_close(_generate(jitted, prompt, "static", "greedy"), expected, rtol=0, atol=0)
        misses.append(thunder.cache_misses(jitted))
    assert misses[-1] == misses[-3] and misses[-1] <= 6


def test_padded_generation_with_a_dynamic_cache_compiles_a_constant_number_of_times() -> None:
    """With padding, transformers builds the mask from ``attention_mask[batch_idx, kv_idx]`` (advanced
    indexing by index tensors of the cache's length): it stays symbolic too."""
    torch.manual_seed(0)
    model = llama().eval()
    jitted = thunder.jit(model)
    prompt = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(1))
    prompt[0, :2] = 0
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    for steps in (STEPS, 2 * STEPS):
        options = {"attention_mask": mask, "do_sample": False, "max_new_tokens": steps}
        with torch.no_grad():
            expected = model.generate(prompt, **options)
            actual = jitted.generate(prompt, **options)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert thunder.cache_misses(jitted) == 3
    assert thunder.compile_stats(jitted).dynamic_fallbacks == []


@pytest.mark.parametrize("spelling", ["module", "forward"])
def test_generate_when_transformers_compiles_the_forward_itself(spelling: str) -> None:
    """With a static cache on CUDA, ``generate()`` wraps the model's ``__call__`` in torch.compile on its
    own (here forced on the CPU through its compile config). Through the ThunderModule that is turned off
    (thunder compiles the forward); with ``model.forward = thunder.jit(model.forward)`` Dynamo meets
    thunder's function and leaves it to run as it is (it traced thunder's own code, and on CUDA failed)."""
    config = transformers.CompileConfig()
    if not hasattr(config, "_compile_all_devices"):
        pytest.skip("this transformers compiles only on accelerators")
    config._compile_all_devices = True
    torch.manual_seed(0)
    model = llama().eval()
    model.generation_config.compile_config = config
    prompt = torch.randint(3, VOCAB, (1, 5), generator=torch.Generator().manual_seed(1))
    options = {"max_new_tokens": STEPS, "do_sample": False, "cache_implementation": "static"}
    with torch.no_grad():
        expected = model.generate(prompt, disable_compile=True, **options)
        if spelling == "module":
            jitted = generator = thunder.jit(model)
        else:
            jitted = thunder.jit(model.forward)
            model.forward, generator = jitted, model
        actual = generator.generate(prompt, **options)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jitted) == 2  # the prompt, then the steps: thunder's entries, not Dynamo's
    assert hasattr(model, "_compiled_call") == (spelling == "forward")
