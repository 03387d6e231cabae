"""``loss.backward()`` inside a jitted function: gradients recorded into the program, ``.grad`` as eager's.

Each test runs one jitted function many times with changing inputs against the same function run
eagerly on a copy of the model, and compares losses, every ``.grad`` and, with an optimizer stepping
after the jitted function, the parameters.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

import thunder


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Dropout(0.0), torch.nn.Linear(8, 2)
    )


def _grads(model: torch.nn.Module) -> list[torch.Tensor | None]:
    return [p.grad for p in model.parameters()]


def _assert_same_grads(actual: torch.nn.Module, expected: torch.nn.Module) -> None:
    for a, e in zip(_grads(actual), _grads(expected)):
        assert (a is None) == (e is None)
        if a is not None:
            torch.testing.assert_close(a, e)


def _step_of(model: torch.nn.Module) -> Callable:
    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    return step


def whole_step_of(
    net: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_of: Callable | None = None
) -> Callable:
    """The training step users write: forward, ``loss.backward()``, ``optimizer.step()``, ``zero_grad()``."""

    def step(x: torch.Tensor, *targets: torch.Tensor) -> torch.Tensor:
        output = net(x)
        loss = loss_of(output, *targets) if loss_of is not None else output.square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


def test_gradients_land_in_grad_and_accumulate_like_eager() -> None:
    model = _mlp()
    reference = copy.deepcopy(model)
    jitted, eager = thunder.jit(_step_of(model)), _step_of(reference)
    for call in range(4):  # no zero_grad: .grad accumulates over the calls, as in eager
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        loss = jitted(x, y)
        torch.testing.assert_close(loss, eager(x, y).detach())
        assert not loss.requires_grad  # the program ran its own backward
        _assert_same_grads(model, reference)
        if call == 1:
            model.zero_grad(set_to_none=True)
            reference.zero_grad(set_to_none=True)
    assert thunder.cache_misses(jitted) == 1
    execution = thunder.last_traces(jitted)[-1]  # one program: forward, gradients, no autograd node
    assert "@torch.no_grad()" in str(execution)
    _, gradients = execution.output  # the loss, and the gradients the epilogue adds to .grad
    assert len(gradients) == len(list(model.parameters()))


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.AdamW])
def test_an_optimizer_stepping_after_the_jitted_step_trains_like_eager(optimizer_class: type) -> None:
    model = _mlp()
    reference = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=0.05)
    reference_optimizer = optimizer_class(reference.parameters(), lr=0.05)
    jitted, eager = thunder.jit(_step_of(model)), _step_of(reference)
    for _ in range(5):
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        optimizer.zero_grad()
        reference_optimizer.zero_grad()
        torch.testing.assert_close(jitted(x, y), eager(x, y).detach())
        optimizer.step()
        reference_optimizer.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)


def test_two_losses_each_backward_accumulate() -> None:
    model = _mlp()
    reference = copy.deepcopy(model)

    def step_of(net: torch.nn.Module) -> Callable:
        def step(x: torch.Tensor) -> torch.Tensor:
            hidden = net[1](net[0](x))
            first = hidden.square().mean()
            first.backward(retain_graph=True)  # the second loss reuses the first layer's graph
            second = net[3](hidden).sum()
            second.backward()
            return first + second

        return step

    jitted, eager = thunder.jit(step_of(model)), step_of(reference)
    for _ in range(3):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jitted(x), eager(x).detach())
        _assert_same_grads(model, reference)


def test_a_second_backward_through_the_same_graph_raises_as_in_eager() -> None:
    weight = torch.randn(3, requires_grad=True)

    def step(x: torch.Tensor) -> torch.Tensor:
        loss = (x * weight).tanh().sum()
        loss.backward()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        step(torch.randn(3))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        thunder.jit(step)(torch.randn(3))


def test_gradient_argument_and_a_leaf_argument_that_requires_grad() -> None:
    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.sin(x * w)
        out.backward(torch.full_like(out, 0.5))
        return out

    jitted = thunder.jit(step)
    for _ in range(3):
        x, w = torch.randn(4, requires_grad=True), torch.randn(4)
        x_eager = x.detach().clone().requires_grad_()
        torch.testing.assert_close(jitted(x, w), step(x_eager, w).detach())
        torch.testing.assert_close(x.grad, x_eager.grad)
        assert w.grad is None


def test_a_non_leaf_argument_is_refused_on_every_call() -> None:
    def step(x: torch.Tensor) -> torch.Tensor:
        loss = (x * x).sum()
        loss.backward()
        return loss

    jitted = thunder.jit(step)
    leaf = torch.randn(3, requires_grad=True)
    jitted(leaf)
    torch.testing.assert_close(leaf.grad, 2 * leaf.detach())
    made = torch.randn(3, requires_grad=True) * 2  # not a leaf: eager would go on into the multiplication
    with pytest.raises(NotImplementedError, match="not a leaf"):
        jitted(made)


def test_frozen_parameters_get_no_gradient() -> None:
    model = _mlp()
    model[0].requires_grad_(False)
    reference = copy.deepcopy(model)
    jitted, eager = thunder.jit(_step_of(model)), _step_of(reference)
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    jitted(x, y)
    eager(x, y)
    assert model[0].weight.grad is None and model[3].weight.grad is not None
    _assert_same_grads(model, reference)


def test_errors_name_what_is_not_supported() -> None:
    weight = torch.randn(3, requires_grad=True)

    def no_grad_loss(x: torch.Tensor) -> None:
        x.sum().backward()

    with pytest.raises(RuntimeError, match="does not require grad"):
        thunder.jit(no_grad_loss)(torch.randn(3))

    def not_scalar(x: torch.Tensor) -> None:
        (x * weight).backward()

    with pytest.raises(RuntimeError, match="scalar outputs"):
        thunder.jit(not_scalar)(torch.randn(3))

    def create_graph(x: torch.Tensor) -> None:
        (x * weight).sum().backward(create_graph=True)

    with pytest.raises(NotImplementedError, match="create_graph"):
        thunder.jit(create_graph)(torch.randn(3))


def test_a_hugging_face_model_step() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    reference = copy.deepcopy(model)

    def step_of(net: torch.nn.Module) -> Callable:
        def step(ids: torch.Tensor) -> torch.Tensor:
            loss = net(input_ids=ids, labels=ids).loss
            loss.backward()
            return loss

        return step

    jitted, eager = thunder.jit(step_of(model)), step_of(reference)
    for _ in range(2):
        ids = torch.randint(0, 64, (2, 8))
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        torch.testing.assert_close(jitted(ids), eager(ids).detach())
        _assert_same_grads(model, reference)


def test_zero_grad_clipping_and_a_hand_written_update_inside_the_step() -> None:
    model = _mlp()
    reference = copy.deepcopy(model)

    def step_of(net: torch.nn.Module) -> Callable:
        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            net.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.1)  # reads .grad and scales it in place
            with torch.no_grad():
                for p in net.parameters():
                    p -= 0.1 * p.grad
            return loss

        return step

    jitted, eager = thunder.jit(step_of(model)), step_of(reference)
    for _ in range(4):
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        torch.testing.assert_close(jitted(x, y), eager(x, y).detach())
        _assert_same_grads(model, reference)
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    # .grad is None on the first call and a tensor on the next ones: two entries, then hits
    assert thunder.cache_misses(jitted) == 2


def test_a_grad_the_call_finds_is_read_and_checked_on_every_call() -> None:
    weight = torch.randn(3, requires_grad=True)

    def fn(x: torch.Tensor) -> torch.Tensor:
        grad = weight.grad
        return x * 2 if grad is None else x + grad

    jitted = thunder.jit(fn)
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), x * 2)
    weight.grad = torch.ones(3)
    torch.testing.assert_close(jitted(x), x + 1)
    weight.grad = torch.full((3,), 5.0)  # the same entry reads the new .grad
    torch.testing.assert_close(jitted(x), x + 5)
    weight.grad = None
    torch.testing.assert_close(jitted(x), x * 2)
    assert thunder.cache_misses(jitted) == 2


def test_assigning_grad_checks_it_like_eager() -> None:
    weight = torch.randn(3, requires_grad=True)

    def fn(x: torch.Tensor) -> None:
        weight.grad = x

    with pytest.raises(RuntimeError, match="different size"):
        thunder.jit(fn)(torch.randn(4))
    thunder.jit(fn)(torch.full((3,), 2.0))
    torch.testing.assert_close(weight.grad, torch.full((3,), 2.0))


def test_foreach_functions_run_per_tensor() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
        torch._foreach_mul_([a, b], 3.0)
        sums = torch._foreach_add([a, b], [b, a], alpha=2)
        return [*sums, *torch._foreach_norm([a, b])]

    inputs = [torch.randn(4), torch.randn(4)]
    copies = [t.clone() for t in inputs]
    for actual, expected in zip(thunder.jit(fn)(*inputs), fn(*copies)):
        torch.testing.assert_close(actual, expected)
    for actual, expected in zip(inputs, copies):
        torch.testing.assert_close(actual, expected)


_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_NEEDS_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
_FUSED_ON_CPU = pytest.mark.skipif(
    "cpu" not in _get_fused_kernels_supported_devices(),
    reason="this torch has no fused Adam kernel for the CPU",
)
_OPTIMIZERS = [
    (torch.optim.SGD, {}),
    (torch.optim.SGD, {"momentum": 0.9, "weight_decay": 0.01}),
    (torch.optim.SGD, {"momentum": 0.9, "nesterov": True, "dampening": 0.0, "maximize": True}),
    (torch.optim.Adam, {"weight_decay": 0.01}),
    (torch.optim.AdamW, {}),
    (torch.optim.AdamW, {"betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}),
    (torch.optim.AdamW, {"foreach": True}),  # the path thunder takes does not depend on it
    (torch.optim.Adam, {"foreach": True, "weight_decay": 0.01}),
    # torch's fused kernel: the same update recorded with single-tensor operations (executors fuse them)
    pytest.param(torch.optim.AdamW, {"fused": True, "weight_decay": 0.1}, marks=_FUSED_ON_CPU),
    pytest.param(torch.optim.Adam, {"fused": True}, marks=_FUSED_ON_CPU),
]


@pytest.mark.parametrize(
    ("optimizer_class", "options"), _OPTIMIZERS, ids=lambda v: getattr(v, "__name__", str(v))
)
def test_the_whole_training_step_in_one_program(optimizer_class: type, options: dict) -> None:
    """forward, loss.backward(), optimizer.step(), optimizer.zero_grad(): parameters, optimizer state and
    .grad as eager's, step for step; the first step (empty state) and the next ones are two entries
    (one for plain SGD, which keeps no state)."""
    jitted, _ = _train_like_eager(optimizer_class, options)
    stateless = optimizer_class is torch.optim.SGD and not options.get("momentum")
    assert thunder.cache_misses(jitted) == (1 if stateless else 2)
    execution = str(thunder.last_traces(jitted)[-1])
    assert "inplace.copy_(" in execution  # parameters and state updated in place by the program


def _train_like_eager(
    optimizer_class: type, options: dict, steps: int = 5
) -> tuple[Callable, torch.optim.Optimizer]:
    """The whole step jitted and eager side by side: after each step, the loss, parameters, .grad and every
    state tensor (value, device and dtype) equal eager's. Returns the jitted step and its optimizer."""
    model = _mlp()
    reference = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=0.05, **options)
    reference_optimizer = optimizer_class(reference.parameters(), lr=0.05, **options)

    mse = torch.nn.functional.mse_loss
    jitted = thunder.jit(whole_step_of(model, optimizer, mse))
    eager = whole_step_of(reference, reference_optimizer, mse)
    for _ in range(steps):
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        torch.testing.assert_close(jitted(x, y), eager(x, y).detach())
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
            assert p.grad is None and q.grad is None
        for p, q in zip(model.parameters(), reference.parameters()):
            state, expected_state = optimizer.state[p], reference_optimizer.state[q]
            assert state.keys() == expected_state.keys()
            for key in state:  # assert_close checks devices and dtypes too
                torch.testing.assert_close(state[key], expected_state[key])
    return jitted, optimizer


