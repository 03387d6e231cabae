"""thunder's executors: importing this package registers the built-in ones.

Built-in executors register in code here, and also through the entry-point group
``thunder.executors`` for installed distributions; third-party executors use only the entry point.
"""

from thunder.executors import torchex
from thunder.executors.nvfuser import executor as nvfuser_executor
from thunder.executors.torchex import executor as torch_executor
from thunder.executors.triton import executor as triton_executor

__all__ = ["torchex", "torch_executor", "triton_executor", "nvfuser_executor"]
