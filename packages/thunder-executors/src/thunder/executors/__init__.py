"""thunder's executors: importing this package registers the built-in ones.

Built-in executors register in code here, and also through the entry-point group
``thunder.executors`` for installed distributions; third-party executors use only the entry point.
"""

from thunder.core.executor import (
    ExecutorInfo,
    get_all_executors,
    get_default_executors,
    list_executors,
    set_default_executors,
)
from thunder.executors import torchex
from thunder.executors.gemv import executor as triton_gemv_executor
from thunder.executors.norms import executor as triton_norms_executor
from thunder.executors.nvfuser import executor as nvfuser_executor
from thunder.executors.torch_compile import executor as torch_compile_executor
from thunder.executors.torchex import executor as torch_executor
from thunder.executors.triton import executor as triton_executor

__all__ = [
    "torchex",
    "torch_executor",
    "triton_executor",
    "triton_gemv_executor",
    "triton_norms_executor",
    "nvfuser_executor",
    "torch_compile_executor",
    "list_executors",
    "get_all_executors",
    "get_default_executors",
    "set_default_executors",
    "ExecutorInfo",
]
