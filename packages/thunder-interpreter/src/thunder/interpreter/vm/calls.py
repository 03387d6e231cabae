"""Call semantics: what the VM does with a callable at every CALL.

In order: the hooks' lookaside, the VM's own lookasides (builtins that call back into user
code), nn.Module dispatch to ``forward``, interpretation of Python code, and finally a native
call for everything without Python code (after ``check_opaque_call``).
"""

from __future__ import annotations

import collections
import functools
import inspect
import sys
from types import BuiltinMethodType, FunctionType, MethodType
from typing import Any

from thunder.interpreter.vm.errors import InterpreterError

__all__ = [
    "call",
    "call_opaque",
    "report_mutation",
    "interpret_function",
    "lookup_type",
    "MISSING",
    "DEFER",
    "is_own_code",
]

_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_GENERATOR_FLAG = inspect.CO_GENERATOR
_OWN_PACKAGE = "thunder.interpreter.vm"
MISSING = object()
DEFER = object()  # an internal lookaside declining: call the builtin as an opaque call


def lookup_type(cls: type, name: str) -> Any:
    """The raw class attribute (descriptor) the way ``_PyType_Lookup`` finds it."""
    for klass in cls.__mro__:
        namespace = klass.__dict__
        if name in namespace:
            return namespace[name]
    return MISSING


def is_own_code(function: FunctionType) -> bool:
    """The VM's own helpers (interpreted generators, iterators) always run natively, and so does torch's
    symbolic-size machinery (``torch.SymInt``'s operators, ``sym_max``, the ShapeEnv): what it does
    with a symbolic size is recorded as a guard of the compile (thunder.core.symbolic_shapes), not as
    side effects on its objects for the epilogue to replay."""
    module = function.__module__
    if module is None:
        return False
    if module.startswith(_OWN_PACKAGE) or module.startswith(_SYMBOLIC_MODULES):
        return True
    return module == "torch" and function.__qualname__.startswith(_SYMBOLIC_NAMES)


_SYMBOLIC_MODULES = (
    "torch.fx.experimental.sym_node",
    "torch.fx.experimental.symbolic_shapes",
    "torch.utils._sympy",
)
_SYMBOLIC_NAMES = ("SymInt.", "SymFloat.", "SymBool.", "sym_")


def call(context: Any, fn: Any, args: tuple, kwargs: dict) -> Any:
    fn = context.hooks.unwrapped(fn)
    replacement = context.hooks.lookaside(fn)
    if replacement is not None:
        return replacement(*args, **kwargs)
    fn_type = type(fn)
    if fn_type is FunctionType:
        if is_own_code(fn):
            return fn(*args, **kwargs)
        return interpret_function(context, fn, args, kwargs)
    from thunder.interpreter.vm.lookasides import INTERNAL_LOOKASIDES

    internal = INTERNAL_LOOKASIDES.get(id(fn))
    if internal is not None and internal[0] is fn:
        result = internal[1](context, args, kwargs)
        if result is not DEFER:
            return result
        return call_opaque(context, fn, args, kwargs)
    if fn_type is MethodType:
        function = fn.__func__
        if type(function) is FunctionType and is_own_code(function):
            return fn(*args, **kwargs)
        return call(context, function, (fn.__self__, *args), kwargs)
    return _call_other(context, fn, fn_type, args, kwargs)


def _call_other(context: Any, fn: Any, fn_type: type, args: tuple, kwargs: dict) -> Any:
    if fn_type is functools.partial:
        return call(context, fn.func, fn.args + args, {**fn.keywords, **kwargs})
    if isinstance(fn, type):
        return _construct(context, fn, args, kwargs)
    if fn_type is staticmethod:
        return call(context, fn.__func__, args, kwargs)
    instead = context.hooks.interpreted_instead(fn, args, kwargs)
    if instead is not None:
        return call(context, instead, args, kwargs)
    if is_torch_module(fn):
        return _call_module(context, fn, args, kwargs)
    call_method = lookup_type(fn_type, "__call__")
    if type(call_method) is FunctionType and not is_own_code(call_method):
        return call(context, call_method, (fn, *args), kwargs)
    return call_opaque(context, fn, args, kwargs)


