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

import operator
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.pytree import LEAF_SPEC, tree_flatten, tree_unflatten

__all__ = ["ThunderFunction", "differentiable_callable"]


class ThunderFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, pair: _CompiledPair, *inputs: Any) -> tuple:
        output, saved = pair.forward(*inputs)
        flat_output, spec = tree_flatten(output)
        ctx.pair = pair
        # Inputs, outputs and views go through save_for_backward: PyTorch then raises if they are
        # changed in place before the backward, and an output saved there makes no reference cycle.
        # The forward's own intermediates (no one else can reach them) stay in a list the backward
        # empties, so that each is freed at its last use in the backward trace.
        # Which saved values are inputs or outputs is known when compiling; views only now, among
        # the other saved tensors.
        saved = list(saved)
        views = [i for i in pair.saved_intermediate_tensors if saved[i]._base is not None]
        tracked = pair.saved_inputs_and_outputs + views if views else pair.saved_inputs_and_outputs
        ctx.save_for_backward(*[saved[i] for i in tracked])
        for i in tracked:
            saved[i] = None
        ctx.tracked_positions = tracked
        ctx.untracked = saved
        if pair.non_differentiable is None:  # output dtypes are the trace's: the same on every call
            pair.non_differentiable = _non_differentiable(flat_output, pair.detached_outputs)
            # so is which outputs are inputs themselves (``return x``, ``x.float()`` of a float ``x``)
            pair.returned_inputs = tuple(
                i
                for i, t in enumerate(flat_output)
                if isinstance(t, torch.Tensor) and any(t is x for x in inputs)
            )
        if pair.non_differentiable:
            ctx.mark_non_differentiable(*[flat_output[i] for i in pair.non_differentiable])
        # autograd.Function returns a flat tuple; Python values among the outputs travel as they are,
        # and so does the last item: the forward's own output structure with the flat outputs, which
        # ``run`` returns as it is when autograd handed back these very tensors (saving a rebuild:
        # a Hugging Face ModelOutput costs about 15 us to construct).
        return (*flat_output, (spec, flat_output, output))

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        # once_differentiable's no_grad and checks matter only when the backward records a graph
        # (create_graph=True); a plain backward runs with grad mode off already.
        if torch.is_grad_enabled():
            return _once_differentiable_backward(ctx, *grads)
        return _backward(ctx, grads)


def _backward(ctx: Any, grads: tuple) -> tuple:
    pair: _CompiledPair = ctx.pair
    arguments = _saved(ctx)
    arguments += [grads[i] for i in pair.cotangent_outputs]
    return (None, *pair.backward(arguments))


@torch.autograd.function.once_differentiable
def _once_differentiable_backward(ctx: Any, *grads: Any) -> tuple:
    return _backward(ctx, grads)


def _saved(ctx: Any) -> list[Any]:
    """What the forward saved, in order; unless the graph is kept, ``ctx`` no longer holds the intermediates."""
    saved = ctx.untracked
    if saved is None:
        raise RuntimeError(
            "thunder: trying to backward through the graph a second time, after its saved tensors "
            "were freed; pass retain_graph=True to the first backward"
        )
    if _keeps_graph():
        saved = list(saved)  # the backward empties the list it gets; a later backward needs this one
    else:
        ctx.untracked = None  # the list returned holds the last references
    for i, tensor in zip(ctx.tracked_positions, ctx.saved_tensors):
        saved[i] = tensor
    return saved


_current_keep_graph = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)


def _keeps_graph() -> bool:
    """Whether the running backward was asked to keep the graph (``retain_graph=True``)."""
    return True if _current_keep_graph is None else bool(_current_keep_graph())


class _CompiledPair:
    def __init__(self, forward: Callable, backward: Callable, cotangent_outputs: list[int],
                 saved_inputs_and_outputs: frozenset[int], saved_tensors: frozenset[int],
                 detached_outputs: frozenset[int]) -> None:  # fmt: skip
        self.forward = forward
        self.detached_outputs = detached_outputs  # float outputs eager returns without requires_grad
        self.backward = backward
        self.cotangent_outputs = cotangent_outputs  # flat output positions the backward takes gradients of
        # saved positions of inputs and outputs, and of the other saved tensors
        self.saved_inputs_and_outputs = sorted(saved_inputs_and_outputs)
        self.saved_intermediate_tensors = sorted(saved_tensors - saved_inputs_and_outputs)
        # flat output positions autograd must not differentiate, known after the first call
        self.non_differentiable: tuple[int, ...] | None = None
        # flat output positions holding an input itself, which the caller gets as eager returns it (the
        # same tensor object: a leaf stays a leaf), not autograd's new view of it; known after the first call
        self.returned_inputs: tuple[int, ...] = ()


def _non_differentiable(flat_output: list[Any], detached: frozenset[int]) -> tuple[int, ...]:
    """Integer outputs, and float outputs eager returns without requires_grad (a detached statistic,
    a value computed only from inputs that do not require grad)."""
    return tuple(
        i
        for i, t in enumerate(flat_output)
        if isinstance(t, torch.Tensor) and (not (t.is_floating_point() or t.is_complex()) or i in detached)
    )


# Function.apply without its Python wrapper, which looks for ``setup_context`` and unwraps functorch's
# dead wrappers with a generator on every call; ``run`` takes the wrapper whenever a functorch
# transform is active, and unwraps dead wrappers itself otherwise.
_apply = super(torch.autograd.Function, ThunderFunction).apply
_functorch_active = torch._C._are_functorch_transforms_active


def differentiable_callable(forward: Callable, backward: Callable, cotangent_outputs: list[int],
                            saved_inputs_and_outputs: frozenset[int], saved_tensors: frozenset[int],
                            detached_outputs: frozenset[int] = frozenset()) -> Callable:  # fmt: skip
    """A function of the computation's inputs that runs ``forward`` under a ``ThunderFunction``.

    ``saved_inputs_and_outputs``: positions among the saved values of inputs and outputs of the
    forward, which go through ``save_for_backward``; ``saved_tensors``: the positions of all saved
    tensors (those of the others are checked for being views on each call).
    """
    pair = _CompiledPair(forward, backward, cotangent_outputs, saved_inputs_and_outputs, saved_tensors,
                         detached_outputs)  # fmt: skip

    def run(*inputs: Any) -> Any:
        if _functorch_active():
            returned = ThunderFunction.apply(pair, *inputs)
        else:
            returned = _apply(pair, *unwrap_dead_wrappers(inputs))
        spec, flat_output, output = returned[-1]
        if pair.returned_inputs:
            returned = list(returned)
            for i in pair.returned_inputs:
                returned[i] = flat_output[i]
        if spec is LEAF_SPEC:  # one tensor, what most models return
            return returned[0]
        # autograd returns the forward's tensors themselves, except an input returned as an output
        # (a new view of it) and the like: then the structure is rebuilt around what autograd returned
        if all(map(operator.is_, returned, flat_output)):
            return output
        return tree_unflatten(list(returned[:-1]), spec)

    return run


def unwrap_dead_wrappers(inputs: tuple) -> tuple:
    """functorch's ``unwrap_dead_wrappers``, as ``Function.apply`` calls it: a tensor that escaped a
    finished ``torch.func`` transform is unwrapped (a list comprehension: torch's generator is slower)."""
    return tuple([_unwrap_if_dead(v) if isinstance(v, torch.Tensor) else v for v in inputs])


_unwrap_if_dead = torch._C._functorch.unwrap_if_dead
