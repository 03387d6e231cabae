"""``optimizer.step()`` inside a traced program: the update as trace operations (issue 24 point 1).

Interpreting torch.optim's own ``step`` does not work: it looks its state up by parameter
(``self.state[p]``) and would get the parameters' proxies as keys. The frontend calls this module
instead for ``SGD``, ``Adam`` and ``AdamW`` without hooks or a closure: the update is written here with
the same tensor operations as torch.optim's single-tensor path, on proxies, so it is part of the
program (executors fuse and place it like the rest of the step).

- Each parameter is fetched as ``optimizer.param_groups[i]['params'][j]`` (the same proxy as the
  module's parameter, with an alias check) and its gradient is what ``p.grad`` is in the program at
  this point (``inline_backward.read_grad``: the ``.grad`` the call found, plus an in-program backward).
- The learning rate is an input of the program (a number the prologue fetches and checks by type), so
  a scheduler changing it every step does not recompile (with ``fused=True`` Adam's update reads it
  as a tensor made once per group on the parameters' device, so that fusion executors, which take
  no number inputs, fuse the whole update); the other hyperparameters the update reads
  are checked by the prologue: a new value compiles a new entry.
- The state tensors (``optimizer.state[p]['exp_avg']``, ...) are inputs updated in place, as
  parameters are; on the first step, when the state is empty (checked by the prologue), the state is
  created in the program and the epilogue stores it into ``optimizer.state[p]``.
- Adam's bias corrections are computed from the ``step`` tensor in float64, which matches the Python
  floats eager computes them in (eager reads ``step`` with ``.item()``, which a trace cannot).
- ``foreach`` and ``fused`` choose among torch's kernels for the same update; the program records the
  single-tensor operations for each, and thunder's executors fuse them instead of torch's multi-tensor
  or fused kernels (results equal eager's within rounding: torch's fused kernel rounds once per
  element, the recorded operations once per operation an executor does not fuse). The state is
  created where eager creates it: Adam's ``step`` on the parameter's device in float32 when fused,
  else on the CPU in torch's default scalar dtype (float64 under a float64 default dtype).

Anything else (another optimizer class, hooks, a closure, ``amsgrad``, ``capturable``,
``differentiable``, complex parameters, a ``GradScaler``'s scale) raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.optim.optimizer as _optimizer_module

import thunder.torch as ltorch
from thunder.core.inplace import current
from thunder.core.proxies import TensorProxy
from thunder.core.sources import AttributeSource, ItemSource, KeysSource, LengthSource, Source, TypeSource
from thunder.core.trace import get_tracectx
from thunder.core.transforms.inline_backward import read_grad

__all__ = ["is_optimizer_step", "optimizer_step", "is_optimizer_zero_grad", "optimizer_zero_grad"]

_SUPPORTED = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
_WAY_OUT = (
    "call optimizer.step() after the jitted function, or compile the whole step with "
    "torch.compile(step, backend=thunder.dynamo.ThunderCompiler())"
)


def is_optimizer_step(fn: Any) -> bool:
    """``optimizer.step`` of a torch.optim optimizer, bound or as the function a method call loads."""
    if isinstance(getattr(fn, "__self__", None), torch.optim.Optimizer):
        fn = fn.__func__
    if getattr(fn, "_wrapped_by_lr_sched", False):  # an LR scheduler's wrapper, interpreted: it calls step
        return False
    module = getattr(fn, "__module__", None)
    return (
        getattr(fn, "__name__", None) == "step"
        and isinstance(module, str)
        and module.startswith("torch.optim")
    )


_ZERO_GRAD = torch.optim.Optimizer.zero_grad
_ZERO_GRADS = {
    _ZERO_GRAD,
    getattr(_ZERO_GRAD, "__wrapped__", _ZERO_GRAD),
}  # with and without @_disable_dynamo


def is_optimizer_zero_grad(fn: Any) -> bool:
    """torch.optim's ``Optimizer.zero_grad``, bound or as the function a method call loads."""
    if isinstance(getattr(fn, "__self__", None), torch.optim.Optimizer):
        fn = fn.__func__
    return fn in _ZERO_GRADS


def optimizer_zero_grad(hooks: Any, optimizer: Any, set_to_none: bool = True) -> None:
    """``optimizer.zero_grad()`` while tracing: each parameter's ``.grad`` set to None, or zeroed in place.

    Interpreted, it would load each param group through the prologue's guards, every value checked
    (a scheduler's new ``lr`` recompiled every step), and run ``record_function``, whose lazy globals
    are side effects of their own."""
    source = hooks.source_of(optimizer)
    if source is None:
        raise NotImplementedError(
            f"optimizer.zero_grad() inside thunder.jit on an optimizer made inside the call; {_WAY_OUT}"
        )
    step = _Step(hooks, optimizer, source)
    groups = AttributeSource(source, "param_groups")
    step.guard(len(optimizer.param_groups), LengthSource(groups))
    for index, group in enumerate(optimizer.param_groups):
        params_source = ItemSource(ItemSource(groups, index), "params")
        step.guard(len(group["params"]), LengthSource(params_source))
        for position, param in enumerate(group["params"]):
            proxy = step.tensor(param, ItemSource(params_source, position), f"param{index}_{position}")
            if set_to_none:
                proxy.grad = None
            else:
                grad = proxy.grad
                if grad is not None:
                    grad.zero_()


