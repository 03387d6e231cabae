"""The interpreter as thunder.jit's frontend: runs a call on proxies and records its traces.

The VM runs the user's bytecode; this module decides what it sees. Torch callables with a thunder
symbol are replaced by the symbol; thunder's own code runs natively; every value read from the
call's arguments, globals, closures or module attributes is reported here with its source, so that
tensors become computation inputs and Python values become prologue checks.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

import thunder.torch as ltorch
from thunder.core.pipeline import CompileData, FrontendResult
from thunder.core.prologue import PrologueBuilder
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.sources import (
    ArgumentSource,
    AttributeSource,
    ConstantSource,
    GlobalSource,
    ItemSource,
    KeywordSource,
    Source,
)
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, tracectx
from thunder.interpreter.vm import InterpreterHooks, interpret

__all__ = ["interpreter_frontend", "UnsupportedTorchFunctionError"]

_GUARDED_TYPES = (int, float, bool, str, complex, type(None), torch.dtype, torch.device)


class UnsupportedTorchFunctionError(NotImplementedError):
    """A torch callable with no thunder symbol was called on a tensor."""


def _callable_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "__objclass__", None), "__module__", "")
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"


def _is_torch_callable(fn: Any) -> bool:
    """A torch function implemented in C (the interpreter cannot look inside it)."""
    if (
        inspect.isclass(fn)
        or isinstance(fn, torch.nn.Module)
        or inspect.isfunction(fn)
        or inspect.ismethod(fn)
    ):
        return False
    return _callable_name(fn).startswith("torch")


def _runs_natively(fn: Any) -> bool:
    """Thunder's own functions and symbols are called, never interpreted."""
    if isinstance(fn, Symbol):
        return True
    if fn is _call:  # the trampoline into the user's code is interpreted like the user's code
        return False
    if isinstance(fn, functools.partial):
        return _runs_natively(fn.func)
    return (getattr(fn, "__module__", None) or "").startswith("thunder.") and not inspect.isclass(fn)


def _contains_proxy(values: Any) -> bool:
    return any(isinstance(leaf, Proxy) for leaf in tree_leaves(values))


def _thunder_isinstance(obj: Any, classinfo: Any) -> bool:
    """``isinstance`` that treats a tensor proxy as the ``torch.Tensor`` it stands for."""
    if isinstance(obj, TensorProxy):
        classes = classinfo if isinstance(classinfo, tuple) else (classinfo,)
        return any(isinstance(c, type) and issubclass(torch.Tensor, c) for c in classes)
    return isinstance(obj, classinfo)


def _guard_torch_callable(fn: Any) -> Callable:
    """Call a torch callable thunder has no symbol for, if no tensor goes in or comes out."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if _contains_proxy((args, kwargs)):
            raise UnsupportedTorchFunctionError(
                f"{_callable_name(fn)} is not supported by thunder: it has no thunder symbol "
                "(see thunder.torch for the supported operators)"
            )
        result = fn(*args, **kwargs)
        if any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(result)):
            raise UnsupportedTorchFunctionError(
                f"{_callable_name(fn)} creates a tensor, and thunder has no symbol for it"
            )
        return result

    return call


def _sanitize(name: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return f"_{name}" if not name or name[0].isdigit() else name


class TracingHooks(InterpreterHooks):
    """What the VM asks while it runs the user's code."""

    def __init__(self, builder: PrologueBuilder, module_state: dict[int, tuple[str, Source]]):
        self.builder = builder
        self.module_state = module_state
        self.instruction_log: list | None = []

    def lookaside(self, fn: Any) -> Callable | None:
        symbol = ltorch.symbol_for(fn)
        if symbol is not None:
            return symbol
        if fn is isinstance:
            return _thunder_isinstance
        if _runs_natively(fn):
            return fn
        if _is_torch_callable(fn):
            return _guard_torch_callable(fn)
        return None

    def check_opaque_call(self, fn: Any, args: tuple, kwargs: dict) -> None:
        if _is_torch_callable(fn) and _contains_proxy((args, kwargs)):
            _guard_torch_callable(fn)(*args, **kwargs)

    def on_load(self, value: Any, source: Source, name: str | None = None) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, source, name)
        if isinstance(value, _GUARDED_TYPES):
            self.builder.add_value_guard(value, source)
            return value
        if type(value) in (tuple, list):
            items = [self.on_load(item, ItemSource(source, i)) for i, item in enumerate(value)]
            return type(value)(items)
        if type(value) is dict and all(isinstance(k, (str, int)) for k in value):
            return {k: self.on_load(v, ItemSource(source, k)) for k, v in value.items()}
        return value

    def _tensor(self, tensor: torch.Tensor, source: Source, name: str | None) -> TensorProxy:
        known = self.module_state.get(id(tensor))
        if known is not None:  # module state is always fetched by its qualified name
            name, source = known
        return self.builder.add_tensor(tensor, source, name or _source_name(source))

    def adopt(self, tensor: torch.Tensor) -> TensorProxy:
        """A real tensor reached a symbol without passing through a load the VM tracked."""
        proxy = self.builder.proxy_for(tensor)
        if proxy is not None:
            return proxy
        known = self.module_state.get(id(tensor))
        if known is not None:
            return self.builder.add_tensor(tensor, known[1], known[0])
        raise NotImplementedError(
            f"a tensor of shape {tuple(tensor.shape)} that is neither an input, a module parameter or buffer, "
            "nor read from a global or closure reached a torch operation; thunder cannot tell whether it "
            "changes between calls. Pass it as an argument of the compiled function."
        )


