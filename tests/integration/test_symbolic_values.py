"""``cache="symbolic values"``: Python numbers are inputs of the trace, checked by type only.

Every test compares with eager PyTorch on each call, and checks the cache counters: a changed
number must reuse the compiled trace unless its value decided a branch or a shape, in which case
it must retrace (never run a stale trace).
"""

from __future__ import annotations

import math

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"
SCALE = 2.0


def _check_calls(fn, calls, *, misses, hits, jitted=None):
    jitted = jitted or thunder.jit(fn, cache=SYMBOLIC)
    for args, kwargs in calls:
        torch.testing.assert_close(jitted(*args, **kwargs), fn(*args, **kwargs))
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (misses, hits)
    return jitted


def _prologue(jitted) -> str:
    return str(thunder.last_prologue_traces(jitted)[-1])


def test_float_argument_is_a_trace_input_checked_by_type():
    def fn(x, alpha):
        return x * alpha + alpha * 2

    x = torch.randn(4)
    jitted = _check_calls(fn, [((x, 2.0), {}), ((x, 3.0), {}), ((x, -0.5), {})], misses=1, hits=2)
    assert thunder.cache_option(jitted) == SYMBOLIC
    prologue = _prologue(jitted)
    assert "if type(alpha) is not float: raise GuardFailure" in prologue
    assert "_checked := args[1])" not in prologue
    computation = str(thunder.last_traces(jitted)[0])
    assert "def computation(x, alpha):" in computation
    assert '# alpha: "float 2.0"' in computation
    assert 'f1 = alpha * 2  # f1: "float 4.0"' in computation


def test_constant_values_still_guard_the_value():
    def fn(x, alpha):
        return x * alpha

    x = torch.randn(4)
    jitted = thunder.jit(fn)
    jitted(x, 2.0)
    jitted(x, 3.0)
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (2, 0)
    assert "if type(_checked := args[1]) is not float or _checked != 3.0: raise GuardFailure" in _prologue(
        jitted
    )


def test_a_changed_type_retraces():
    def fn(x, n):
        return x + n

    x = torch.randn(3)
    _check_calls(fn, [((x, 2), {}), ((x, 5), {}), ((x, 2.5), {}), ((x, 7), {})], misses=2, hits=2)


def test_ints_in_tensor_ops_full_and_reductions():
    def fn(x, n, v):
        return x + n, torch.full((2,), v), x.sum() / n, (n * 3 - 1) * x

    x = torch.randn(5)
    _check_calls(fn, [((x, 2, 1.5), {}), ((x, 7, -4.0), {}), ((x, -3, 0.25), {})], misses=1, hits=2)


def test_keyword_arguments_and_defaults():
    def fn(x, *, alpha=0.5, beta=1):
        return x * alpha - beta

    x = torch.randn(3)
    calls = [
        ((x,), {"alpha": 2.0, "beta": 3}),
        ((x,), {"alpha": 4.0, "beta": -1}),
        ((x,), {}),
        ((x,), {"alpha": 5.0}),
        ((x,), {"alpha": 6.0}),
    ]
    # the keyword set decides what the prologue fetches: {alpha, beta}, {}, {alpha}
    _check_calls(fn, calls, misses=3, hits=2)


def test_numbers_inside_tuples_lists_and_dicts():
    def fn(x, pair, items, options):
        low, high = pair
        return (x - low) * high + items[0] - options["shift"] * items[1]

    x = torch.randn(3)
    calls = [
        ((x, (1.0, 2.0), [3, 4], {"shift": 0.5}), {}),
        ((x, (-1.0, 5.0), [7, -2], {"shift": 1.5}), {}),
    ]
    _check_calls(fn, calls, misses=1, hits=1)


