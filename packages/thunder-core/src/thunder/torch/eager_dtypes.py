"""Calls that eager refuses for their tensors' dtypes are refused while tracing too.

Eager's kernels are built for some dtypes only: ``F.gelu`` of an integer tensor raises
``NotImplementedError: "GeluKernelImpl" not implemented for 'Long'``, ``F.relu`` of a bool tensor a
``RuntimeError``, and they raise where the call is, also when its result is never read. thunder's
symbols take any dtype, and dead-code elimination drops a result nobody reads, so such a program
answered where eager raised (found by the long fuzzer: ``v2 = F.gelu((a > 0) + 2)``, unused). A
returned result raised too, but only when the torch executor ran the kernel, and a decomposition
into prims took any dtype (``F.logsigmoid`` of an integer tensor answered).

So a call with an integer or bool tensor first runs eager's function on empty CPU tensors of the
same dtypes and ranks standing for the tensors, and its dtype error is raised here, word for word.
Only for CPU tensors: a kernel's dtypes differ between devices (CUDA's ``addmm`` takes no integers)
and the stand-ins are CPU tensors. Other errors of the stand-ins (their sizes) are not eager's answer
to the call and are left alone.
"""

from __future__ import annotations

from typing import Any

from thunder.core import dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.torch.stand_ins import error_on_stand_ins

__all__ = ["check_eager_dtypes"]

# how eager words a kernel's refusal of a dtype
_DTYPE_MESSAGES = (
    "not implemented for '",
    "Boolean inputs not supported",
    "on a bool tensor is not supported",
    "with a bool tensor is not supported",
    "Expected a floating point or complex tensor",
)


def check_eager_dtypes(torch_fn: Any, args: tuple, kwargs: dict) -> None:
    """Raise eager's error if ``torch_fn`` refuses the dtypes of the call's tensors (see the module)."""
    leaves = tree_leaves((args, kwargs))
    tensors = [leaf for leaf in leaves if isinstance(leaf, TensorProxy)]
    if all(dtypes.is_float(t.dtype) or dtypes.is_complex(t.dtype) for t in tensors):
        return  # no tensor, or floating ones only: nothing dtype-specific to ask
    if any(t.device.type != "cpu" for t in tensors):
        return
    error = error_on_stand_ins(torch_fn, args, kwargs)
    if isinstance(error, (NotImplementedError, RuntimeError)) and any(
        w in str(error) for w in _DTYPE_MESSAGES
    ):
        raise type(error)(str(error)) from None
