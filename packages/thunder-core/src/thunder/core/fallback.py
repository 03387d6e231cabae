"""The fallback: torch operators with no thunder symbol, run by PyTorch as opaque, visible symbols.

When the traced program calls a torch operator that thunder has no symbol for, the operator is
recorded as a leaf symbol printed ``t3 = fallback.torch_nn_functional_foo(t1, 2)``; at run time
``fallback.torch_nn_functional_foo`` *is* the torch callable, so the printed trace runs. Its output
metadata comes from running the operator on meta tensors, or on FakeTensors where the operator has
no meta implementation. Its gradient comes from PyTorch's autograd: the rule registered for every
fallback symbol records ``fallback.<name>_vjp``, which re-runs the operator under
``torch.enable_grad()`` and calls ``torch.autograd.grad``.

An operator cannot fall back when its output shape depends on the data (``nonzero``), when it
returns Python values computed from the data or nothing at all (it is called for an effect), or when
it mutates its inputs; those raise
``UnsupportedTorchFunctionError`` naming the operator, as does every operator when the fallback is
turned off (``thunder.jit(fn, fallback=False)``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree

from thunder.core import devices, dtypes
from thunder.core.gradients import register_vjp
from thunder.core.proxies import TensorProxy, reads_data_error
from thunder.core.pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import Trace

__all__ = [
    "UnsupportedTorchFunctionError",
    "call",
    "enabled",
    "is_enabled",
    "is_fallback",
    "fallback_calls",
    "check_fallback",
    "torch_name",
]

FALLBACK = "fallback"


class UnsupportedTorchFunctionError(NotImplementedError):
    """A torch callable with no thunder symbol was called on a tensor and cannot fall back."""


# ---------------------------------------------------------------------------------------------
# The switch: on unless ``thunder.jit(..., fallback=False)``

_state = threading.local()


def is_enabled() -> bool:
    return getattr(_state, "enabled", True)


@contextlib.contextmanager
def enabled(flag: bool) -> Iterator[None]:
    previous = is_enabled()
    _state.enabled = flag
    try:
        yield
    finally:
        _state.enabled = previous


# ---------------------------------------------------------------------------------------------
# Names


def torch_name(fn: Any) -> str:
    """``torch.nn.functional.foo`` for ``F.foo``, ``torch.Tensor.foo`` for the method."""
    owner = getattr(fn, "__objclass__", None)
    if owner is torch._C.TensorBase or owner is torch.Tensor:
        return f"torch.Tensor.{fn.__name__}"
    module = getattr(fn, "__module__", None) or getattr(owner, "__module__", "") or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    short = getattr(fn, "__name__", "")
    for public in ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"):
        if short and getattr(sys.modules.get(public), short, None) is fn:
            return f"{public}.{short}"
    return f"{module}.{name}" if module else name


def _identifier(name: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return f"_{name}" if not name or name[0].isdigit() else name


_symbols: dict[tuple[int, bool], Symbol] = {}
_keep_alive: list[Any] = []  # the callables of _symbols' keys


def is_fallback(symbol: Symbol) -> bool:
    return FALLBACK in symbol.tags


def fallback_calls(trace: Trace) -> list[BoundSymbol]:
    """The fallback calls of a trace (top level), in order."""
    return [b for b in trace.bound_symbols if is_fallback(b.symbol)]


# ---------------------------------------------------------------------------------------------
# Output metadata from meta tensors or FakeTensors


def _torch_value(x: Any) -> Any:
    if isinstance(x, dtypes.dtype):
        return x.torch_dtype
    if isinstance(x, devices.Device):
        return x.torch_device
    return x


def _differentiable(x: Any) -> bool:
    return isinstance(x, (TensorProxy, torch.Tensor)) and (x.dtype.is_floating_point or x.dtype.is_complex)


def _meta_tensor(proxy: TensorProxy, device: str | torch.device) -> torch.Tensor:
    tensor = torch.empty(proxy.shape, dtype=proxy.dtype.torch_dtype, device=device)
    return tensor.requires_grad_() if proxy.requires_grad and _differentiable(proxy) else tensor


def _run_on_meta(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, list[torch.Tensor]]:
    meta_args, meta_kwargs = tree_map(
        lambda x: _meta_tensor(x, "meta") if isinstance(x, TensorProxy) else _torch_value(x), (args, kwargs)
    )
    inputs = [t for t in tree_leaves((meta_args, meta_kwargs)) if isinstance(t, torch.Tensor)]
    versions = [t._version for t in inputs]
    output = fn(*meta_args, **meta_kwargs)
    _check_no_mutation(fn, inputs, versions)
    return output, inputs


def _run_on_fake(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, list[torch.Tensor]]:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensorMode,
        UnsupportedOperatorException,
    )

    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake_args, fake_kwargs = tree_map(
            lambda x: (
                mode.from_tensor(_meta_tensor(x, "cpu"), static_shapes=True)
                if isinstance(x, TensorProxy)
                else _torch_value(x)
            ),
            (args, kwargs),
        )
        inputs = [t for t in tree_leaves((fake_args, fake_kwargs)) if isinstance(t, torch.Tensor)]
        versions = [t._version for t in inputs]
        try:
            output = fn(*fake_args, **fake_kwargs)
        except (DynamicOutputShapeException, DataDependentOutputException) as error:
            raise UnsupportedTorchFunctionError(
                f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: the shape or "
                "value of its output depends on the data of its inputs"
            ) from error
        except RuntimeError as error:
            if "data is not allocated" not in str(error):
                raise
            raise UnsupportedTorchFunctionError(  # it read a tensor's data (a .tolist() inside the op)
                f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: it reads the data "
                "of a tensor argument to decide its output"
            ) from error
        except UnsupportedOperatorException as error:
            raise UnsupportedTorchFunctionError(
                f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: PyTorch cannot "
                f"compute its output's metadata without running it ({error})"
            ) from error
    _check_no_mutation(fn, inputs, versions)
    return output, inputs


def _check_no_mutation(fn: Callable, inputs: list[torch.Tensor], versions: list[int]) -> None:
    if any(t._version != v for t, v in zip(inputs, versions)):
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: it modifies its "
            "inputs in place"
        )


def _evaluate(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, bool]:
    """The output as proxies, and whether it is a view of the first tensor input."""
    try:
        output, inputs = _run_on_meta(fn, args, kwargs)
    except UnsupportedTorchFunctionError:
        raise
    except Exception:  # noqa: BLE001 -- no meta kernel, or a data-dependent op: FakeTensors tell which
        output, inputs = _run_on_fake(fn, args, kwargs)  # a genuine error (bad shapes) raises here again
    device = next((p.device for p in tree_leaves((args, kwargs)) if isinstance(p, TensorProxy)), None)
    is_view = False
    if isinstance(output, torch.Tensor) and inputs:
        base = inputs[0]
        is_view = output._is_view() and output._base is (base._base if base._is_view() else base)
    return _to_proxies(fn, output, device), is_view


def _to_proxies(fn: Callable, output: Any, device: devices.Device | None) -> Any:
    if output is None:  # called for an effect: on autograd state, a tensor's .grad, a stream, ...
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: it returns nothing, so it "
            "is called for an effect on state outside its result, which the compiled program would not reproduce"
        )
    if isinstance(output, torch.Size):  # Python ints, even when empty (tree_map would make it a tuple)
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: it returns a torch.Size, "
            "a Python value"
        )

    def convert(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            where = device if x.device.type == "meta" and device is not None else x.device
            if where is not None and getattr(where, "type", None) == "meta":
                where = devices.to_device("cpu")
            return TensorProxy(shape=x.shape, dtype=x.dtype, device=where, requires_grad=x.requires_grad)
        if x is None:
            return None
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} has no thunder symbol and cannot fall back to PyTorch: it returns a "
            f"{type(x).__name__}, which may depend on the data of its inputs"
        )

    return tree_map(convert, output)


# ---------------------------------------------------------------------------------------------
# The symbols


def _torch_executor() -> Any:
    from thunder.core.executor import get_executor

    try:
        return get_executor("torch")
    except ValueError as error:
        raise UnsupportedTorchFunctionError(
            "the fallback runs torch operators with the torch executor, which is not registered "
            "(import thunder.executors)"
        ) from error


def _unique_name(fn: Callable) -> str:
    base = _identifier(torch_name(fn))
    name, suffix = base, 0
    while getattr(sys.modules[__name__], name, fn) is not fn:
        suffix += 1
        name = f"{base}_{suffix}"
    return name


def _meta(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    return _evaluate(fn, args, kwargs)[0]


def _draws_random(fn: Callable) -> bool:
    """An ATen operator of this name takes a generator (``torch.poisson``; the random fills of
    ``thunder.torch.inplace`` are named ``random_<fill>``): tagged ``random``, so that no transform
    drops, reorders or recomputes it."""
    name = getattr(fn, "__name__", "")
    if name.startswith("random_"):
        name = name.removeprefix("random_") + "_"
    try:
        packet = getattr(torch.ops.aten, name)
        schemas = [getattr(packet, overload)._schema for overload in packet.overloads()]
    except (AttributeError, RuntimeError):
        return False
    return any("Generator" in str(argument.type) for schema in schemas for argument in schema.arguments)


def _symbol(fn: Callable, is_view: bool) -> Symbol:
    key = (id(fn), is_view)
    symbol = _symbols.get(key)
    if symbol is not None:
        return symbol
    name = _unique_name(fn)
    module = sys.modules[__name__]
    setattr(module, name, fn)  # what the printed ``fallback.<name>`` calls
    tags = frozenset({FALLBACK, "view"} if is_view else {FALLBACK}) | (
        {"random"} if _draws_random(fn) else set()
    )
    symbol = Symbol(
        name=name,
        id=f"fallback.{name}" + (".view" if is_view else ""),
        meta=functools.partial(_meta, fn),
        module=FALLBACK,
        fn=fn,
        executor=_torch_executor(),
        tags=tags,
    )
    register_vjp(symbol)(_vjp_rule(_vjp_symbol(fn, name)))
    _symbols[key] = symbol
    _keep_alive.append(fn)
    return symbol


def _positional(fn: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Tensors that need a gradient must be positional (gradient rules return one per positional)."""
    if not any(isinstance(x, TensorProxy) and x.requires_grad for x in tree_leaves(kwargs)):
        return args, kwargs
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} has no thunder symbol, and falling back with a tensor that requires grad passed "
            "by keyword needs its signature, which PyTorch does not expose; pass it positionally"
        ) from error
    return tuple(bound.args), dict(bound.kwargs)


