"""The interpreter as thunder.jit's frontend: runs a call on proxies and records its traces.

The VM runs the user's bytecode; this module decides what it sees. Torch callables with a thunder
symbol are replaced by the symbol; thunder's own code runs natively; every value read from the
call's arguments, globals, closures or module attributes is reported here with its source, so that
tensors become computation inputs and Python values become prologue checks.
"""

from __future__ import annotations

import functools
import inspect
import os
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from thunder.core import devices, dtypes, fallback, inplace, inplace_finish
from thunder.core.executor import to_torch_arguments
from thunder.core.module import ThunderModule
from thunder.core.pipeline import CompileData, FrontendResult, JittedFunction
from thunder.core.prologue import PrologueBuilder
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.python_ops import specialize_numbers
from thunder.core.pytree import tree_leaves
from thunder.core.sources import (
    ArgumentSource,
    AttributeSource,
    CallSource,
    ConstantSource,
    GlobalSource,
    KeysSource,
    KeywordSource,
    LengthSource,
    ModuleEntrySource,
    Source,
)
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace, tracectx
from thunder.core.transforms.autograd import check_grad_mode_regions
from thunder.core.transforms.inline_backward import ran_backward
from thunder.interpreter.custom_functions import custom_function_forward, interpreted_forward
from thunder.interpreter.guards import ValueGuards, is_guarded_by_attributes
from thunder.interpreter.optimizers import (
    is_optimizer_step,
    is_optimizer_zero_grad,
    optimizer_step,
    optimizer_zero_grad,
)
from thunder.interpreter.returned_objects import created_objects
from thunder.interpreter.side_effects import SideEffects
from thunder.interpreter.trace_time_effects import TraceTimeEffects
from thunder.interpreter.vm import InterpreterError, InterpreterHooks, interpret
from thunder.interpreter.vm.calls import hashable
from thunder.torch.inplace import torch_lookaside
from thunder.torch.tensor_numbers import float_of, int_of

__all__ = ["interpreter_frontend", "InterpreterEvent", "UnsupportedTorchFunctionError"]


# A torch callable with no thunder symbol was called on a tensor and cannot fall back (core/fallback.py).
UnsupportedTorchFunctionError = fallback.UnsupportedTorchFunctionError


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
    if fn is _call or fn is interpreted_forward:  # trampolines into the user's code: interpreted like it
        return False
    if isinstance(fn, functools.partial):
        return _runs_natively(fn.func)
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("torch._dynamo.") and not inspect.isclass(fn):
        # Dynamo's bookkeeping (once torch.compile ran in the process it wraps nn.Module.__init__ to
        # tag new modules in a global table): not the user's program, and it touches no tensor.
        return True
    return module.startswith("thunder.") and not inspect.isclass(fn)


def _contains_proxy(values: Any) -> bool:
    return any(isinstance(leaf, Proxy) for leaf in tree_leaves(values))


def _thunder_isinstance(obj: Any, classinfo: Any) -> bool:
    """``isinstance`` that treats a tensor proxy as the ``torch.Tensor`` it stands for."""
    if isinstance(obj, TensorProxy):
        classes = classinfo if isinstance(classinfo, tuple) else (classinfo,)
        return any(isinstance(c, type) and issubclass(torch.Tensor, c) for c in classes)
    if isinstance(obj, NumberProxy):  # its type, which the prologue checks
        return isinstance(obj.value, classinfo)
    size_type = _SIZE_TYPES.get(type(obj))
    if size_type is not None:  # a symbolic size is an int in eager (every value of it is)
        return isinstance(obj, classinfo) or issubclass(size_type, classinfo)
    return isinstance(obj, classinfo)


def _thunder_type(*args: Any) -> Any:
    """``type`` that answers ``torch.Tensor`` for a tensor proxy, as it would for the tensor, and
    ``int`` for a symbolic size (``torch.SymInt``; core/symbolic_shapes.py)."""
    if len(args) == 1 and isinstance(args[0], TensorProxy):
        return torch.Tensor
    if len(args) == 1 and isinstance(args[0], NumberProxy):
        return type(args[0].value)
    if len(args) == 1 and type(args[0]) in _SIZE_TYPES:
        return _SIZE_TYPES[type(args[0])]
    return type(*args)


