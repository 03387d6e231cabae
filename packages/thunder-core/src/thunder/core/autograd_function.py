"""Running a forward/backward pair under PyTorch's autograd.

``ThunderFunction`` is a ``torch.autograd.Function``: its forward runs the compiled forward trace
and keeps what it returns for the backward; its backward runs the compiled backward trace. Outputs
therefore carry ``grad_fn=<ThunderFunctionBackward>``, and gradients reach the inputs (and a
module's parameters, which are inputs of the computation) through PyTorch's engine, so that
``loss.backward()`` and any optimizer work as usual.

The backward is differentiable only once: the saved tensors were computed without recording a
graph, so a second-order gradient through them would be silently wrong; PyTorch raises instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder.core.pytree import tree_flatten, tree_unflatten

__all__ = ["ThunderFunction", "differentiable_callable"]


class ThunderFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, pair: _CompiledPair, *inputs: Any) -> tuple:  # type: ignore[override]
        output, saved = pair.forward(*inputs)
        flat_output, pair.output_spec = tree_flatten(output)
        ctx.pair = pair
        # Python numbers (cache="symbolic values") cannot go through save_for_backward
        ctx.save_for_backward(*(s for s in saved if isinstance(s, torch.Tensor) or s is None))
        ctx.saved_numbers = {
            i: s for i, s in enumerate(saved) if not (isinstance(s, torch.Tensor) or s is None)
        }
        ctx.mark_non_differentiable(
            *(
                t
                for t in flat_output
                if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex())
            )
        )
        # autograd.Function returns a flat tuple; Python values among the outputs travel as they are.
        return tuple(flat_output)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, *grads: Any) -> tuple:
        pair: _CompiledPair = ctx.pair
        cotangents = [grads[i] for i in pair.cotangent_outputs]
        tensors = iter(ctx.saved_tensors)
        count = len(ctx.saved_tensors) + len(ctx.saved_numbers)
        saved = [ctx.saved_numbers[i] if i in ctx.saved_numbers else next(tensors) for i in range(count)]
        return (None, *pair.backward(*saved, *cotangents))


class _CompiledPair:
    def __init__(self, forward: Callable, backward: Callable, cotangent_outputs: list[int]):
        self.forward = forward
        self.backward = backward
        self.cotangent_outputs = cotangent_outputs  # flat output positions the backward takes gradients of
        self.output_spec: Any = None


def differentiable_callable(forward: Callable, backward: Callable, cotangent_outputs: list[int]) -> Callable:
    """A function of the computation's inputs that runs ``forward`` under a ``ThunderFunction``."""
    pair = _CompiledPair(forward, backward, cotangent_outputs)

    def run(*inputs: Any) -> Any:
        flat_output = ThunderFunction.apply(pair, *inputs)
        return tree_unflatten(list(flat_output), pair.output_spec)

    return run