_DATA_READERS = {
    torch.Tensor.item: "Tensor.item()",
    torch.Tensor.tolist: "Tensor.tolist()",
    torch.Tensor.numpy: "Tensor.numpy()",
}


def call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Record ``fn(*args, **kwargs)`` as a fallback symbol in the trace being built; returns its output."""
    if not is_enabled():
        raise UnsupportedTorchFunctionError(
            f"{torch_name(fn)} is not supported by thunder: it has no thunder symbol and the fallback to "
            "PyTorch is turned off (thunder.jit(..., fallback=False))"
        )
    if fn in _DATA_READERS:  # torch.Tensor.item(x): as x.item()
        raise reads_data_error(_DATA_READERS[fn])
    if kwargs.get("out") is not None:
        from thunder.core.inplace import mutate
        from thunder.core.write_overlap import check_write_overlap

        kwargs = dict(kwargs)
        out = kwargs.pop("out")
        # the result is computed, then written into out; eager's kernel may read an operand after it
        # wrote out over it (linalg.matrix_power(x, 2, out=x) gives zeros): any overlap is refused
        construct = f"{torch_name(fn)}(v, out=x)"
        for target in tree_leaves(out):
            for operand in tree_leaves((args, kwargs)):
                if isinstance(target, TensorProxy) and isinstance(operand, TensorProxy):
                    check_write_overlap(target, operand, construct, same_view="refused")
        result = call(fn, args, kwargs)
        for destination, value in zip(tree_leaves(out), tree_leaves(result)):
            mutate(destination, value)
        return out
    args, kwargs = tree_map(_torch_value, (args, kwargs))
    args, kwargs = _positional(fn, args, kwargs)
    _, is_view = _evaluate(fn, args, kwargs)
    return _symbol(fn, is_view)(*args, **kwargs)


def check_fallback(fn: Callable, args: tuple, kwargs: dict) -> str | None:
    """None when ``fn`` can fall back on these real arguments, else why not (for reports)."""
    from thunder.core.trace import tracectx

    try:
        with tracectx(Trace("check_fallback")):
            proxied = tree_map(
                lambda x: TensorProxy.from_tensor(x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
            )
            _evaluate(fn, *proxied)
    except UnsupportedTorchFunctionError as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 -- eager raises too: not the fallback's fault
        return f"{type(error).__name__}: {error}"
    return None


# ---------------------------------------------------------------------------------------------
# Gradients from PyTorch's autograd


def _none_is_leaf(x: Any) -> bool:
    return x is None


def _vjp_runner(fn: Callable) -> Callable:
    def run(cotangents: Any, args: tuple, kwargs: dict) -> tuple:
        leaves, spec = tree_flatten(args)
        inputs = [i for i, x in enumerate(leaves) if _differentiable(x)]
        leaves = list(leaves)
        for i in inputs:
            leaves[i] = leaves[i].detach().requires_grad_()
        with torch.enable_grad():
            output = fn(*tree_unflatten(leaves, spec), **kwargs)
        outputs = _pytree.tree_leaves(output, is_leaf=_none_is_leaf)
        grads = _pytree.tree_leaves(cotangents, is_leaf=_none_is_leaf)
        pairs = [
            (o, g)
            for o, g in zip(outputs, grads)
            if isinstance(o, torch.Tensor) and g is not None and o.requires_grad
        ]
        wanted = [leaves[i] for i in inputs]
        if not pairs:
            return tuple(torch.zeros_like(x) for x in wanted)
        return tuple(
            torch.autograd.grad(
                [o for o, _ in pairs],
                wanted,
                [g for _, g in pairs],
                allow_unused=True,
                materialize_grads=True,
            )
        )

    return run


def _vjp_meta(cotangents: Any, args: tuple, kwargs: dict) -> tuple:
    return tuple(
        TensorProxy(shape=x.shape, dtype=x.dtype, device=x.device)
        for x in tree_leaves(args)
        if _differentiable(x)
    )


def _vjp_symbol(fn: Callable, name: str) -> Symbol:
    runner = _vjp_runner(fn)
    runner.__name__ = runner.__qualname__ = f"{name}_vjp"
    setattr(sys.modules[__name__], runner.__name__, runner)
    return Symbol(
        name=runner.__name__,
        id=f"fallback.{runner.__name__}",
        meta=_vjp_meta,
        module=FALLBACK,
        fn=runner,
        executor=_torch_executor(),
        tags=frozenset({FALLBACK}),
    )


def _vjp_rule(vjp: Symbol) -> Callable:
    def rule(g: Any, *args: Any, out: Any, **kwargs: Any) -> tuple:
        grads = iter(vjp(g, args, kwargs))
        return tuple(
            tree_map(lambda x: next(grads) if _differentiable(x) else None, arg)
            if any(isinstance(x, TensorProxy) for x in tree_leaves(arg))
            else None
            for arg in args
        )

    return rule
