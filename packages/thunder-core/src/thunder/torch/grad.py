"""Ops that concern gradients rather than values: ``detach``, and the autograd entry points.

``detach`` is tagged ``stop_gradient``: the autograd transform treats its output as a constant, as
eager does, and the value is the input's.

``loss.backward()`` inside a traced program records the gradients into the same program
(``core/transforms/inline_backward.py``). ``torch.autograd.backward`` and ``torch.autograd.grad``
raise: a compiled program runs inside its own autograd node, where they would compute nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from thunder.core import prims
from thunder.core.proxies import TensorProxy, register_tensor_method
from thunder.core.transforms.inline_backward import record_backward
from thunder.torch.registry import torchsymbol

STOP_GRADIENT = frozenset({"stop_gradient"})


@torchsymbol(torch.detach, torch.Tensor.detach, method="detach", tags=STOP_GRADIENT)
def detach(input: TensorProxy) -> TensorProxy:
    # A fresh proxy (not ``a`` itself), so that the stop lies between two names in the trace.
    return prims.convert_element_type(input, input.dtype)


# ``x.data``: eager's tensor sharing ``x``'s memory outside autograd, as ``x.detach()`` (a write through
# it reaches ``x``, unseen by autograd: core/inplace.py)
register_tensor_method("data", detach)


def _backward_inside_jit(construct: str) -> NotImplementedError:
    return NotImplementedError(
        f"{construct} inside a function compiled by thunder.jit is not supported: use loss.backward() "
        "(inside or outside the jitted function), or compile the whole step, optimizer included, with "
        "torch.compile(step, backend=thunder.dynamo.ThunderCompiler())"
    )


register_tensor_method("backward", record_backward)


@torchsymbol(torch.autograd.backward)
def autograd_backward(*args: Any, **kwargs: Any) -> None:
    raise _backward_inside_jit("torch.autograd.backward()")


@torchsymbol(torch.autograd.grad)
def autograd_grad(*args: Any, **kwargs: Any) -> None:
    raise _backward_inside_jit("torch.autograd.grad()")
