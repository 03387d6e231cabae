"""A frontend without an interpreter: calls the function itself with proxies for its tensors.

The function must be written in thunder's torch language (``thunder.torch``) or only use tensor
operators and methods, since its torch calls are not redirected. It serves packages that cannot
depend on the interpreter (tests of core and executors) and programs that are already flat lists of
torch-language calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder.core.inplace_finish import finish as finish_mutations
from thunder.core.pipeline import CompileData, FrontendResult
from thunder.core.prologue import PrologueBuilder
from thunder.core.proxies import TensorProxy
from thunder.core.sources import ArgumentSource, ItemSource, KeywordSource, Source
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, tracectx

__all__ = ["direct_frontend"]


def _proxify(value: Any, source: Source, builder: PrologueBuilder) -> Any:
    if isinstance(value, torch.Tensor):
        return builder.add_tensor(value, source)
    if type(value) in (tuple, list):
        return type(value)(_proxify(v, ItemSource(source, i), builder) for i, v in enumerate(value))
    builder.add_value_guard(value, source)
    return value


def direct_frontend(fn: Callable, args: tuple, kwargs: dict, compile_data: CompileData) -> FrontendResult:
    computation = Trace("computation")
    builder = PrologueBuilder(computation)
    with tracectx(computation):
        proxied_args = [_proxify(a, ArgumentSource(i), builder) for i, a in enumerate(args)]
        proxied_kwargs = {k: _proxify(v, KeywordSource(k), builder) for k, v in kwargs.items()}
        output = fn(*proxied_args, **proxied_kwargs)
        output = finish_mutations(computation, output)  # in-place changes: current values, epilogue
        computation.record(BoundSymbol(RETURN, (output,)))
    computation.header = "Constructed by the direct frontend"
    if not any(isinstance(p, TensorProxy) and p.requires_grad for p in computation.args):
        computation.decorators = ["@torch.no_grad()"]
    return FrontendResult(builder.finish(), computation)
