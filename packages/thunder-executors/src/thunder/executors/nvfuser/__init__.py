"""The nvFuser executor: fusion regions as nvFuser fusion definitions.

Importing this package registers the executor as ``"nvfuser"``; nvFuser itself is imported only when
a region first runs, so thunder imports without it.
"""

from thunder.core.executor import register_executor
from thunder.executors.nvfuser.executor import NvFuserExecutor, executor

register_executor(executor)

__all__ = ["NvFuserExecutor", "executor"]