def test_globals_and_closures():
    global SCALE
    offset = 1.0

    def fn(x):
        return x * SCALE + offset

    x = torch.randn(3)
    jitted = thunder.jit(fn, cache=SYMBOLIC)
    try:
        for SCALE, offset in ((2.0, 1.0), (3.0, -2.0), (0.5, 4.0)):  # noqa: B007
            torch.testing.assert_close(jitted(x), fn(x))
    finally:
        SCALE = 2.0
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 2)


class Scaled(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale


def test_module_attribute():
    model = Scaled(0.5)
    jitted = thunder.jit(model, cache=SYMBOLIC)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for scale in (0.5, 2.0, -1.0):
            model.scale = scale
            torch.testing.assert_close(jitted(x), model(x))
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 2)
    assert "if type(scale) is not float: raise GuardFailure" in _prologue(jitted)


def test_training_step_with_a_symbolic_scale():
    torch.manual_seed(0)
    model = Scaled(0.5)
    reference = Scaled(0.5)
    reference.load_state_dict(model.state_dict())
    jitted = thunder.jit(model, cache=SYMBOLIC)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(5, 4)
    for scale in (0.5, 2.0, -3.0):
        model.scale = reference.scale = scale
        for run, opt in ((jitted, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            loss = run(x).square().mean()
            loss.backward()
            opt.step()
        torch.testing.assert_close(model.linear.weight.grad, reference.linear.weight.grad)
        torch.testing.assert_close(model.linear.weight, reference.linear.weight)
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 2)
    lines = str(thunder.last_backward_traces(jitted)[-1]).splitlines()
    inputs = lines[next(i for i, line in enumerate(lines) if line.startswith("def backward")) + 1]
    assert (
        "scale" in inputs
    )  # the backward takes the number it multiplies by (its first line unpacks its inputs)


def test_symbolic_exponent_backward():
    def fn(x, p):
        return (x**p).sum()

    x = torch.rand(4) + 0.5
    jitted = thunder.jit(fn, cache=SYMBOLIC)
    for p in (2.0, 3.0, 0.0):
        xj, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        jitted(xj, p).backward()
        fn(xe, p).backward()
        torch.testing.assert_close(xj.grad, xe.grad)


def test_value_that_decides_a_branch_is_specialized():
    def fn(x, n):
        if n > 0:
            return x * n
        return x - n

    x = torch.randn(3)
    calls = [((x, 2), {}), ((x, 2), {}), ((x, -3), {}), ((x, 5), {})]
    jitted = _check_calls(fn, calls, misses=3, hits=1)
    assert "if type(_checked := args[1]) is not int or _checked != 5: raise GuardFailure" in _prologue(jitted)


def test_value_that_decides_a_shape_or_a_loop_is_specialized():
    def fn(x, rows, steps, scale):
        y = x.reshape(rows, -1)
        for _ in range(steps):
            y = y * scale
        return y

    x = torch.randn(12)
    calls = [((x, 3, 2, 0.5), {}), ((x, 3, 2, 1.5), {}), ((x, 4, 2, 1.5), {}), ((x, 4, 3, 1.5), {})]
    jitted = _check_calls(fn, calls, misses=3, hits=1)
    prologue = _prologue(jitted)
    assert "_checked := args[1]) is not int or _checked != 4:" in prologue
    assert "_checked := args[2]) is not int or _checked != 3:" in prologue
    assert "if type(scale) is not float: raise GuardFailure" in prologue
    assert "_checked := args[3])" not in prologue


def test_derived_number_specializes_its_inputs():
    def fn(x, a, b):
        half = (a + b) // 2
        return x[:half] * (a - b)

    x = torch.randn(8)
    # a + b decides the slice; a different a - b with the same a + b still retraces (both inputs guarded)
    calls = [((x, 3, 5), {}), ((x, 3, 5), {}), ((x, 5, 3), {})]
    _check_calls(fn, calls, misses=2, hits=1)


def test_python_reads_of_the_value_are_guarded():
    def fn(x, n):
        return x * math.sqrt(n), f"{n}", int(n) * 2

    x = torch.randn(2)
    jitted = thunder.jit(fn, cache=SYMBOLIC)
    for n in (4.0, 9.0):
        actual, expected = jitted(x, n), fn(x, n)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1:] == expected[1:]
    assert thunder.cache_misses(jitted) == 2


