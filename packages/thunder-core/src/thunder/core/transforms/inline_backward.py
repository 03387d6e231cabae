"""``loss.backward()`` inside a traced program: the gradients become operations of the same trace.

A training step written as one function (forward, ``loss.backward()``, then more code) is one
program: when the traced code calls ``backward`` on a tensor, the gradient of that tensor with
respect to each input of the trace that requires grad is recorded right there, with the same gradient
rules the autograd transform uses (``transforms/autograd.py``), and the program goes on. The
gradients are recorded with grad mode off, so a later ``backward`` in the same program does not
differentiate them (as eager's ``create_graph=False``). ``Trace.input_gradients`` keeps, per input, a
``GradState``: the sum of what every ``backward`` gave it, which the epilogue accumulates into the
input's ``.grad`` as eager's ``AccumulateGrad`` does (assigned when ``.grad`` is None, added in place
otherwise), or, once the program read or assigned ``.grad`` (``model.zero_grad()``, gradient
clipping, a hand-written update), the value it ends up with, which the epilogue assigns. Such a program is not differentiated again: it runs
under ``torch.no_grad()`` and its outputs do not require grad.

To differentiate, the program recorded so far is replaced by its differentiable form (symbols
without a gradient rule by their decompositions), exactly what the autograd transform runs forward.
Eager's errors are kept: ``backward`` of a tensor that does not require grad, of a non-scalar without
``gradient``, and a second ``backward`` through the same operations without ``retain_graph=True``.
``create_graph=True`` and ``inputs=`` raise ``NotImplementedError``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from thunder.core import prims
from thunder.core.inplace import current
from thunder.core.proxies import TensorProxy, register_grad_access
from thunder.core.trace import Trace, get_tracectx
from thunder.core.transforms.autograd import _accumulate, _backward_step, _differentiable, _on_gradient_path

__all__ = ["record_backward", "GradState", "read_grad", "write_grad", "ran_backward"]


@dataclass
class GradState:
    """What the program did to an input's ``.grad``, replayed on the tensor by the epilogue."""

    proxy: TensorProxy  # the input
    added: TensorProxy | None = None  # the sum of backward's gradients, added to ``.grad`` as it was
    assigned: bool = False  # ``.grad`` was replaced: by ``value`` (None: set to None)
    value: TensorProxy | None = None
    from_backward: bool = False  # a backward reached the input (it must be a leaf)

    def final_value(self) -> TensorProxy | None:
        """The proxy holding the assigned ``.grad`` now (an in-place update after the assignment included)."""
        return None if self.value is None else current(self.value)


_SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


def record_backward(
    loss: TensorProxy,
    gradient: TensorProxy | float | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """``loss.backward(...)`` while tracing: records the gradients of the trace's inputs that require grad."""
    trace = get_tracectx()
    assert trace is not None and trace.at_top_level, "backward is recorded into the program being traced"
    if create_graph:
        raise NotImplementedError(
            "loss.backward(create_graph=True) inside thunder.jit is not supported: the gradients it records "
            "are not differentiable again"
        )
    if inputs is not None:
        raise NotImplementedError("loss.backward(inputs=...) inside thunder.jit is not supported")
    if not loss.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None and loss.numel() != 1:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    needs_grad = {p.name for p in trace.args if isinstance(p, TensorProxy) and p.requires_grad}
    _rewrite_for_backward(trace)
    program = _differentiable(trace.bound_symbols, needs_grad)
    trace.bound_symbols[:] = program  # in place: the trace records into this very list
    trace.backward_boundaries.append(frozenset(p.name for b in program for p in b.proxy_outputs()))
    with torch.no_grad():  # gradients are constants for a later backward, as without create_graph
        cotangents: dict[str, Any] = {}
        _accumulate(cotangents, loss, _seed(loss, gradient))
        for bound_symbol in reversed(program):
            if _reaches(bound_symbol, cotangents, needs_grad):
                if id(bound_symbol) in trace.backward_freed:
                    raise RuntimeError(_SECOND_BACKWARD)
                if not retain_graph:
                    trace.backward_freed.add(id(bound_symbol))
            _backward_step(bound_symbol, cotangents, needs_grad)
        for proxy in trace.args:
            if not isinstance(proxy, TensorProxy):
                continue
            grad = cotangents.get(proxy.name)
            if grad is not None:
                _add_input_gradient(trace, proxy, grad)


def _rewrite_for_backward(trace: Trace) -> None:
    """The rewrites the autograd path makes before it differentiates, on the program recorded so
    far: constant causal masks become flash attention's ``is_causal`` (whose backward needs no
    mask), Hugging Face's RMS norms become one symbol (whose backward is one kernel), and a linear +
    cross entropy becomes the fused loss computing its gradients in chunks (the logits' gradient is
    never a whole float32 tensor: 3.3 GiB for GPT-2 at 16 x 1024)."""
    from thunder.core.transforms.causal_attention import use_causal_attention
    from thunder.core.transforms.fuse_linear_cross_entropy import fuse_linear_cross_entropy
    from thunder.core.transforms.rms_norms import rms_norms_as_symbols

    rewrites = (
        use_causal_attention,
        rms_norms_as_symbols,
        functools.partial(fuse_linear_cross_entropy, keep_logits=True),
    )
    for rewrite in rewrites:
        rewritten = rewrite(trace)
        if rewritten is not trace:
            trace.bound_symbols[:] = rewritten.bound_symbols  # in place: the trace records into this list
            trace.names |= rewritten.names
            trace._name_counter = max(trace._name_counter, rewritten._name_counter)


def ran_backward(trace: Trace) -> bool:
    """Whether the traced program called backward itself: it is then not differentiated again."""
    return any(state.from_backward for state in trace.input_gradients.values())


def _seed(loss: TensorProxy, gradient: TensorProxy | float | None) -> TensorProxy:
    """The gradient of ``loss`` itself: ones for a scalar, else the ``gradient`` given."""
    if isinstance(gradient, TensorProxy):
        if gradient.shape != loss.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[0] has a shape of {tuple(gradient.shape)} and output[0] has "
                f"a shape of {tuple(loss.shape)}."
            )
        return prims.convert_element_type(gradient, loss.dtype) if gradient.dtype != loss.dtype else gradient
    value = 1.0 if gradient is None else float(gradient)
    return prims.full(tuple(loss.shape), value, device=loss.device, dtype=loss.dtype)