def _thunder_hash(value: Any) -> int:
    """``hash`` of a symbolic int is its value's, guarded (torch's SymInt cannot be hashed)."""
    return hash(hashable(value))


def _thunder_divmod(a: Any, b: Any) -> Any:
    """``divmod`` of symbolic ints, which torch's SymInt does not take: ``(a // b, a % b)``, as for ints."""
    if {type(a), type(b)} <= {int, torch.SymInt} and torch.SymInt in {type(a), type(b)}:
        return a // b, a % b
    return divmod(a, b)


# A symbolic size stands for the Python number eager has there: a program that tells ints apart
# (``isinstance(dim, int)``, ``type(n) is int``, as code normalizing a size argument does) must
# take eager's branch. The type needs no guard: every value of the size is an int.
_SIZE_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def _is_compiling() -> bool:
    return True


def _guard_torch_callable(fn: Any) -> Callable:
    """Call a torch callable thunder has no symbol for, if no tensor goes in or comes out."""

    def call(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = specialize_numbers((args, kwargs))  # torch's C code needs the numbers themselves
        if _contains_proxy((args, kwargs)):  # run by PyTorch, visible in the trace; or a clear error
            return fallback.call(fn, args, kwargs)
        args, kwargs = to_torch_arguments(args, kwargs)  # a proxy's .dtype/.device are thunder's
        result = fn(*args, **kwargs)
        if any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(result)):
            raise UnsupportedTorchFunctionError(
                f"{_callable_name(fn)} creates a tensor, and thunder has no symbol for it"
            )
        return result

    return call


def _raised_by_thunder(exc: BaseException) -> bool:
    """Raised by thunder's own code (a proxy, a symbol, this frontend), not by the user's program.

    The user's code runs inside the VM, so a ``raise`` in it has the VM as its innermost native frame;
    torch's own errors are torch's and surface as they would in eager mode.
    """
    traceback = exc.__traceback__
    if traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    module = traceback.tb_frame.f_globals.get("__name__", "")
    return module.startswith("thunder.") and not module.startswith("thunder.interpreter.vm")


# What thunder cannot do names the place in its message. Errors eager raises too (a shape mismatch's
# RuntimeError) keep eager's message: the user's frame shows the place in the traceback.
_LOCATED_ERRORS = (NotImplementedError,)