def test_bools_stay_constants():
    def fn(x, flag):
        return x * 2 if flag else x

    x = torch.randn(2)
    jitted = _check_calls(fn, [((x, True), {}), ((x, False), {}), ((x, True), {})], misses=2, hits=1)
    assert "if args[1] is not True: raise GuardFailure" in _prologue(jitted)


def test_number_results_are_returned():
    def fn(x, n, f):
        return x + 1, n * 2 + 1, f / 4, divmod(n, 3), -n, n**2, n << 1

    x = torch.randn(2)
    jitted = thunder.jit(fn, cache=SYMBOLIC)
    for n, f in ((5, 1.0), (7, 3.0)):
        actual, expected = jitted(x, n, f), fn(x, n, f)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1:] == expected[1:] and [type(a) for a in actual[1:]] == [type(e) for e in expected[1:]]
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 1)


def test_no_caching_is_unchanged():
    def fn(x, alpha):
        return x * alpha

    jitted = thunder.jit(fn, cache="no caching")
    x = torch.randn(2)
    for alpha in (1.0, 2.0):
        torch.testing.assert_close(jitted(x, alpha), fn(x, alpha))
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (2, 0)


@pytest.mark.parametrize("executors", [None, ["torch"]])
def test_execution_trace_is_runnable_printed_python(executors):
    def fn(x, alpha, n):
        return (x * alpha).sum() / n + alpha**2

    jitted = thunder.jit(fn, cache=SYMBOLIC, executors=executors)
    x = torch.randn(3)
    jitted(x, 1.5, 3)
    execution = thunder.last_traces(jitted)[-1]
    from thunder.core.codegen import compile_trace

    rerun = compile_trace(execution)  # compiled again from its printed text
    torch.testing.assert_close(rerun(x, 2.5, 4), fn(x, 2.5, 4))


def test_rematerialized_backward_gets_the_numbers_it_recomputes_with():
    def fn(x, w, s):
        y = torch.sin((x @ w) * s + s * 2)
        return torch.cos(y * s).sum()

    jitted = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(4, 3)
    for s in (0.5, 1.5):
        w = torch.randn(3, 5, requires_grad=True)
        w_eager = w.detach().clone().requires_grad_()
        jitted(x, w, s).backward()
        fn(x, w_eager, s).backward()
        torch.testing.assert_close(w.grad, w_eager.grad)
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (1, 1)
    backward = thunder.last_backward_traces(jitted)[-1]
    assert any(getattr(arg, "name", None) == "s" for arg in backward.args)


def test_storing_a_symbolic_number_on_a_module_is_replayed():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def forward(self, x):
            self.steps = self.steps + 1
            return x * 2

    model = Counter()
    jitted = thunder.jit(model, cache=SYMBOLIC)
    for _ in range(3):
        jitted(torch.randn(2))
    assert model.steps == 3 and type(model.steps) is int
    assert thunder.cache_misses(jitted) == 1  # the count is an input and an output, not a constant


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_setitem_with_an_int_that_changes_between_calls(cache: str) -> None:
    """``y[p] = v`` with an int ``p``: a symbolic number (or a size made symbolic on a recompile) is an
    index as eager takes it, a basic write, not an index tensor's (both raised after a213a57)."""

    def fn(x, p):
        y = x.clone()
        y[p] = -1.0
        return y

    jitted = thunder.jit(fn, cache=cache)
    for p in (0, 4, -1, (0, slice(None, None, 2), -1), 3):
        x = torch.arange(210.0).reshape(5, 6, 7)
        torch.testing.assert_close(jitted(x, p), fn(x, p))
