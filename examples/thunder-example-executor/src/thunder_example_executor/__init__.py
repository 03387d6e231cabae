"""An example third-party thunder executor.

It claims ``torch.relu`` and runs it as ``torch.clamp_min(a, 0)``. thunder finds it only through the
``thunder.executors`` entry point declared in this package's ``pyproject.toml``; nothing in thunder
names it. Ask for it by name::

    jfn = thunder.jit(fn, executors=["example"])
"""

import torch

import thunder.torch as ltorch
from thunder.core.executor import OperatorExecutor

__all__ = ["executor", "example_relu"]

executor = OperatorExecutor("example", version="0.1")


def _relu(a: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """Runs on real tensors when the compiled program executes.

    An operator registered for a symbol is called with that symbol's arguments, so it takes
    ``F.relu``'s signature; the checker below only lets out-of-place calls through.
    """
    return torch.clamp_min(a, 0)


# `like=` reuses the meta function (shape and dtype rules) of the symbol this operator stands in for.
example_relu = executor.register_operator("example_relu", like=ltorch.relu, fn=_relu)
# The checker gets the symbol's arguments (ltorch.relu mirrors F.relu(input, inplace=False)): this
# executor takes every out-of-place relu it is offered.
executor.register_implementation(ltorch.relu, example_relu, checker=lambda a, inplace=False: not inplace)