_DICT_VIEW_TYPES: tuple[type, type] = (type({}.items()), type({}.values()))


_MUTABLE_CONTAINERS = (list, dict, set, collections.OrderedDict, collections.defaultdict, collections.deque)
_MUTATING_METHODS = frozenset(
    "append extend insert pop remove clear sort reverse update setdefault popitem add discard "
    "difference_update intersection_update symmetric_difference_update appendleft extendleft popleft "
    "rotate move_to_end __setitem__ __delitem__ __iadd__ __ior__ __iand__ __isub__ __ixor__".split()
)


_KEYED = (dict, set, frozenset)
_KEYED_METHODS = frozenset("get setdefault pop __getitem__ __contains__ add discard remove".split())


def check_lookup_key(context: Any, container: Any, key: Any, operation: str) -> Any:
    """The key to look ``container`` up by: a dict or set from outside the call looked up by a key of the
    program's making is checked (hooks decide); a symbolic int is its value (``hashable``)."""
    if type(key) is int or type(key) is str or not isinstance(container, _KEYED):
        return key
    if context.provenance.source_of(container) is not None:
        context.hooks.check_lookup_key(container, key, operation)
    return hashable(key)


def hashable(value: Any) -> Any:
    """A symbolic int (``torch.SymInt`` & co., thunder.core.symbolic_shapes) as a dict key or set item is
    the value it was traced with, guarded: such a lookup is a decision on the value (torch's SymInt
    cannot be hashed). Native code hashing one (``functools.lru_cache``, einops' cache of shapes) still
    gets torch's TypeError, which such code catches."""
    concrete = symbolic_number_type(value)
    return concrete(value) if concrete is not None else value


def symbolic_number_type(value: Any) -> type | None:
    """``int`` (``float``, ``bool``) for a symbolic number, the type eager has there; None for anything else."""
    torch = sys.modules.get("torch")  # none without torch: the VM runs and is tested without it
    if torch is None:
        return None
    return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}.get(type(value))


def report_mutation(context: Any, container: Any, operation: str) -> None:
    """Tell the hooks that a container read from outside the call is about to change."""
    source = context.provenance.source_of(container)
    if source is not None:
        context.hooks.on_mutation(container, source, operation)


def call_opaque(context: Any, fn: Any, args: tuple, kwargs: dict) -> Any:
    if type(fn) is BuiltinMethodType and fn.__name__ in _KEYED_METHODS and args:
        args = (check_lookup_key(context, fn.__self__, args[0], f".{fn.__name__}()"), *args[1:])
    if type(fn) is BuiltinMethodType and fn.__name__ in _MUTATING_METHODS:
        owner = fn.__self__
        if isinstance(owner, _MUTABLE_CONTAINERS):
            report_mutation(context, owner, fn.__name__)
        elif _is_unreplayed_container(owner) and context.provenance.source_of(owner) is not None:
            raise _unreplayed_mutation_error(context, owner, fn.__name__)
    context.hooks.check_opaque_call(fn, args, kwargs)
    result = fn(*args, **kwargs)
    if type(result) in _DICT_VIEW_TYPES and type(fn) is BuiltinMethodType:
        _remember_dict_view(context, fn, result)
    return result


def _is_unreplayed_container(owner: Any) -> bool:
    """A mutable C container whose in-place changes the epilogue cannot replay (a ``bytearray``, an
    ``array.array``): changed while tracing, it would change once per compile, not once per call."""
    return isinstance(owner, bytearray) or type(owner).__module__ == "array"


def _type_name(owner: Any) -> str:
    owner_type = type(owner)
    return (
        owner_type.__name__
        if owner_type.__module__ == "builtins"
        else f"{owner_type.__module__}.{owner_type.__name__}"
    )


def _current_location(context: Any) -> str | None:
    """Where the interpreted program is now (file:line of the innermost frame), if it runs one."""
    from thunder.interpreter.vm.errors import location_of

    if not context.frames:
        return None
    frame = context.frames[-1]
    return location_of(frame, frame.current_op())


def _unreplayed_mutation_error(context: Any, owner: Any, method: str) -> InterpreterError:
    location = _current_location(context)
    where = f" (at {location})" if location else ""
    return InterpreterError(
        f"thunder cannot replay .{method}() on the {_type_name(owner)} read from outside the call "
        f"({context.provenance.source_of(owner).describe()}): its in-place changes are not recorded as side "
        f"effects{where}. Change it outside the jitted function, or use a list"
    )


