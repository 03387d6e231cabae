"""The fused linear + cross entropy (transforms/fuse_linear_cross_entropy.py) against eager.

A head ``Linear`` followed by ``F.cross_entropy`` (after an optional flatten and ``.float()``) is
rewritten to one symbol that computes the loss, and the gradients of the input, weight and bias,
a block of rows at a time. Eager PyTorch is the oracle for the loss and every gradient; the
chains that must not be rewritten still match eager and keep their logits. ``CHUNK_BYTES`` is made
small so that the blocks, a ragged last one included, are exercised.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.executors import linear_cross_entropy as kernels

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FUSED_NAMES = ("linear_cross_entropy_with_grads", "linear_cross_entropy_loss")
ROWS, FEATURES, CLASSES = 2 * 7, 16, 37  # two sequences of 7 tokens


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 3 rows: 14 rows make 5 blocks, the last one of 2."""
    monkeypatch.setattr(kernels, "CHUNK_BYTES", 3 * 4 * CLASSES)


class Head(torch.nn.Module):
    def __init__(
        self, *, bias: bool = False, upcast: bool = True, flatten: bool = True, **loss_options: object
    ):
        super().__init__()
        self.head = torch.nn.Linear(FEATURES, CLASSES, bias=bias)
        self.upcast, self.flatten, self.loss_options = upcast, flatten, loss_options

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.head(x)
        if self.flatten:
            logits, targets = logits.flatten(0, 1), targets.flatten()
        if self.upcast:
            logits = logits.float()
        return F.cross_entropy(logits, targets, **self.loss_options)