class _Step:
    """One ``optimizer.step()`` being traced: what it reads is fetched and checked through ``hooks``."""

    def __init__(self, hooks: Any, optimizer: torch.optim.Optimizer, source: Source):
        self.hooks, self.optimizer, self.source = hooks, optimizer, source
        self.params: dict[str, torch.nn.Parameter] = {}  # proxy name -> the parameter (the state's key)

    def guard(self, value: Any, source: Source) -> Any:
        self.hooks.builder.add_value_guard(value, source)
        return value

    def tensor(self, tensor: torch.Tensor, source: Source, name: str) -> TensorProxy:
        return self.hooks._tensor(tensor, source, name)


def optimizer_step(hooks: Any, optimizer: Any, closure: Any = None) -> None:
    """Record ``optimizer.step()`` into the program being traced."""
    kind = type(optimizer)
    refused = _refusal(optimizer, closure)
    if refused is not None:
        raise NotImplementedError(
            f"optimizer.step() inside thunder.jit: {refused} is not supported yet; {_WAY_OUT}"
        )
    source = hooks.source_of(optimizer)
    if source is None:
        raise NotImplementedError(
            f"optimizer.step() inside thunder.jit on an optimizer made inside the call; {_WAY_OUT}"
        )
    step = _Step(hooks, optimizer, source)
    step.guard(kind, TypeSource(source))
    step.guard((), KeysSource(AttributeSource(source, "_optimizer_step_pre_hooks")))
    step.guard((), KeysSource(AttributeSource(source, "_optimizer_step_post_hooks")))
    groups = AttributeSource(source, "param_groups")
    step.guard(len(optimizer.param_groups), LengthSource(groups))
    update = _sgd if kind is torch.optim.SGD else _adam
    with torch.no_grad():
        for index, group in enumerate(optimizer.param_groups):
            group_source = ItemSource(groups, index)
            params_source = ItemSource(group_source, "params")
            step.guard(len(group["params"]), LengthSource(params_source))
            hyper = _Hyperparameters(step, group, group_source)
            for position, param in enumerate(group["params"]):
                proxy = step.tensor(param, ItemSource(params_source, position), f"param{index}_{position}")
                step.params[proxy.name] = param
                grad = read_grad(proxy)
                if grad is None:
                    continue
                trace = get_tracectx()
                assert trace is not None  # optimizer.step() is recorded into the program being traced
                first = len(trace.bound_symbols)
                update(step, hyper, proxy, grad, ItemSource(AttributeSource(source, "state"), param))
                # the update may run as soon as its gradient exists (transforms/early_updates.py)
                trace.early_outputs.update(
                    p.name for b in trace.bound_symbols[first:] for p in b.proxy_outputs()
                )


def _refusal(optimizer: Any, closure: Any) -> str | None:
    kind = type(optimizer)
    if kind not in _SUPPORTED:
        return f"{kind.__qualname__} (SGD, Adam and AdamW are)"
    if closure is not None:
        return "a closure"
    if _optimizer_module._global_optimizer_pre_hooks or _optimizer_module._global_optimizer_post_hooks:
        return "a global optimizer hook"
    if any(getattr(optimizer, name, None) is not None for name in ("grad_scale", "found_inf")):
        return "a GradScaler's grad_scale or found_inf (scaler.step(optimizer))"  # read by the fused kernel
    for group in optimizer.param_groups:
        for flag in ("amsgrad", "capturable", "differentiable"):
            if group.get(flag):
                return f"{flag}=True"
        if kind is torch.optim.SGD and group.get("nesterov") and group["momentum"] <= 0:
            return "nesterov without momentum"
        if any(p.is_complex() for p in group["params"]):
            return "a complex parameter"
        if any(isinstance(value, torch.Tensor) for value in group.values() if not isinstance(value, list)):
            return "a tensor hyperparameter (lr or betas given as tensors)"
    return None


