"""ThunderModule: the module ``thunder.jit`` returns for an ``nn.Module``.

It holds the original module as ``_model``, so parameters and buffers are shared, not copied: an
optimizer stepping either one updates both. State queries are answered with the original module's
names (``fc1.weight``, not ``_model.fc1.weight``), so the two are interchangeable.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["ThunderModule"]


class ThunderModule(torch.nn.Module):
    """A wrapper nn.Module subclass, returned by ``thunder.jit``; not meant to be built by hand."""

    def __init__(self, model: torch.nn.Module, compiled_model_call: Callable):
        super().__init__()
        self._model = model
        self._thunder_jitted = compiled_model_call

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._thunder_jitted(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled call, with the hooks registered on this wrapper; torch's global module hooks
        (``register_module_forward_hook``) run inside the compiled program, for the wrapped module and
        each submodule as in eager, and not once more for the wrapper."""
        if not any(self.__dict__[table] for table in _HOOK_TABLES):
            return self._thunder_jitted(*args, **kwargs)
        if any(getattr(_torch_module_globals, table) for table in _GLOBAL_HOOK_TABLES):
            raise NotImplementedError(
                "this ThunderModule has hooks of its own and torch has global module hooks: calling it would "
                "run the global ones once more than eager (for the wrapper); register the hooks on the "
                "wrapped module instead"
            )
        return super().__call__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        """Anything else is the wrapped module's: ``config``, ``device``, ``generate``, ...

        A method of the wrapped module runs on the wrapped module (its ``self``, ``super()`` and the
        attributes it sets are the module's own), with the module's ``forward`` routed to the compiled
        one for the duration of the call: ``generate`` calling ``self(...)`` runs compiled code.
        """
        try:
            return super().__getattr__(name)  # nn.Module's tables: _model itself
        except AttributeError:
            modules: dict[str, torch.nn.Module | None] = self.__dict__.get("_modules", {})
            model = modules.get("_model")
            if model is None or name.startswith("__"):
                raise
        value = getattr(model, name)
        if isinstance(value, types.MethodType) and value.__self__ is model:
            return _routing_forward(self, model, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        """An attribute of the wrapped module that this wrapper does not have is set on the module."""
        model = self.__dict__.get("_modules", {}).get("_model")
        if model is not None and not _has_own_attribute(self, name) and hasattr(model, name):
            setattr(model, name, value)
        else:
            super().__setattr__(name, value)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator:
        return self._model.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator:
        return self._model.named_buffers(prefix, recurse, remove_duplicate)

    def get_parameter(self, target: str) -> torch.nn.Parameter:
        return self._model.get_parameter(target)

    def get_buffer(self, target: str) -> torch.Tensor:
        return self._model.get_buffer(target)

    def get_submodule(self, target: str) -> torch.nn.Module:
        return self._model.get_submodule(target)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Disable gradient synchronization under data parallelism; without it, this has no effect.

        Backward calls inside run the backward trace without collectives, so gradients accumulate
        locally; on exit the accumulated gradients are synchronized (``thunder.distributed.ddp``:
        averaged over the processes). Use it around each group of accumulation steps.
        """
        from thunder.core.compile_transform import compile_transforms, skip_grad_sync
        from thunder.core.pipeline import compile_data

        transforms = compile_transforms(compile_data(self).transforms)
        for transform in transforms:
            transform.enter_no_sync(self._model)
        with skip_grad_sync():
            yield
        for transform in transforms:
            transform.exit_no_sync(self._model)


def _has_own_attribute(module: torch.nn.Module, name: str) -> bool:
    tables = ("_parameters", "_buffers", "_modules")
    return (
        name in module.__dict__
        or hasattr(type(module), name)
        or any(name in module.__dict__.get(table, ()) for table in tables)
    )


_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOK_TABLES = tuple(f"_global{table}" for table in _HOOK_TABLES)
_torch_module_globals = torch.nn.modules.module


def _routing_forward(thunder_module: ThunderModule, model: torch.nn.Module, method: Callable) -> Callable:
    """``method`` (bound to ``model``) run with ``model.forward`` set to the compiled forward meanwhile.

    The routing is an instance attribute that ``nn.Module.__call__`` finds before the class's
    ``forward``; it is removed when the method returns (``model`` used directly stays eager), and
    while the compiled function runs (its tracing interprets the class's ``forward``: no recursion).
    """

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        namespace = model.__dict__
        if getattr(namespace.get("forward"), "_thunder_routing", None) is thunder_module:
            return method(*args, **kwargs)  # already routed (a method calling another through us)
        previous = namespace.get("forward", _ABSENT)
        namespace["forward"] = _compiled_forward(thunder_module, model)
        # transformers' generate() compiles the forward with torch.compile on its own (a static cache on
        # CUDA): thunder compiles it here, so that is turned off for the call (the model's own criteria
        # otherwise; the criteria method is the one transformers consults)
        criteria = namespace.get(_HF_AUTO_COMPILE, _ABSENT)
        auto_compiles = hasattr(type(model), _HF_AUTO_COMPILE)
        if auto_compiles:
            namespace[_HF_AUTO_COMPILE] = _never_auto_compile
        try:
            return method(*args, **kwargs)
        finally:
            _restore(namespace, "forward", previous)
            if auto_compiles:
                _restore(namespace, _HF_AUTO_COMPILE, criteria)

    return call


_HF_AUTO_COMPILE = "_valid_auto_compile_criteria"


def _never_auto_compile(*args: Any, **kwargs: Any) -> bool:
    return False


def _restore(namespace: dict, name: str, previous: Any) -> None:
    if previous is _ABSENT:
        namespace.pop(name, None)
    else:
        namespace[name] = previous


_ABSENT = object()


def _compiled_forward(thunder_module: ThunderModule, model: torch.nn.Module) -> Callable:
    original = type(model).forward.__get__(model)

    @functools.wraps(original)  # generate() reads the forward's signature
    def forward(*args: Any, **kwargs: Any) -> Any:
        if any(getattr(model, table, None) for table in _HOOK_TABLES):
            # nn.Module.__call__ ran them already, and the compiled call would run them again
            raise NotImplementedError(
                f"{type(model).__name__} has hooks of its own, which a method called through the ThunderModule "
                "would run twice; compile the forward alone instead: model.forward = thunder.jit(model.forward)"
            )
        if any(getattr(_torch_module_globals, table) for table in _GLOBAL_HOOK_TABLES):
            raise NotImplementedError(
                f"torch has global module hooks (register_module_forward_hook and the like), which a method of "
                f"{type(model).__name__} called through the ThunderModule would run twice for the module; "
                "compile the forward alone instead: model.forward = thunder.jit(model.forward)"
            )
        namespace = model.__dict__
        routing = namespace.pop("forward", None)
        try:
            return thunder_module._thunder_jitted(*args, **kwargs)
        finally:
            if routing is not None:
                namespace["forward"] = routing

    forward._thunder_routing = thunder_module  # type: ignore[attr-defined]
    return forward