def _inputs(
    dtype: torch.dtype, flatten: bool, *, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, ROWS // 2, FEATURES, generator=generator).to(dtype)
    targets = torch.randint(0, CLASSES, (2, ROWS // 2), generator=generator)
    targets[0, 1] = targets[1, 3] = ignore_index
    if not flatten:
        x, targets = x.flatten(0, 1), targets.flatten()
    return x.requires_grad_(), targets


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, msg: str = "") -> None:
    """float32: up to summation order. bfloat16: two roundings relative to the tensor's largest
    element, since eager and the fused kernels round at different steps (eager rounds log_softmax
    and its gradient to bf16, the blocks' weight-gradient products are rounded before their sum)."""
    if dtype == torch.float32:
        torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5, msg=msg or None)
    else:
        atol = 2 * 2**-8 * expected.abs().max().item()
        torch.testing.assert_close(actual, expected, atol=atol, rtol=2e-2, msg=msg or None)


def _fused(jitted: object) -> bool:
    traces = [*thunder.last_traces(jitted), *thunder.last_backward_traces(jitted)]
    return any(name in str(trace) for trace in traces for name in FUSED_NAMES)


def _compare(model: torch.nn.Module, x: torch.Tensor, targets: torch.Tensor, dtype: torch.dtype) -> object:
    """Loss and gradients of the jitted model against eager's; returns the jitted model."""
    model = model.to(dtype)
    reference = copy.deepcopy(model)
    x_reference = x.detach().clone().requires_grad_(x.requires_grad)
    jitted = thunder.jit(model)
    loss = jitted(x, targets)
    expected = reference(x_reference, targets)
    assert loss.dtype == expected.dtype
    _assert_close(loss, expected, dtype)
    if loss.requires_grad:
        loss.backward()
        expected.backward()
        if x.requires_grad:
            _assert_close(x.grad, x_reference.grad, dtype)
        for (name, parameter), expected_parameter in zip(model.named_parameters(), reference.parameters()):
            if parameter.requires_grad:
                _assert_close(parameter.grad, expected_parameter.grad, dtype, name)
    return jitted


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("upcast", [True, False])
@pytest.mark.parametrize("flatten", [True, False])
def test_matches_eager(dtype: torch.dtype, reduction: str, upcast: bool, flatten: bool) -> None:
    x, targets = _inputs(dtype, flatten)
    jitted = _compare(Head(upcast=upcast, flatten=flatten, reduction=reduction), x, targets, dtype)
    assert "linear_cross_entropy_with_grads" in str(thunder.last_traces(jitted)[-1])
    # the logits are neither saved for the backward nor made in it
    backward = str(thunder.last_backward_traces(jitted)[-1])
    assert f"{CLASSES}]" not in backward.split("def backward")[1].split("\n")[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bias_and_ignore_index(dtype: torch.dtype) -> None:
    x, targets = _inputs(dtype, True, ignore_index=3)
    jitted = _compare(Head(bias=True, ignore_index=3), x, targets, dtype)
    assert _fused(jitted)


class ToAndView(Head):
    """The other spellings: ``.to(torch.float32)`` before a ``view``."""

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.head(x).to(torch.float32).view(-1, CLASSES)
        return F.cross_entropy(logits, targets.view(-1), **self.loss_options)


def test_to_and_view() -> None:
    x, targets = _inputs(torch.bfloat16, True, ignore_index=5)
    jitted = _compare(ToAndView(bias=True, ignore_index=5), x, targets, torch.bfloat16)
    assert _fused(jitted)


def test_scaled_loss_gradient() -> None:
    """The backward scales the forward's gradients by the loss's incoming gradient."""

    def scaled(model: torch.nn.Module, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return model(x, targets) * 0.3

    model = Head(bias=True)
    reference = copy.deepcopy(model)
    x, targets = _inputs(torch.float32, True)
    x_reference = x.detach().clone().requires_grad_()
    jitted = thunder.jit(scaled)
    jitted(model, x, targets).backward()
    scaled(reference, x_reference, targets).backward()
    assert _fused(jitted)
    torch.testing.assert_close(x.grad, x_reference.grad)
    for parameter, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(parameter.grad, expected.grad)


def test_frozen_weight_and_input_without_grad() -> None:
    """Only the gradients autograd asks for are computed."""
    model = Head()
    model.head.weight.requires_grad_(False)
    x, targets = _inputs(torch.float32, True)
    jitted = _compare(model, x, targets, torch.float32)
    assert "(True, False, False)" in str(thunder.last_traces(jitted)[-1])
    model = Head()
    x = x.detach()
    jitted = _compare(model, x, targets, torch.float32)
    assert "(False, True, False)" in str(thunder.last_traces(jitted)[-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_no_grad(dtype: torch.dtype) -> None:
    x, targets = _inputs(dtype, True)
    model = Head().to(dtype)
    jitted = thunder.jit(model)
    with torch.no_grad():
        loss = jitted(x, targets)
        expected = model(x, targets)
    _assert_close(loss, expected, dtype)
    final = str(thunder.last_traces(jitted)[-1])
    assert "linear_cross_entropy_loss(" in final and "linear_cross_entropy_with_grads" not in final


def test_all_rows_ignored() -> None:
    x, targets = _inputs(torch.float32, True)
    targets = torch.full_like(targets, -100)
    model = Head()
    loss = thunder.jit(model)(x, targets)
    expected = copy.deepcopy(model)(x, targets)
    torch.testing.assert_close(loss, expected, equal_nan=True)


class ReturnsLogits(Head):
    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(x)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()), logits


class LogitsUsedTwice(Head):
    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.head(x).flatten(0, 1)
        return F.cross_entropy(logits.float(), targets.flatten()) + logits.square().mean()


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(Head(label_smoothing=0.1), id="label_smoothing"),
        pytest.param(Head(reduction="none"), id="reduction_none"),
        pytest.param(Head(weight=torch.rand(CLASSES)), id="class_weights"),
        pytest.param(LogitsUsedTwice(), id="logits_used_twice"),
    ],
)
def test_not_rewritten(model: torch.nn.Module) -> None:
    x, targets = _inputs(torch.float32, True)

    def loss(x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return model(x, targets).sum()

    reference = copy.deepcopy(model)
    x_reference = x.detach().clone().requires_grad_()
    jitted = thunder.jit(loss)
    jitted(x, targets).backward()
    reference(x_reference, targets).sum().backward()
    assert not _fused(jitted)
    torch.testing.assert_close(x.grad, x_reference.grad)
    torch.testing.assert_close(model.head.weight.grad, reference.head.weight.grad)


def test_returned_logits_not_rewritten() -> None:
    model = ReturnsLogits()
    x, targets = _inputs(torch.float32, True)
    jitted = thunder.jit(model)
    loss, logits = jitted(x, targets)
    expected_loss, expected_logits = model(x, targets)
    assert not _fused(jitted)
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(logits, expected_logits)


def test_rewrite_prints_in_the_trace() -> None:
    x, targets = _inputs(torch.float32, True)
    jitted = thunder.jit(Head())
    jitted(x, targets)
    traces = thunder.last_traces(jitted)
    fused = next(t for t in traces if t.header.startswith("Fused linear + cross entropy"))
    code = [
        line for line in str(fused).splitlines() if not line.lstrip().startswith("#")
    ]  # subsymbols are comments
    assert any("ltorch.linear_cross_entropy_with_grads(" in line for line in code)
    assert not any("ltorch.linear(" in line or "ltorch.cross_entropy(" in line for line in code)
    assert "fuse linear cross entropy" in thunder.compile_stats(jitted).last_stage_seconds


def _benchmark_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("workload", ["gpt", "llama"])
def test_benchmark_models(workload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny GPT (head tied to the embedding) and Llama of benchmarks/ are rewritten and train as eager."""
    monkeypatch.setattr(kernels, "CHUNK_BYTES", 50 * 4 * 512)  # 50 rows a block of the vocabulary of 512
    if workload == "gpt":
        module = _benchmark_module("training", monkeypatch)
        config = dict(module.GPT_SIZES["tiny"])
        model_class = module.GPT
    else:
        module = _benchmark_module("llama", monkeypatch)
        config = dict(module.LLAMA_SIZES["tiny"])
        model_class = module.Llama
    batch = config.pop("batch")
    torch.manual_seed(0)
    model = model_class(**config)
    reference = copy.deepcopy(model)
    idx = torch.randint(0, config["vocab"], (batch, config["seq"]))
    targets = torch.randint(0, config["vocab"], (batch, config["seq"]))
    jitted = thunder.jit(model)
    loss = jitted(idx, targets)
    expected = reference(idx, targets)
    assert "linear_cross_entropy_with_grads" in str(thunder.last_traces(jitted)[-1])
    torch.testing.assert_close(loss, expected)
    loss.backward()
    expected.backward()
    for (name, parameter), expected_parameter in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(parameter.grad, expected_parameter.grad, atol=1e-5, rtol=1e-4, msg=name)
