"""Tensor inputs that share memory, against eager PyTorch.

A trace treats each tensor input as memory of its own, so a write through one input is not seen
through another over the same memory. The prologue's ``CHECK_WRITES_APART``
(core/prologue_write_overlaps.py) refuses a call where an input the program writes in place overlaps
another tensor input, with ``InputsShareMemoryError`` naming both; inputs that only share storage
without overlapping (views of one flat buffer), or that overlap but are only read, run and match eager.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch

import thunder
from thunder.core.prologue_write_overlaps import InputsShareMemoryError, WriteOverlaps, memory_overlaps
from thunder.executors.nvfuser.executor import NvFuserExecutor


class AnyDeviceNvFuser(NvFuserExecutor):
    """nvFuser's claims without its CUDA-only check (regions fall back to torch on the CPU): the copy
    of ``a`` is then placed by the fusion rules, which made the shared-memory answer wrong."""

    def can_fuse(self, bound_symbol: object) -> bool:
        return self.fuses_on_any_device(bound_symbol)  # type: ignore[arg-type]

    def is_available(self) -> tuple[bool, str]:
        return True, ""


EXECUTORS = {"torch": ["torch"], "fusion": [AnyDeviceNvFuser("nvfuser_on_cpu"), "torch"]}


def write_a_read_b(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(1)
    return b * 2


def _jit(fn: Callable, executors: str) -> Callable:
    return thunder.jit(fn, executors=EXECUTORS[executors])


@pytest.mark.filterwarnings("ignore::thunder.core.fusion_fallback.ExecutorFallbackWarning")
@pytest.mark.parametrize("executors", sorted(EXECUTORS))
@pytest.mark.parametrize(
    "make_inputs",
    [lambda B: (B, B.t()), lambda B: (B, B[1:]), lambda B: (B[1:], B), lambda B: (B, B.detach())],
    ids=["transpose", "slice", "base-of-a-slice", "detach"],
)
def test_a_written_input_overlapping_another_is_refused_after_a_cached_call(
    executors: str, make_inputs: Callable
) -> None:
    jitted = _jit(write_a_read_b, executors)
    for _ in range(2):  # cached first with inputs of their own: the entry must not take the next call
        x, y = torch.randn(4, 4), torch.randn(4, 4)
        x_eager, y_eager = x.clone(), y.clone()
        torch.testing.assert_close(jitted(x, y), write_a_read_b(x_eager, y_eager))
        torch.testing.assert_close(x, x_eager)
    B = torch.randn(4, 4)
    a, b = make_inputs(B)
    before = B.clone()
    with pytest.raises(
        InputsShareMemoryError, match=r"a, which the program writes in place, shares memory with b"
    ):
        jitted(a, b)
    torch.testing.assert_close(B, before)  # refused before anything ran
    with pytest.raises(InputsShareMemoryError):  # and again: the refused entry was not kept
        jitted(a, b)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    x_eager, y_eager = x.clone(), y.clone()
    torch.testing.assert_close(jitted(x, y), write_a_read_b(x_eager, y_eager))


@pytest.mark.filterwarnings("ignore::thunder.core.fusion_fallback.ExecutorFallbackWarning")
@pytest.mark.parametrize("executors", sorted(EXECUTORS))
@pytest.mark.parametrize(
    "make_inputs",
    [lambda B: (B[0], B[1]), lambda B: (B[:, 0], B[:, 1]), lambda B: (B.view(-1)[:8], B.view(-1)[8:])],
    ids=["rows", "interleaved-columns", "halves"],
)
def test_views_of_one_base_that_do_not_overlap_run_as_eager(executors: str, make_inputs: Callable) -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.mul_(2)
        b.sub_(a)
        return a + b

    jitted = _jit(f, executors)
    for _ in range(3):
        B = torch.randn(4, 4)
        B_eager = B.clone()
        torch.testing.assert_close(jitted(*make_inputs(B)), f(*make_inputs(B_eager)))
        torch.testing.assert_close(B, B_eager)
    assert thunder.cache_misses(jitted) == 1


def test_the_error_is_thunders_public_one() -> None:
    assert thunder.InputsShareMemoryError is InputsShareMemoryError
    assert issubclass(InputsShareMemoryError, NotImplementedError)


def test_overlapping_inputs_only_read_run_without_a_check() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b + b.sum()

    jitted = thunder.jit(f)
    B = torch.randn(4, 4)
    for a, b in ((B, B.t()), (B, B.t().contiguous()), (B.t(), B)):
        torch.testing.assert_close(jitted(a, b), f(a, b))
    assert "_write_overlaps.check(" not in str(thunder.last_prologue_traces(jitted)[-1])


def test_the_same_tensor_twice_is_one_input_and_writes_through_both_names() -> None:
    jitted = thunder.jit(write_a_read_b)
    B, B_eager = torch.randn(4, 4), None
    B_eager = B.clone()
    torch.testing.assert_close(jitted(B, B), write_a_read_b(B_eager, B_eager))
    torch.testing.assert_close(B, B_eager)


def test_a_module_buffer_written_in_place_overlapping_an_argument_is_refused_by_name() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x.sum(0))
            return x * 2

    module = Counter()
    jitted = thunder.jit(module)
    torch.testing.assert_close(jitted(torch.ones(3, 4)), torch.ones(3, 4) * 2)
    torch.testing.assert_close(module.total, torch.full((4,), 3.0))
    with pytest.raises(
        InputsShareMemoryError, match=r"total.*shares memory with x|x.*shares memory with .*total"
    ):
        jitted(module.total.view(1, 4).expand(3, 4))


@pytest.mark.parametrize("optimizer_class", [torch.optim.AdamW, torch.optim.SGD])
def test_a_whole_training_step_over_parameters_in_one_flat_buffer(optimizer_class: type) -> None:
    """Parameters as views of one flat buffer (as FSDP's flat parameters): all written, none overlapping,
    so the step runs and matches eager's, step for step."""
    torch.manual_seed(0)

    def flattened(model: torch.nn.Module) -> torch.Tensor:
        params = list(model.parameters())
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        offset = 0
        for p in params:
            p.data = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        return flat

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)
    flat = flattened(model)
    options = {"lr": 0.05, "momentum": 0.9} if optimizer_class is torch.optim.SGD else {"lr": 0.05}
    optimizer = optimizer_class(model.parameters(), **options)
    reference_optimizer = optimizer_class(reference.parameters(), **options)

    def step_of(net: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable:
        def step(x: torch.Tensor) -> torch.Tensor:
            loss = net(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        return step

    jitted, eager = thunder.jit(step_of(model, optimizer)), step_of(reference, reference_optimizer)
    for _ in range(4):
        x = torch.randn(3, 4)
        torch.testing.assert_close(jitted(x), eager(x).detach())
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, q)
    assert all(
        p.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr() for p in model.parameters()
    )
    assert "_write_overlaps.check(" in str(thunder.last_prologue_traces(jitted)[-1])


def test_memory_overlaps_compares_elements_of_interleaved_views() -> None:
    B = torch.randn(6, 6)
    assert not memory_overlaps(B[:, 0], B[:, 1])
    assert not memory_overlaps(B[::2], B[1::2])
    assert memory_overlaps(B[:, 0], B[0])
    assert memory_overlaps(B.t(), B[2:3, 2:3])
    assert memory_overlaps(B.view(-1)[3:9], B[1])
    assert not memory_overlaps(B[0], B[1])
    assert not memory_overlaps(B[0], torch.empty(0))
    assert not memory_overlaps(B, torch.randn(6, 6))


def test_the_check_sees_a_tensor_moved_into_a_written_ones_memory_between_calls() -> None:
    """A tensor that is the same object as on the last call but was moved (``.data =``, ``set_``), or a
    new object, is looked at again: a check that remembered the last call's storages by the tensors'
    identity would miss it."""
    checks = WriteOverlaps(written=(0,), count=3)
    w, r, s = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4)
    assert checks.check(w, r, s) and checks.check(w, r, s)
    r.data = w.data.t()  # the same object, now over w's memory
    assert checks.overlap((w, r, s)) == (0, 1)
    r = torch.randn(4, 4)
    assert checks.check(w, r, s)
    s.set_(w.untyped_storage(), 4, (4,), (1,))  # the same object, now w's second row
    assert checks.overlap((w, r, s)) == (0, 2)
    s = torch.randn(4)
    assert checks.check(w, r, s)
    assert checks.overlap((w, r, w[1])) == (0, 2)  # a new object over w's memory
    shared = torch.randn(8)
    assert checks.check(w, shared[:4], shared[4:])  # inputs that are only read may share memory
    assert checks.check(w, shared[:4], shared[4:])
    assert checks.check(w[:3], w[2:], s) is False  # an input read over the written one's memory
    assert checks.check(w[:2], w[2:], s)  # over its storage, not its memory
    assert checks.check(w[:, :2], torch.randn(2, 4), w[:, 1]) is False
    assert checks.check(w[:, :2], torch.randn(2, 4), w[:, 2])
