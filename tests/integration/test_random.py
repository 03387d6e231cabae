"""Random numbers under thunder.jit with the torch executor: the numbers eager draws, call after call.

Each test runs eager and the jitted function from the same generator state, several times in a row:
the generator's state must advance alike (a cached trace never replays old numbers), a
``manual_seed`` inside the function must reseed on every call, and a ``generator=`` argument must be
drawn from (and advanced), not the default generator. docs/random.md states the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CALLS = 3


def _same_numbers(fn: Callable, *args: Any, seed: int | None = 1234, calls: int = CALLS) -> None:
    """Eager and jitted ``fn`` from equal default-generator states give equal results, call after call."""
    jfn = thunder.jit(fn)
    if seed is not None:
        torch.manual_seed(seed)
    eager = [fn(*args) for _ in range(calls)]
    eager_state = torch.get_rng_state()
    if seed is not None:
        torch.manual_seed(seed)
    ours = [jfn(*args) for _ in range(calls)]
    for expected, actual in zip(eager, ours):
        torch.testing.assert_close(actual, expected)
    assert torch.equal(torch.get_rng_state(), eager_state), (
        "the default generator did not advance as in eager"
    )
    if calls > 1 and seed is not None and "manual_seed" not in str(thunder.last_traces(jfn)[-1]):
        flat = [x if isinstance(x, tuple) else (x,) for x in ours]
        replayed = all(torch.equal(a, b) for later in flat[1:] for a, b in zip(flat[0], later))
        assert not replayed, "later calls replayed the first call's numbers"


FACTORIES: dict[str, Callable] = {
    "rand": lambda x: x + torch.rand(8),
    "rand_two_calls": lambda x: (torch.rand(8), torch.rand(8)),  # never merged into one draw
    "randn": lambda x: x * torch.randn(8, dtype=torch.float64),
    "randint": lambda x: torch.randint(0, 100, (5,)),
    "randint_high_only": lambda x: torch.randint(7, (2, 3)),
    "rand_like": lambda x: torch.rand_like(x) + x,
    "randn_like": lambda x: torch.randn_like(x) * x,
    "randint_like": lambda x: torch.randint_like(x, 10),
    "randperm": lambda x: torch.randperm(10),
    "bernoulli": lambda x: torch.bernoulli(torch.sigmoid(x)),
    "bernoulli_p": lambda x: torch.bernoulli(x, 0.3),
    "bernoulli_method": lambda x: torch.sigmoid(x).bernoulli(),
    "multinomial": lambda x: torch.multinomial(torch.softmax(x, 0), 2),
    "multinomial_replacement": lambda x: torch.multinomial(torch.softmax(x, 0), 5, replacement=True),
    "normal_tensors": lambda x: torch.normal(x, torch.ones(8) * 2),
    "normal_sizes": lambda x: torch.normal(1.0, 2.0, (4,)),
    "uniform_": lambda x: torch.empty(8).uniform_(-1, 1) + x,
    "normal_": lambda x: x.clone().normal_(),
    "dropout": lambda x: F.dropout(x, 0.3),
    "dropout_module": lambda x: torch.nn.Dropout(0.5)(x),
    "unused_draw": lambda x: (torch.rand(4), x + torch.rand(8))[1],  # the unused draw still advances
    "unused_fill": lambda x: (torch.empty(5).exponential_(), x + torch.rand(8))[1],  # a fallback, kept too
    "poisson": lambda x: torch.poisson(x * 3),  # a fallback: run by PyTorch in order
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_random_ops_match_eager_call_after_call(name: str) -> None:
    _same_numbers(FACTORIES[name], torch.rand(8))


def test_manual_seed_inside_reseeds_every_call() -> None:
    def f(x):
        torch.manual_seed(0)
        return x + torch.rand(3)

    jf = thunder.jit(f)
    x = torch.zeros(3)
    first, second = jf(x), jf(x)
    torch.testing.assert_close(first, f(x))
    torch.testing.assert_close(second, first)
    assert "manual_seed" in str(thunder.last_traces(jf)[-1])


def test_manual_seed_between_draws_and_its_value_is_an_input() -> None:
    def f(x, seed):
        a = torch.rand(2)
        torch.manual_seed(seed)
        return x + torch.rand(2), a

    _same_numbers(f, torch.zeros(2), 5)
    jf = thunder.jit(f)
    for seed in (1, 2, 1):
        torch.manual_seed(99)
        expected = f(torch.zeros(2), seed)
        torch.manual_seed(99)
        torch.testing.assert_close(jf(torch.zeros(2), seed), expected)


def test_manual_seed_returns_the_default_generator() -> None:
    def f(x):
        g = torch.manual_seed(3)
        return x + torch.rand(2, generator=g)

    _same_numbers(f, torch.zeros(2))


def test_seed_outside_before_each_call() -> None:
    jf = thunder.jit(lambda x: F.dropout(x, 0.5) + torch.randn(8))
    x = torch.ones(8)
    for seed in (0, 1, 0):
        torch.manual_seed(seed)
        expected = F.dropout(x, 0.5) + torch.randn(8)
        torch.manual_seed(seed)
        torch.testing.assert_close(jf(x), expected)


GENERATOR_FACTORIES: dict[str, Callable] = {
    "rand": lambda x, g: x + torch.rand(3, generator=g),
    "randn": lambda x, g: torch.randn(2, 3, generator=g),
    "randint": lambda x, g: torch.randint(0, 9, (4,), generator=g),
    "randint_like": lambda x, g: torch.randint_like(x, 0, 9, generator=g),
    "rand_like": lambda x, g: torch.rand_like(x, generator=g),
    "randn_like": lambda x, g: torch.randn_like(x, generator=g),
    "randperm": lambda x, g: torch.randperm(6, generator=g),
    "bernoulli": lambda x, g: torch.bernoulli(torch.sigmoid(x), generator=g),
    "multinomial": lambda x, g: torch.multinomial(torch.softmax(x, 0), 2, generator=g),
    "normal": lambda x, g: torch.normal(x, 1.0, generator=g),
    "normal_sizes": lambda x, g: torch.normal(0.0, 1.0, (3,), generator=g),
    "uniform_": lambda x, g: torch.empty(3).uniform_(generator=g) + x,
    "mixed": lambda x, g: (torch.rand(3, generator=g), torch.rand(3), torch.randn(3, generator=g)),
}


@pytest.mark.parametrize("name", sorted(GENERATOR_FACTORIES))
def test_generator_argument_is_drawn_from_and_advanced(name: str) -> None:
    fn = GENERATOR_FACTORIES[name]
    jfn = thunder.jit(fn)
    x = torch.rand(3)
    eager_generator, our_generator = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    torch.manual_seed(0)
    eager = [fn(x, eager_generator) for _ in range(CALLS)]
    default_state = torch.get_rng_state()
    torch.manual_seed(0)
    ours = [jfn(x, our_generator) for _ in range(CALLS)]
    for expected, actual in zip(eager, ours):
        torch.testing.assert_close(actual, expected)
    assert torch.equal(our_generator.get_state(), eager_generator.get_state())
    assert torch.equal(torch.get_rng_state(), default_state)  # the default generator only where eager used it


def test_another_generator_draws_from_that_one() -> None:
    jfn = thunder.jit(lambda g: torch.rand(3, generator=g))
    first, second = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    torch.testing.assert_close(jfn(first), torch.rand(3, generator=torch.Generator().manual_seed(1)))
    torch.testing.assert_close(jfn(second), torch.rand(3, generator=torch.Generator().manual_seed(2)))
    assert torch.equal(first.get_state(), torch.Generator().manual_seed(1).get_state()) is False


_GLOBAL_GENERATOR = torch.Generator()


def test_generator_read_from_a_global_and_seeded_inside() -> None:
    def f(x):
        _GLOBAL_GENERATOR.manual_seed(11)
        return x + torch.rand(3, generator=_GLOBAL_GENERATOR), torch.randn(2, generator=_GLOBAL_GENERATOR)

    _same_numbers(f, torch.zeros(3))
    jf = thunder.jit(f)
    jf(torch.zeros(3))
    state = _GLOBAL_GENERATOR.get_state()
    f(torch.zeros(3))
    assert torch.equal(_GLOBAL_GENERATOR.get_state(), state)


def test_generator_created_and_seeded_inside() -> None:
    def f(x):
        g = torch.Generator().manual_seed(5)
        return x + torch.rand(3, generator=g)

    _same_numbers(f, torch.zeros(3))


# ---------------------------------------------------------------------------------------------
# Autograd: the backward uses the forward's draws; calls draw anew


def _forward_backward(fn: Callable, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.detach().requires_grad_()
    out = fn(x)
    (grad,) = torch.autograd.grad((out * torch.arange(out.numel()).reshape(out.shape)).sum(), x)
    return out.detach(), grad


GRAD_CASES: dict[str, Callable] = {
    "dropout": lambda x: F.dropout(x, 0.4),
    "dropout_then_more": lambda x: torch.tanh(F.dropout(x * 2, 0.5)) * x,
    "two_dropouts": lambda x: F.dropout(x, 0.5) + F.dropout(x.sin(), 0.5),
    "dropout_p1": lambda x: F.dropout(x, 1.0),
    "rand_like_of_grad_input": lambda x: x * torch.rand_like(x),
    "randn_like_of_grad_input": lambda x: x + torch.randn_like(x),
    "bernoulli_mask": lambda x: x * torch.bernoulli(torch.sigmoid(x)),
    "normal_of_grad_mean": lambda x: torch.normal(x, 2.0) * x,
    "seeded_dropout": lambda x: (torch.manual_seed(3), F.dropout(x.exp(), 0.5))[1],
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_forward_and_backward_match_eager_call_after_call(name: str) -> None:
    fn = GRAD_CASES[name]
    jfn = thunder.jit(fn)
    x = torch.randn(16)
    torch.manual_seed(21)
    eager = [_forward_backward(fn, x) for _ in range(CALLS)]
    torch.manual_seed(21)
    ours = [_forward_backward(jfn, x) for _ in range(CALLS)]
    for (out, grad), (our_out, our_grad) in zip(eager, ours):
        torch.testing.assert_close(our_out, out)
        torch.testing.assert_close(our_grad, grad)


def test_dropout_backward_reads_the_forward_mask_and_draws_nothing() -> None:
    jfn = thunder.jit(lambda x: torch.tanh(F.dropout(x, 0.5)))
    x = torch.randn(64, requires_grad=True)
    out = jfn(x)
    forward, backward = str(thunder.last_traces(jfn)[-1]), str(thunder.last_backward_traces(jfn)[-1])
    assert forward.count("native_dropout") == 1
    for name in ("native_dropout", "rand", "uniform", "bernoulli"):
        assert name not in backward
    state = torch.get_rng_state()
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(torch.get_rng_state(), state)
    kept = out != 0
    torch.testing.assert_close(grad[~kept], torch.zeros_like(grad[~kept]))
    torch.testing.assert_close(grad[kept], 2 * (1 - out[kept] ** 2))


def test_module_with_dropout_trains_like_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2)
    )
    jmodel = thunder.jit(model)
    x = torch.randn(4, 8)
    for step in range(CALLS):
        torch.manual_seed(step)
        expected = model(x)
        expected_grads = torch.autograd.grad(expected.sum(), list(model.parameters()))
        torch.manual_seed(step)
        actual = jmodel(x)
        actual_grads = torch.autograd.grad(actual.sum(), list(model.parameters()))
        torch.testing.assert_close(actual, expected)
        for ours, theirs in zip(actual_grads, expected_grads):
            torch.testing.assert_close(ours, theirs)
    model.eval()
    torch.testing.assert_close(jmodel(x), model(x))


# ---------------------------------------------------------------------------------------------
# Transforms never merge, drop or reorder random ops


def test_equal_draws_stay_separate_in_every_trace() -> None:
    jfn = thunder.jit(lambda x: (x + torch.rand(3), x + torch.rand(3)))
    a, b = jfn(torch.zeros(3))
    assert not torch.equal(a, b)
    for trace in thunder.last_traces(jfn):
        # traces record the size as torch's function signature spells it: rand((3,))
        assert str(trace).count("rand((3,)") == 2 or str(trace).count("uniform(") == 2


def test_seed_stays_between_the_draws_it_separates() -> None:
    def f(x):
        a = F.dropout(x.sin(), 0.5)
        torch.manual_seed(4)
        b = torch.rand(4)
        return a + b.cos() * x.sin()

    _same_numbers(f, torch.randn(4))
    jf = thunder.jit(f)
    jf(torch.randn(4))
    lines = str(thunder.last_traces(jf)[-1]).splitlines()
    position = {
        key: next(i for i, line in enumerate(lines) if key in line) for key in ("dropout(", "seed(", "rand(")
    }
    assert position["dropout("] < position["seed("] < position["rand("]