def _remember_dict_view(context: Any, method: Any, view: Any) -> None:
    """``d.items()`` / ``d.values()`` on a sourced dict: iterating the view reports ``d[key]``."""
    mapping = getattr(method, "__self__", None)
    if type(mapping) is dict:
        source = context.provenance.source_of(mapping)
        if source is not None:
            context.dict_views[id(view)] = (view, mapping, source)


def interpret_function(context: Any, function: FunctionType, args: tuple, kwargs: dict) -> Any:
    from thunder.interpreter.vm.frame import make_frame
    from thunder.interpreter.vm.loop import run_frame

    code = function.__code__
    if code.co_flags & _ASYNC_FLAGS:
        raise _async_error(context, function)
    frame = make_frame(context, function, args, kwargs)
    if code.co_flags & _GENERATOR_FLAG:
        from thunder.interpreter.vm.generators import InterpretedGenerator

        return InterpretedGenerator(frame)
    run_frame(frame)
    return frame.result


def _async_error(context: Any, function: FunctionType) -> InterpreterError:
    from thunder.interpreter.vm.errors import qualname_of

    code = function.__code__
    where = f"{code.co_filename}:{code.co_firstlineno}"
    location = _current_location(context)
    called_from = f", called at {location}" if location else ""
    return InterpreterError(
        f"thunder's interpreter does not support async functions or coroutines: "
        f"{qualname_of(code, function)} defined at {where}{called_from}"
    )


def _construct(context: Any, cls: type, args: tuple, kwargs: dict) -> Any:
    """``type.__call__`` spelled out so that Python ``__new__``/``__init__`` are interpreted."""
    meta_call = lookup_type(type(cls), "__call__")
    if type(meta_call) is FunctionType:
        return call(context, meta_call, (cls, *args), kwargs)
    new = lookup_type(cls, "__new__")
    if isinstance(new, staticmethod):
        new = new.__func__
    init = lookup_type(cls, "__init__")
    python_new = type(new) is FunctionType
    if not python_new and type(init) is not FunctionType:
        return call_opaque(context, cls, args, kwargs)
    if python_new:
        instance = call(context, new, (cls, *args), kwargs)
    elif new is object.__new__:
        instance = object.__new__(cls)
    else:
        instance = new(cls, *args, **kwargs)
    if not isinstance(instance, cls):
        return instance
    init = lookup_type(type(instance), "__init__")
    if type(init) is FunctionType:
        result = call(context, init, (instance, *args), kwargs)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
    else:
        type(instance).__init__(instance, *args, **kwargs)
    return instance


def is_torch_module(value: Any) -> bool:
    module = sys.modules.get("torch.nn.modules.module")
    return module is not None and isinstance(value, module.Module)


_MODULE_HOOK_ATTRIBUTES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOK_ATTRIBUTES = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


def _call_module(context: Any, module: Any, args: tuple, kwargs: dict) -> Any:
    """Hook-free modules go straight to ``forward``: ``__call__`` adds nothing but hooks."""
    torch_module = sys.modules["torch.nn.modules.module"]
    source = context.provenance.source_of(module)
    if source is not None:  # the trace depends on which hooks there are: report them to be checked
        from thunder.core.sources import AttributeSource, GlobalSource

        for name in _MODULE_HOOK_ATTRIBUTES:
            context.load(getattr(module, name, None), AttributeSource(source, name))
        # and on torch's global module hooks (register_module_forward_hook): eager runs them for every
        # module call, so one registered after the compile must make the prologue fail
        for name in _GLOBAL_HOOK_ATTRIBUTES:
            context.load(getattr(torch_module, name, None), GlobalSource(torch_module.__dict__, name))
    has_hooks = any(getattr(module, name, None) for name in _MODULE_HOOK_ATTRIBUTES) or any(
        getattr(torch_module, name, None) for name in _GLOBAL_HOOK_ATTRIBUTES
    )
    if has_hooks:
        return call(context, type(module).__call__, (module, *args), kwargs)
    return call(context, type(module).forward, (module, *args), kwargs)