def _source_name(source: Source) -> str | None:
    if isinstance(source, AttributeSource):
        return _sanitize(source.name)
    if isinstance(source, GlobalSource):
        return _sanitize(source.name)
    return None


def _module_state(module: torch.nn.Module, root: Source) -> dict[int, tuple[str, Source]]:
    state: dict[int, tuple[str, Source]] = {}
    for qualified_name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        source = root
        for part in qualified_name.split("."):
            source = AttributeSource(source, part)
        state[id(tensor)] = (_sanitize(qualified_name), source)
    return state


def _parameter_names(fn: Callable, args: tuple) -> list[str | None]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [None] * len(args)
    names: list[str | None] = []
    for index in range(len(args)):
        if index < len(parameters) and parameters[index].kind in (
            parameters[index].POSITIONAL_ONLY,
            parameters[index].POSITIONAL_OR_KEYWORD,
        ):
            names.append(parameters[index].name)
        else:
            names.append(None)
    return names


def _call(target: Callable, *args: Any, **kwargs: Any) -> Any:
    return target(*args, **kwargs)


def interpreter_frontend(
    fn: Callable, args: tuple, kwargs: dict, compile_data: CompileData
) -> FrontendResult:
    """Trace ``fn(*args, **kwargs)`` with the interpreter into a prologue and a computation."""
    computation = Trace("computation")
    builder = PrologueBuilder(computation)
    root = ConstantSource(
        fn, "the compiled module" if isinstance(fn, torch.nn.Module) else "the compiled function"
    )
    module_state = _module_state(fn, root) if isinstance(fn, torch.nn.Module) else {}
    hooks = TracingHooks(builder, module_state)
    computation.tensor_adopter = hooks.adopt
    signature_fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
    with tracectx(computation):
        names = _parameter_names(signature_fn, args)
        proxied_args = tuple(hooks.on_load(a, ArgumentSource(i), names[i]) for i, a in enumerate(args))
        proxied_kwargs = {k: hooks.on_load(v, KeywordSource(k), k) for k, v in kwargs.items()}
        arg_sources = [root] + [ArgumentSource(i) for i in range(len(args))]
        kwarg_sources = {k: KeywordSource(k) for k in kwargs}
        result = interpret(_call, (fn, *proxied_args), proxied_kwargs, hooks,
                           arg_sources=arg_sources, kwarg_sources=kwarg_sources)  # fmt: skip
        output = _adopt_outputs(result, hooks)
        computation.record(BoundSymbol(RETURN, (output,)))
    computation.header = "Constructed by the interpreter"
    if not (
        torch.is_grad_enabled()
        and any(p.requires_grad for p in computation.args if isinstance(p, TensorProxy))
    ):
        computation.decorators = ["@torch.no_grad()"]
    return FrontendResult(builder.finish(), computation, hooks.instruction_log or [])


def _adopt_outputs(result: Any, hooks: TracingHooks) -> Any:
    from thunder.core.pytree import tree_map

    return tree_map(lambda x: hooks.adopt(x) if isinstance(x, torch.Tensor) else x, result)
