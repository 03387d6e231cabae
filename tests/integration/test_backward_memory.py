"""The backward frees each saved tensor at its last use, not when it returns.

The forward's intermediates reach the backward in a list that the backward empties, so the
``del`` statements of the backward trace drop the last references (autograd_function.py). Inputs
and outputs saved for the backward still go through ``save_for_backward``: in-place changes to them
before the backward raise, as in eager mode.
"""

from __future__ import annotations

import sys
import weakref

import pytest
import torch

import thunder


def _chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = torch.tanh(x @ x.T) * x.sin()
    return x.sum()


def test_saved_intermediates_are_freed_before_the_backward_returns():
    jitted = thunder.jit(_chain)
    x = torch.randn(32, 32, requires_grad=True)
    out = jitted(x)
    intermediates = [t for t in out.grad_fn.untracked if isinstance(t, torch.Tensor)]
    assert len(intermediates) >= 4  # the chain saves what each tanh and sin gave
    refs = [weakref.ref(t) for t in intermediates]
    del intermediates
    alive_when_returning: list[int] = []

    def probe(frame, event, arg):  # noqa: ANN001, ANN202 -- sys.setprofile's signature
        if (
            event == "return"
            and frame.f_code.co_name == "backward"
            and frame.f_code.co_filename.startswith("thunder.")
        ):
            alive_when_returning.append(sum(ref() is not None for ref in refs))

    sys.setprofile(probe)
    try:
        out.backward()
    finally:
        sys.setprofile(None)
    assert alive_when_returning == [0]
    expected_x = x.detach().clone().requires_grad_(True)
    _chain(expected_x).backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


def test_retain_graph_keeps_what_a_second_backward_needs():
    jitted = thunder.jit(_chain)
    x = torch.randn(16, 16, requires_grad=True)
    out = jitted(x)
    out.backward(retain_graph=True)
    first = x.grad.clone()
    out.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()


def test_an_input_changed_in_place_before_the_backward_raises_as_in_eager():
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sin().sum()  # sin's gradient reads its input

    for run in (fn, thunder.jit(fn)):
        x = torch.randn(8, requires_grad=True) * 1  # not a leaf: it may be changed in place
        total = run(x)
        with torch.no_grad():
            x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            total.backward()


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA: peak memory is measured by the CUDA allocator"
)
def test_backward_peak_memory_is_no_higher_than_eager():
    torch.manual_seed(0)
    layers = torch.nn.Sequential(
        *(torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU()) for _ in range(8))
    ).cuda()
    x = torch.randn(4096, 1024, device="cuda")
    peaks = {}
    for name, run in (("eager", layers), ("thunder", thunder.jit(layers))):
        for _ in range(2):  # the second call is measured: no compile
            layers.zero_grad(set_to_none=True)
            loss = run(x).square().mean()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            loss.backward()
            torch.cuda.synchronize()
            peaks[name] = torch.cuda.max_memory_allocated() - before
            del loss
    print(
        f"backward peak above its start: eager {peaks['eager'] / 2**20:.1f} MiB, thunder {peaks['thunder'] / 2**20:.1f} MiB"
    )
    assert peaks["thunder"] <= peaks["eager"] * 1.05


def test_recomputed_forward_ops_sit_just_before_their_first_use():
    jitted = thunder.jit(_chain)
    x = torch.randn(16, 16, requires_grad=True)
    jitted(x).backward()
    forward = thunder.last_traces(jitted)[1]
    backward = thunder.last_backward_traces(jitted)[0]
    assert "recomputes" in backward.header and not backward.header.endswith("recomputes 0 forward ops")
    made_in_forward = {p.name for b in forward.bound_symbols for p in b.proxy_outputs()}
    symbols = backward.bound_symbols
    recomputed = [any(p.name in made_in_forward for p in b.proxy_outputs()) for b in symbols]
    assert sum(recomputed) >= 4
    for index, bound_symbol in enumerate(symbols):
        if not recomputed[index]:
            continue
        names = {p.name for p in bound_symbol.proxy_outputs()}
        first_use = next(
            j for j in range(index + 1, len(symbols)) if names & {p.name for p in symbols[j].proxy_args()}
        )
        # only other recomputations (for the same consumer) stand between an op and its first use
        assert all(recomputed[j] for j in range(index + 1, first_use)), str(backward)