def _sanitize(name: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return f"_{name}" if not name or name[0].isdigit() else name


class InterpreterEvent(NamedTuple):
    """A record of ``thunder.last_interpreter_log`` that is not an instruction."""

    kind: str  # "lookaside" or "opaque call"
    detail: str


class TracingHooks(InterpreterHooks):
    """What the VM asks while it runs the user's code."""

    def __init__(
        self,
        builder: PrologueBuilder,
        module_state: dict[int, tuple[str, Source]],
        symbolic_numbers: bool = False,
    ):
        self.builder = builder
        self.module_state = module_state
        self.symbolic_numbers = symbolic_numbers  # cache="symbolic values": ints and floats become inputs
        self.instruction_log: list | None = []
        # writes to outside objects, replayed by the epilogue; interpret() sets both lookups later
        self.side_effects = SideEffects(lambda obj: self.source_of(obj), lambda: self.current_location())
        # print, logging, clocks, random: run once while tracing, with a warning (trace_time_effects.py)
        self.trace_time_effects = TraceTimeEffects(
            lambda: self.current_location(), lambda obj: self.source_of(obj) is not None
        )
        number = self._number if symbolic_numbers else None
        self.guards = ValueGuards(builder, self._tensor, number, self.current_location)
        # values found inside the arguments, loaded before the VM runs: their sources are handed to it
        self.argument_sources: list[tuple[Any, Source]] = []
        self.guards.register = lambda value, source: self.register_source(value, source)
        # input proxy name -> (the tensor when traced, where the prologue fetches it)
        self.input_tensors: dict[str, tuple[torch.Tensor, Source]] = {}

    def lookaside(self, fn: Any) -> Callable | None:
        if is_optimizer_zero_grad(fn):
            bound_to = getattr(fn, "__self__", None)
            if bound_to is not None:
                return functools.partial(optimizer_zero_grad, self, bound_to)
            return functools.partial(optimizer_zero_grad, self)
        if is_optimizer_step(fn):  # SGD, Adam, AdamW: the update as trace operations (optimizers.py)
            bound_to = getattr(fn, "__self__", None)  # a bound method is called without the optimizer
            if bound_to is not None:
                return functools.partial(optimizer_step, self, bound_to)
            return functools.partial(optimizer_step, self)
        replacement = torch_lookaside(fn)  # symbols, with their out=/inplace= forms; in-place torch ops
        if replacement is not None:
            if self.instruction_log is not None:
                event = InterpreterEvent("lookaside", f"{_callable_name(fn)} -> {replacement!r}")
                self.instruction_log.append(event)
            return replacement
        if fn is float:  # float(t) of a tensor: a number kept in the trace (thunder/torch/tensor_numbers.py)
            return float_of
        if fn is int:  # int(t) of a tensor: the data-dependence error, not int()'s TypeError
            return int_of
        if fn is isinstance:
            return _thunder_isinstance
        if fn is type:
            return _thunder_type
        if fn is hash:
            return _thunder_hash
        if fn is divmod:
            return _thunder_divmod
        if fn is torch.finfo or fn is torch.iinfo:  # classes, given a proxy's (thunder) dtype
            return _guard_torch_callable(fn)
        if fn is torch.compiler.is_compiling:
            # True, as under torch.compile: libraries (transformers) then skip data-dependent
            # branches and checks a tracing compiler cannot follow
            return _is_compiling
        if isinstance(fn, (JittedFunction, ThunderModule)):
            return None  # thunder's, but interpreted: see interpreted_instead
        if _runs_natively(fn):
            return fn
        trace_time_call = self.trace_time_effects.replacement(fn)
        if trace_time_call is not None:
            return trace_time_call
        if _is_torch_callable(fn):
            return _guard_torch_callable(fn)
        return None

    def check_lookup_key(self, container: Any, key: Any, operation: str) -> None:
        """A dict or set from outside the call is keyed by real tensors, never by the program's proxies:
        looked up by one (``stats[p]``, ``p in seen``), it would miss, or a defaultdict would make a new
        entry, silently. (An optimizer's ``state[p]``; SGD drifted from eager that way.)"""
        if isinstance(key, TensorProxy):
            source = self.source_of(container)
            where = source.describe() if source is not None else type(container).__name__
            raise NotImplementedError(
                f"{where} (a {type(container).__name__} from outside the call) looked up by a tensor ({operation}): "
                "inside thunder.jit tensors are traced stand-ins, so the lookup would not find the tensor it "
                "was keyed by; key it by name (e.g. dict(model.named_parameters())) or do the lookup outside "
                f"the jitted function (at {self.current_location()})"
            )

    def unwrapped(self, fn: Any) -> Any:
        """``torch._dynamo.disable(f)`` (``@torch._disable_dynamo``: ``Optimizer.zero_grad``) stands for ``f``.

        Dynamo's wrappers are run natively (its bookkeeping is not the program), but this one calls
        the program's own code: run natively, ``optimizer.zero_grad()`` cleared the real ``.grad``
        once, while tracing, and never again (gradients then accumulated over calls, silently)."""
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is None:
            return fn
        module = getattr(fn, "__module__", None)
        if isinstance(module, str) and module.startswith("torch._dynamo."):  # torch._dynamo.disable(f)
            return wrapped
        code = getattr(
            fn, "__code__", None
        )  # @torch._disable_dynamo's ``inner`` (functools.wraps renames it)
        if code is not None and code.co_name == "inner" and code.co_filename.endswith(_DISABLE_DYNAMO_FILE):
            return wrapped
        return fn

    def interpreted_instead(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """A function or module jitted on its own, called by the program: traced as part of the program,
        from its original (running it compiled would hand proxies to a compiled program). A
        ``torch.autograd.Function``'s ``apply``: its forward (custom_functions.py)."""
        forward = custom_function_forward(fn, args, kwargs)
        if forward is not None:
            return forward
        if isinstance(fn, ThunderModule):
            fn = fn._thunder_jitted
        if isinstance(fn, JittedFunction):
            return fn._compile_data.fn
        return None

    def check_opaque_call(self, fn: Any, args: tuple, kwargs: dict) -> None:
        if self.instruction_log is not None:
            self.instruction_log.append(InterpreterEvent("opaque call", _callable_name(fn)))
        if _is_torch_callable(fn) and _contains_proxy((args, kwargs)):
            _guard_torch_callable(fn)(*args, **kwargs)

    def on_store_attr(self, obj: Any, name: str, value: Any) -> bool:
        """Module buffers get a tensor's value written into them; other writes are replayed (side_effects.py)."""
        if isinstance(obj, TensorProxy) and name == "grad":  # the program's .grad (inline_backward.py)
            obj.grad = value
            return True
        current = obj._buffers.get(name) if isinstance(obj, torch.nn.Module) else None
        if current is not None and isinstance(value, TensorProxy):
            buffer = self._tensor_of_module(current)
            if buffer is not value:  # ``self.buf = f(self.buf)``: eager rebinds, thunder writes the value
                inplace.mutate(buffer, value)
            return True
        self.side_effects.attribute(obj, name)
        return False

    def _tensor_of_module(self, tensor: torch.Tensor) -> TensorProxy:
        proxy = self.builder.proxy_for(tensor)
        return proxy if proxy is not None else self.adopt(tensor)

    def on_delete_attr(self, obj: Any, name: str) -> None:
        self.side_effects.attribute(obj, name)

    def on_store_global(self, globals_dict: dict, name: str, value: Any) -> None:
        self.side_effects.global_(globals_dict, name)

    def on_mutation(self, obj: Any, source: Source, operation: str) -> None:
        self.side_effects.contents(obj, source, operation)

    def on_exception(self, exc: BaseException, location: str) -> None:
        """Errors thunder raises about the user's program name the user's file and line."""
        if not isinstance(exc, _LOCATED_ERRORS) or isinstance(exc, InterpreterError):
            return
        if not exc.args or not isinstance(exc.args[0], str) or not _raised_by_thunder(exc):
            return
        if location.split(": ", 1)[0] in exc.args[0]:
            return  # the message already names the place
        exc.args = (f"{exc.args[0]} (at {location})", *exc.args[1:])

    def register_source(self, value: Any, source: Source) -> None:
        self.argument_sources.append((value, source))  # until interpret() takes over

    def on_load(self, value: Any, source: Source, name: str | None = None) -> Any:
        if self.side_effects.written_by_program(source):  # read back after the program's own write
            return value
        return self.guards.load(value, source, name)

    def on_identity_test(self, left: Any, right: Any) -> None:
        self.guards.on_identity_test(left, right)

    def _number(self, value: Any, source: Source, name: str | None) -> NumberProxy:
        return self.builder.add_number(value, source, name or _source_name(source))

    def _tensor(self, tensor: torch.Tensor, source: Source, name: str | None) -> TensorProxy:
        known = self.module_state.get(id(tensor))
        if known is not None:  # module state is always fetched by its qualified name
            name, source = known
        return self._add_tensor(tensor, source, name or _source_name(source))

    def fetch_grad(self, proxy: TensorProxy) -> TensorProxy | None:
        """An input's ``.grad`` as the call finds it: another input, or None that the prologue checks."""
        entry = self.input_tensors.get(proxy.name)
        if entry is None:
            raise NotImplementedError(
                "thunder does not support reading .grad of a tensor the program computed (only of its inputs)"
            )
        tensor, source = entry
        grad_source = AttributeSource(source, "grad")
        if tensor.grad is None:
            self.builder.add_value_guard(None, grad_source)
            return None
        return self._add_tensor(tensor.grad, grad_source, f"{proxy.name}_grad")

    def _add_tensor(self, tensor: torch.Tensor, source: Source, name: str | None) -> TensorProxy:
        proxy = self.builder.add_tensor(tensor, source, name)
        self.input_tensors.setdefault(proxy.name, (tensor, source))
        return proxy

    def adopt(self, tensor: torch.Tensor) -> TensorProxy:
        """A real tensor reached a symbol without passing through a load the VM tracked."""
        proxy = self.builder.proxy_for(tensor)
        if proxy is not None:
            return proxy
        known = self.module_state.get(id(tensor))
        if known is not None:
            return self._add_tensor(tensor, known[1], known[0])
        raise NotImplementedError(
            f"a tensor of shape {tuple(tensor.shape)} that is neither an input, a module parameter or buffer, "
            "nor read from a global or closure reached a torch operation; thunder cannot tell whether it "
            "changes between calls. Pass it as an argument of the compiled function."
        )


def _source_name(source: Source) -> str | None:
    if isinstance(source, (AttributeSource, ModuleEntrySource)):
        return _sanitize(source.name)
    if isinstance(source, GlobalSource):
        return _sanitize(source.name)
    return None


def _walk_modules(module: torch.nn.Module, name: str, source: Source, seen: set[int]) -> Any:
    """``(qualified name, module, source)`` for ``module`` and its submodules, each once.

    Sources follow the real attribute names, never a qualified name split on dots: a name may hold
    a dot itself (``module._parameters["a.b"]``).
    """
    if id(module) in seen:
        return
    seen.add(id(module))
    yield name, module, source
    for child_name, child in module._modules.items():
        if child is not None:
            qualified = f"{name}.{child_name}" if name else child_name
            yield from _walk_modules(
                child, qualified, ModuleEntrySource(source, "_modules", child_name), seen
            )


def _submodule_sources(fn: Any, root: Source) -> list[tuple[Any, Source]]:
    """Submodules by qualified name, so that their hooks and identity are checked however they are reached
    (``enumerate(self.layers)`` hands out submodules the VM cannot trace back to ``self``)."""
    if not isinstance(fn, torch.nn.Module):
        return []
    return [(submodule, source) for name, submodule, source in _walk_modules(fn, "", root, set()) if name]


def _module_state(module: torch.nn.Module, root: Source) -> dict[int, tuple[str, Source]]:
    state: dict[int, tuple[str, Source]] = {}
    for prefix, submodule, source in _walk_modules(module, "", root, set()):
        for table in ("_parameters", "_buffers"):  # the tensors themselves, even where a property shadows one
            for name, tensor in getattr(submodule, table).items():
                if tensor is not None and id(tensor) not in state:
                    qualified = f"{prefix}.{name}" if prefix else name
                    state[id(tensor)] = (_sanitize(qualified), ModuleEntrySource(source, table, name))
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


_DISABLE_DYNAMO_FILE = os.path.join("torch", "_compile.py")


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
    module, module_root = _traced_module(fn, root)
    module_state = _module_state(module, module_root) if module is not None else {}
    hooks = TracingHooks(builder, module_state, compile_data.cache_option == "symbolic values")
    computation.tensor_adopter = hooks.adopt
    computation.grad_fetcher = hooks.fetch_grad
    signature_fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
    known_sources = _submodule_sources(module, module_root) if module is not None else []
    if module is not None and module is not fn:  # a bound method's ``self``
        known_sources.append((module, module_root))
    with tracectx(computation), fallback.enabled(compile_data.options.get("fallback", True)):
        compile_data.used_options.add("fallback")
        names = _parameter_names(signature_fn, args)
        # an entry traced without an argument (a default was used) must not accept a call passing it
        builder.add_value_guard(len(args), LengthSource(CallSource("args")))
        builder.add_value_guard(tuple(kwargs), KeysSource(CallSource("kwargs")))
        try:
            proxied_args = tuple(hooks.on_load(a, ArgumentSource(i), names[i]) for i, a in enumerate(args))
            proxied_kwargs = {k: hooks.on_load(v, KeywordSource(k), k) for k, v in kwargs.items()}
            arg_sources = [root] + [ArgumentSource(i) for i in range(len(args))]
            kwarg_sources = {k: KeywordSource(k) for k in kwargs}
            result = interpret(_call, (fn, *proxied_args), proxied_kwargs, hooks,
                               arg_sources=arg_sources, kwarg_sources=kwarg_sources,
                               known_sources=[*known_sources, *hooks.argument_sources])  # fmt: skip
            output = _adopt_outputs(result, hooks)
            where = f" (returned by {getattr(fn, '__qualname__', type(fn).__qualname__)})"
            created = created_objects(output, hooks.source_of, where)
            returned = _returned_inputs(output, hooks, builder)
            _accumulate_input_gradients(computation, hooks)
            # final states, before undoing them
            epilogue, values = hooks.side_effects.build(hooks.adopt, returned, created)
        finally:
            hooks.side_effects.undo()  # the user's objects as they were; the epilogue writes them
        if epilogue is None:
            output = inplace_finish.finish(computation, output)  # current values; the epilogue's copies
        else:  # the values the epilogue writes are outputs too
            output = inplace_finish.finish(computation, (output, values))
        computation.record(BoundSymbol(RETURN, (output,)))
    computation.header = "Constructed by the interpreter"
    check_grad_mode_regions(computation)
    if ran_backward(computation) or not (
        torch.is_grad_enabled()
        and any(p.requires_grad for p in computation.args if isinstance(p, TensorProxy))
    ):  # a program that ran loss.backward() itself is not differentiated again
        computation.decorators = ["@torch.no_grad()"]
    return FrontendResult(builder.finish(), computation, hooks.instruction_log or [], epilogue)


def _accumulate_input_gradients(computation: Trace, hooks: TracingHooks) -> None:
    """What the program did to its inputs' ``.grad``, replayed by the epilogue (inline_backward.py).

    Eager's backward would go on into the graph that made a non-leaf input, which a compiled program
    cannot reach: an input that gets a gradient must be a leaf, checked by the prologue on every call."""
    for name, state in computation.input_gradients.items():
        tensor, source = hooks.input_tensors[name]
        if state.from_backward and not tensor.is_leaf:
            raise NotImplementedError(
                f"loss.backward() inside thunder.jit reached {source.describe()}, a tensor made by operations "
                "outside the jitted function (not a leaf), and thunder cannot continue the backward into them: "
                "pass a leaf tensor, or call backward outside the jitted function"
            )
        if state.from_backward and not isinstance(tensor, torch.nn.Parameter):  # a parameter stays a leaf
            hooks.builder.add_value_guard(True, AttributeSource(source, "is_leaf"))
        if state.assigned:
            hooks.side_effects.assign_grad(source, state.final_value())
        elif state.added is not None:
            hooks.side_effects.accumulate_grad(source, state.added)


def _traced_module(fn: Any, root: Source) -> tuple[torch.nn.Module | None, Source]:
    """The module whose parameters and buffers are inputs: ``fn`` itself, or the ``self`` of a bound
    method (``model.forward = thunder.jit(model.forward)``), fetched as a constant like ``fn``."""
    if isinstance(fn, torch.nn.Module):
        return fn, root
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.MethodType) and isinstance(owner, torch.nn.Module):
        return owner, ConstantSource(owner, "the compiled method's module")
    return None, root


def _returned_inputs(output: Any, hooks: TracingHooks, builder: PrologueBuilder) -> list[tuple[str, Source]]:
    """Objects of the call's inputs that the program returns (a ``StaticCache`` in a ``ModelOutput``), each
    as where it sits in the output (``['cache']``) and where the call got it from.

    The computation would return the object it was traced with, a constant, and a later call passing
    another object of the same kind would get the first one back. The epilogue puts the call's own
    object there instead; where it sits in a tuple, which cannot be written, the prologue checks its
    identity (another object, another entry).
    """
    found: list[tuple[str, Source]] = []

    def visit(value: Any, path: str, writable: bool) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}[{key!r}]", writable and type(key) in (str, int))
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(item, f"{path}[{index}]", writable and isinstance(value, list))
        elif is_guarded_by_attributes(value):
            source = hooks.source_of(value)
            if source is None:
                return
            if writable:
                found.append((path, source))
            else:
                builder.add_identity_guard(value, source)

    visit(output, "", True)
    return found


def _adopt_outputs(result: Any, hooks: TracingHooks) -> Any:
    from thunder.core.pytree import tree_map

    def adopt(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return hooks.adopt(x)
        if isinstance(x, dtypes.dtype):  # a proxy's dtype: the caller gets torch's, as in eager mode
            return dtypes.to_torch_dtype(x)
        if isinstance(x, devices.Device):
            return devices.to_torch_device(x)
        return x

    return tree_map(adopt, result)
