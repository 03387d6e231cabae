"""What the operator executors of Triton kernels share (``triton_gemv``, ``triton_norms``).

They are available where triton is installed and a CUDA device is, or on the CPU under Triton's
interpreter (``TRITON_INTERPRET=1``, how the tests run their kernels), and their operators take
torch's values (dtypes, devices) as arguments. Nothing here imports triton.
"""

from __future__ import annotations

import importlib.util

import torch

from thunder.core.executor import OperatorExecutor, to_torch_arguments

__all__ = ["TritonOperatorExecutor", "interpret_mode", "kernel_device_type"]


def interpret_mode() -> bool:
    from thunder.executors.triton.cache import interpret_mode as interpreting

    return interpreting()


def kernel_device_type() -> str:
    """The device the kernels run on here: ``"cpu"`` in Triton's interpreter, else ``"cuda"``."""
    return "cpu" if interpret_mode() else "cuda"


class TritonOperatorExecutor(OperatorExecutor):
    def is_available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("triton") is None:
            return False, "triton is not installed (pip install 'thunder[triton]')"
        if torch.cuda.is_available() or interpret_mode():
            return True, ""
        return False, "no CUDA device (set TRITON_INTERPRET=1 to run Triton's interpreter on the CPU)"

    def convert_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return to_torch_arguments(args, kwargs)