def _reaches(bound_symbol: Any, cotangents: dict[str, Any], needs_grad: set[str]) -> bool:
    """Whether this backward differentiates ``bound_symbol`` (a gradient arrives at one of its outputs)."""
    if not _on_gradient_path(bound_symbol, needs_grad):
        return False
    return any(cotangents.get(p.name) is not None for p in bound_symbol.proxy_outputs())


def _add_input_gradient(trace: Trace, proxy: TensorProxy, grad: TensorProxy) -> None:
    state = trace.input_gradients.setdefault(proxy.name, GradState(proxy))
    state.from_backward = True
    if state.assigned:  # backward after ``p.grad = ...``: added to what was assigned
        state.value = grad if state.value is None else prims.add(state.final_value(), grad)
    else:
        state.added = grad if state.added is None else prims.add(state.added, grad)


def read_grad(proxy: TensorProxy) -> TensorProxy | None:
    """``proxy.grad`` while tracing: the input's ``.grad`` as the program has left it so far.

    The ``.grad`` the tensor had when the call began is an input the prologue fetches (or checks is
    None), through ``Trace.grad_fetcher`` (set by the frontend). Once read after a backward, the sum
    is a value of its own that the epilogue assigns, so that in-place updates of it (gradient
    clipping) are what ``.grad`` ends up holding."""
    trace = _tracing_trace()
    state = trace.input_gradients.get(proxy.name)
    if state is not None and state.assigned:
        return state.final_value()
    if trace.grad_fetcher is None:
        raise NotImplementedError("thunder does not support reading the tensor attribute 'grad' here")
    before = trace.grad_fetcher(proxy)
    if state is None or state.added is None:
        return before
    with torch.no_grad():
        total = state.added if before is None else prims.add(before, state.added)
    state.assigned, state.value, state.added = True, total, None
    return total


def write_grad(proxy: TensorProxy, value: Any) -> None:
    """``proxy.grad = value`` while tracing, with eager's checks of the value."""
    trace = _tracing_trace()
    if trace.grad_fetcher is None or proxy.name not in {p.name for p in trace.args}:
        raise NotImplementedError(
            "thunder supports assigning .grad only on the program's inputs (parameters, arguments)"
        )
    if value is not None:
        if not isinstance(value, TensorProxy):
            raise TypeError(
                f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
            )
        if value.dtype != proxy.dtype:
            raise RuntimeError("assigned grad has data of a different type")
        if value.device != proxy.device:
            raise RuntimeError("assigned grad has data located on a different device")
        if value.shape != proxy.shape:
            raise RuntimeError("assigned grad has data of a different size")
    state = trace.input_gradients.setdefault(proxy.name, GradState(proxy))
    state.assigned, state.value, state.added = True, value, None


def _tracing_trace() -> Trace:
    trace = get_tracectx()
    if trace is None:
        raise RuntimeError("a proxy's .grad exists only while a program is traced")
    return trace


register_grad_access(read_grad, write_grad)
