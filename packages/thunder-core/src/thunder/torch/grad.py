"""Ops that concern gradients rather than values: ``detach``.

``detach`` is tagged ``stop_gradient``: the autograd transform treats its output as a constant, as
eager does, and the value is the input's.
"""

from __future__ import annotations

import torch

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.torch.registry import torchsymbol

STOP_GRADIENT = frozenset({"stop_gradient"})


@torchsymbol(torch.detach, torch.Tensor.detach, method="detach", tags=STOP_GRADIENT)
def detach(input: TensorProxy) -> TensorProxy:
    # A fresh proxy (not ``a`` itself), so that the stop lies between two names in the trace.
    return prims.convert_element_type(input, input.dtype)
