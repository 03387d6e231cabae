"""The Triton executor: fusion regions compiled into generated Triton kernels.

Importing this package registers the executor as ``"triton"``; triton itself is imported only
when a kernel is first compiled. On a machine without CUDA, ``TRITON_INTERPRET=1`` (set before
the first kernel compiles) runs the kernels in Triton's interpreter.
"""

from thunder.core.executor import register_executor
from thunder.executors.triton.executor import TritonExecutor, executor

register_executor(executor)

__all__ = ["TritonExecutor", "executor"]