@pytest.mark.parametrize("options", [{}, pytest.param({"fused": True}, marks=_FUSED_ON_CPU)], ids=str)
def test_adam_step_count_has_eagers_dtype_under_a_float64_default(options: dict) -> None:
    """torch keeps the step count in its default scalar dtype (float64 under a float64 default), but in
    float32 for the fused kernel."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _, optimizer = _train_like_eager(torch.optim.AdamW, options, steps=2)
    finally:
        torch.set_default_dtype(default)
    step = next(iter(optimizer.state.values()))["step"]
    assert step.dtype == (torch.float32 if options else torch.float64)


def _benchmark_gpt(monkeypatch: pytest.MonkeyPatch) -> tuple[type, dict]:
    """benchmarks/training.py's GPT (its head tied to the embedding) and its tiny shape."""
    spec = importlib.util.spec_from_file_location("_benchmark_training", _BENCHMARKS / "training.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.GPT, dict(module.GPT_SIZES["tiny"])


@pytest.mark.parametrize(
    "fused", [False, pytest.param(True, marks=_FUSED_ON_CPU)], ids=["single-tensor", "fused"]
)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=_NEEDS_CUDA)])
def test_the_benchmark_gpt_whole_step_trains_like_eager(
    device: str, fused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/run.py's thunder-step: zero_grad, the GPT's loss, backward and AdamW (fused on CUDA
    there) in one program; loss, .grad, state and parameters as eager's after each step.

    The key bias (the middle third of c_attn.bias) has a gradient of exactly 0 in exact arithmetic
    (softmax ignores it), ~1e-9 of rounding noise in practice, which Adam divides by its own RMS: its
    update is noise of up to lr in either program, so it is compared within lr per step."""
    gpt, shape = _benchmark_gpt(monkeypatch)
    batch, lr, steps = shape.pop("batch"), 1e-3, 4
    torch.manual_seed(0)
    model = gpt(**shape).to(device)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=fused)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=lr, fused=fused)

    def step_of(net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable:
        def step(idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = net(idx, targets)
            loss.backward()
            optimizer.step()
            return loss

        return step

    jitted, eager = thunder.jit(step_of(model, optimizer)), step_of(reference, reference_optimizer)
    d = shape["d"]
    close = dict(atol=1e-5, rtol=1e-4)
    for _ in range(steps):
        idx = torch.randint(0, shape["vocab"], (batch, shape["seq"]), device=device)
        targets = torch.randint(0, shape["vocab"], (batch, shape["seq"]), device=device)
        torch.testing.assert_close(jitted(idx, targets), eager(idx, targets).detach())
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, **close, msg=name)
            for key, expected in reference_optimizer.state[q].items():  # devices and dtypes too
                torch.testing.assert_close(optimizer.state[p][key], expected, **close, msg=f"{name} {key}")
            if name.endswith("c_attn.bias"):
                torch.testing.assert_close(p[d : 2 * d], q[d : 2 * d], atol=lr * steps, rtol=0)
                p, q = torch.cat((p[:d], p[2 * d :])), torch.cat((q[:d], q[2 * d :]))
            torch.testing.assert_close(p, q, **close, msg=name)
    assert thunder.cache_misses(jitted) == 2  # the first step (no state), the next ones
    step_count = optimizer.state[model.head.weight]["step"]
    assert step_count.device == (model.head.weight.device if fused else torch.device("cpu"))


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.AdamW])
def test_a_learning_rate_scheduler_does_not_recompile(optimizer_class: type) -> None:
    """The learning rate is an input of the program: a scheduler changing it every step reuses the entry."""
    model = _mlp()
    reference = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=0.1)
    reference_optimizer = optimizer_class(reference.parameters(), lr=0.1)
    schedulers = [
        torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.8**epoch)
        for opt in (optimizer, reference_optimizer)
    ]

    jitted = thunder.jit(whole_step_of(model, optimizer))
    eager = whole_step_of(reference, reference_optimizer)
    for _ in range(5):
        x = torch.randn(3, 4)
        torch.testing.assert_close(jitted(x), eager(x))
        for scheduler in schedulers:
            scheduler.step()
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    assert optimizer.param_groups[0]["lr"] < 0.05
    assert thunder.cache_misses(jitted) == (1 if optimizer_class is torch.optim.SGD else 2)


def test_another_hyperparameter_compiles_a_new_entry() -> None:
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    reference = copy.deepcopy(model)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.5)

    total = torch.sum
    jitted = thunder.jit(whole_step_of(model, optimizer, total))
    eager = whole_step_of(reference, reference_optimizer, total)
    for momentum in (0.5, 0.5, 0.9):
        for opt in (optimizer, reference_optimizer):
            opt.param_groups[0]["momentum"] = momentum
        x = torch.randn(3, 4)
        jitted(x)
        eager(x)
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    assert thunder.cache_misses(jitted) == 3  # the first step (no state), the next ones, a new momentum


def test_optimizer_zero_grad_inside_clears_grads_on_every_call() -> None:
    # Optimizer.zero_grad is @torch._disable_dynamo: it ran natively once, while tracing, and later
    # calls accumulated into the .grad the caller had set
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    def step(x: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss

    jitted = thunder.jit(step)
    x = torch.ones(3, 2)
    for _ in range(3):
        model.weight.grad = torch.full((1, 2), 100.0)
        jitted(x)
        torch.testing.assert_close(model.weight.grad, torch.full((1, 2), 3.0))


def _scaled(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    optimizer.grad_scale = torch.tensor(1024.0)  # what GradScaler.step sets around optimizer.step()
    return optimizer


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda params: torch.optim.RMSprop(params, lr=0.1), "RMSprop"),
        (lambda params: torch.optim.AdamW(params, lr=0.1, amsgrad=True), "amsgrad"),
        (lambda params: _scaled(torch.optim.AdamW(params, lr=0.1)), "GradScaler"),
    ],
)
def test_an_unsupported_optimizer_step_inside_is_refused(make: Callable, named: str) -> None:
    model = _mlp()
    optimizer = make(model.parameters())

    def step(x: torch.Tensor) -> torch.Tensor:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        return loss

    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(NotImplementedError, match=named):
        thunder.jit(step)(torch.randn(3, 4))
    for p, q in zip(model.parameters(), before):
        torch.testing.assert_close(p, q)


class _Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = torch.nn.Linear(6, 8), torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(x)))


@pytest.mark.parametrize("reads_logits_after", [False, True])
def test_linear_cross_entropy_before_backward_is_fused_and_logits_stay_readable(
    reads_logits_after: bool,
) -> None:
    """A loss.backward() inside the program differentiates the fused linear + cross entropy, as the
    autograd path does; logits read after the backward (an accuracy) are still computed."""
    torch.manual_seed(0)
    model = _Classifier()
    reference = copy.deepcopy(model)

    def step(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        if reads_logits_after:
            return loss, (logits.argmax(-1) == y).float().mean()
        return (loss,)

    jitted = thunder.jit(lambda x, y: step(model, x, y))
    for call in range(3):
        x, y = torch.randn(7, 6), torch.randint(0, 5, (7,))
        actual, expected = jitted(x, y), step(reference, x, y)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e.detach(), msg=lambda m: f"call {call}: {m}")
        _assert_same_grads(model, reference)
    assert "linear_cross_entropy" in str(thunder.last_traces(jitted)[-1])
