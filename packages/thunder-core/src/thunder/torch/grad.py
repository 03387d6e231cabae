"""Ops that concern gradients rather than values: ``detach``, and the autograd entry points.

``detach`` is tagged ``stop_gradient``: the autograd transform treats its output as a constant, as
eager does, and the value is the input's.

``loss.backward()``, ``torch.autograd.backward`` and ``torch.autograd.grad`` inside a jitted
function raise: a compiled program runs inside its own autograd node, where they would compute
nothing (``loss.backward()`` fell back to PyTorch and left every ``.grad`` unset, silently).
Calling ``backward`` on the jitted function's output is the supported spelling.
"""

from __future__ import annotations

from typing import Any

import torch
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol

STOP_GRADIENT = frozenset({"stop_gradient"})


@torchsymbol(torch.detach, torch.Tensor.detach, method="detach", tags=STOP_GRADIENT)
def detach(input: TensorProxy) -> TensorProxy:
    # A fresh proxy (not ``a`` itself), so that the stop lies between two names in the trace.
    return prims.convert_element_type(input, input.dtype)


def _backward_inside_jit(construct: str) -> NotImplementedError:
    return NotImplementedError(
        f"{construct} inside a function compiled by thunder.jit is not supported: thunder compiles the "
        "forward and its backward as one autograd node, so call backward on the jitted function's "
        "result instead (loss = jitted(...); loss.backward()) and step the optimizer after it, or compile "
        "the whole step, backward and optimizer included, with "
        "torch.compile(step, backend=thunder.dynamo.ThunderCompiler())"
    )


@torchsymbol(torch.Tensor.backward, method="backward")
def backward(input: TensorProxy, *args: Any, **kwargs: Any) -> None:
    raise _backward_inside_jit("Tensor.backward()")


@torchsymbol(torch.autograd.backward)
def autograd_backward(*args: Any, **kwargs: Any) -> None:
    raise _backward_inside_jit("torch.autograd.backward()")


@torchsymbol(torch.autograd.grad)
def autograd_grad(*args: Any, **kwargs: Any) -> None:
    raise _backward_inside_jit("torch.autograd.grad()")