class _Hyperparameters:
    """A param group's values, each checked by the prologue when the update first reads it."""

    def __init__(self, step: _Step, group: dict, source: Source):
        self._step, self._group, self._source = step, group, source
        self._read: dict[str, Any] = {}
        self._tensors: dict[tuple[str, str], TensorProxy] = {}

    def as_tensor(self, key: str, device: Any) -> TensorProxy:
        """The value as a float64 tensor of no dims on ``device``, made once per group: arithmetic on
        it joins the update's fusion, where a number input (the learning rate) is not a fusion input
        and made each parameter's update a torch kernel between two fusions (GPT-2 on an H200)."""
        made = self._tensors.get((key, str(device)))
        if made is None:
            made = ltorch.full((), self[key], dtype=torch.float64, device=device)
            self._tensors[(key, str(device))] = made
        return made

    def __getitem__(self, key: str) -> Any:
        if key not in self._read:
            value = self._group[key]
            if key == "lr" and type(value) is float:  # a scheduler changes it every step: an input
                self._read[key] = self._step.hooks.builder.add_number(
                    value, ItemSource(self._source, key), f"lr{len(self._step.params)}"
                )
                return self._read[key]
            if isinstance(value, tuple):  # betas
                for position, item in enumerate(value):
                    self._step.guard(item, ItemSource(ItemSource(self._source, key), position))
            else:
                self._step.guard(value, ItemSource(self._source, key))
            self._read[key] = value
        return self._read[key]


def _state_tensors(
    step: _Step, param: TensorProxy, source: Source, create: dict[str, Callable[[], Any]]
) -> tuple[dict[str, Any], bool]:
    """The state's tensors as inputs updated in place, or, on the first step (an empty state, checked by
    the prologue), new ones; whether they are new."""
    state = step.optimizer.state[step.params[param.name]]
    keys = tuple(state.keys())
    step.guard(keys, KeysSource(source))
    if keys:
        return {
            k: step.tensor(v, ItemSource(source, k), f"{param.name}_{k}") for k, v in state.items()
        }, False
    return {k: make() for k, make in create.items()}, True


def _store(step: _Step, param: TensorProxy, source: Source, tensors: dict[str, Any]) -> None:
    """New state, as the program left it (in-place updates included), stored by the epilogue."""
    state = step.optimizer.state[step.params[param.name]]
    step.hooks.side_effects.contents(state, source, "step")  # the epilogue writes the final contents
    state.update({k: current(v) for k, v in tensors.items()})  # the program's own write, undone after tracing


def _sgd(step: _Step, hyper: _Hyperparameters, param: TensorProxy, grad: TensorProxy, source: Source) -> None:
    if hyper["maximize"]:
        grad = -grad
    if hyper["weight_decay"] != 0:
        grad = grad.add(param, alpha=hyper["weight_decay"])
    momentum = hyper["momentum"]
    if momentum != 0:
        tensors, new = _state_tensors(step, param, source, {"momentum_buffer": lambda: grad.clone()})
        buffer = tensors["momentum_buffer"]
        if buffer is None:
            raise NotImplementedError(
                f"optimizer.step() inside thunder.jit: an SGD state without a buffer; {_WAY_OUT}"
            )
        if new:
            _store(step, param, source, tensors)
        else:
            buffer.mul_(momentum).add_(grad, alpha=1 - hyper["dampening"])
        grad = grad.add(buffer, alpha=momentum) if hyper["nesterov"] else buffer
    param.add_(grad, alpha=-hyper["lr"])


def _adam(
    step: _Step, hyper: _Hyperparameters, param: TensorProxy, grad: TensorProxy, source: Source
) -> None:
    lr, (beta1, beta2), eps, weight_decay = hyper["lr"], hyper["betas"], hyper["eps"], hyper["weight_decay"]
    if hyper["maximize"]:
        grad = -grad
    zeros = lambda: ltorch.zeros_like(param)  # noqa: E731
    # the step count as eager keeps it: on the parameter's device in float32 for the fused kernel, else
    # on the CPU in the default scalar dtype (read while tracing: only a first step creates the state)
    fused = bool(hyper["fused"])
    step_device = param.device if fused else "cpu"
    step_dtype = _optimizer_module._get_scalar_dtype(is_fused=fused)
    tensors, new = _state_tensors(
        step, param, source,
        {"step": lambda: ltorch.zeros((), dtype=step_dtype, device=step_device), "exp_avg": zeros,
         "exp_avg_sq": zeros},
    )  # fmt: skip
    step_t, exp_avg, exp_avg_sq = tensors["step"], tensors["exp_avg"], tensors["exp_avg_sq"]
    step_t.add_(1)
    if fused:  # the step count is on the parameter's device: so is the learning rate, as a tensor
        lr = hyper.as_tensor("lr", step_device)
    if weight_decay != 0:
        if type(step.optimizer) is torch.optim.AdamW or hyper["decoupled_weight_decay"]:
            param.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(param, alpha=weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    count = current(step_t).to(torch.float64)  # eager: a Python float from step_t.item()
    step_size = lr / (1 - beta1**count)
    bias_correction2_sqrt = (1 - beta2**count).sqrt()
    denom = (current(exp_avg_sq).sqrt() / bias_correction2_sqrt).add_(eps)
    param.add_(current(exp_avg) * -step_size / denom)  # addcdiv_(exp_avg, denom, value=-step_size)
    if new:
        _store(step, param, source, tensors)
