"""``thunder.jit(fn, cuda_graphs=True)``: compiled functions replay CUDA graphs.

A small program (an MLP's eval forward, a decoding step) is bound by kernel launches, not by the
GPU: each launch costs microseconds of CPU time. With ``cuda_graphs=True`` each compiled function
(the computation, or the forward and the backward of a training step) is captured once per input
layout into a CUDA graph and later calls replay it: one launch for the whole program.

How inputs and outputs are handled (the graph reads and writes fixed addresses):

- Parameters (``torch.nn.Parameter``) are read where they are, as the graph was captured with
  them; a parameter whose storage changed (``p.data = ...``) makes another capture.
- Every other tensor input is copied into a buffer the graph owns before each replay (the copies
  are launches too, one per input; for an MLP's forward that is the activations alone).
- An input the program updates in place (a KV cache's ``index_copy_``, a batch norm's running
  statistics) is captured at the caller's tensor itself, so the graph writes it directly: a decoding
  step with a static cache copies nothing in or out. Like a parameter, a tensor at another address
  makes another capture (a new cache per ``generate()`` call: one capture each).
- Outputs are copied out of the graph's buffers, so a result held by the caller is never
  overwritten by a later replay (small for the programs graphs are for).
- Programs that cannot be captured (CPU tensors, a synchronizing call like ``.item()``) run
  without a graph, after one ``CudaGraphWarning`` naming the reason.

The first call per layout runs the function as it is, without a graph (kernels compile there and
lazily initialized libraries settle); the second call with that layout captures the graph, on a side
stream, and replays it. A program that runs once (a training step's first call, which creates the
optimizer's state) is never captured: a graph keeps its memory pool for as long as it lives, and a
capture's warm-up run needed scratch copies of every input written in place (a whole training
step's parameters and optimizer state, twice the memory of the model at the peak).
"""

from __future__ import annotations

import operator
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["CudaGraphWarning", "GraphedFunction", "with_cuda_graphs", "mutated_inputs"]


class CudaGraphWarning(RuntimeWarning):
    """A compiled function could not be captured into a CUDA graph and runs without one."""


class _Captured:
    """One captured graph: the buffers it reads and writes and how its outputs nest."""

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static_inputs: list[Any],
        outputs: list[Any],
        spec: Any,
        copied: list[int],
    ):
        self.graph, self.static_inputs, self.outputs, self.spec = graph, static_inputs, outputs, spec
        self.copied = [(i, static_inputs[i]) for i in copied]  # the graph's own buffers, filled per replay
        # outputs that are inputs (a forward returns the tensors its backward reads) are the caller's
        self.returned_inputs = {
            i: next(j for j, s in enumerate(static_inputs) if s is o)
            for i, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and any(s is o for s in static_inputs)
        }

    def replay(self, args: tuple) -> Any:
        for index, static in self.copied:
            static.copy_(args[index])
        self.graph.replay()
        results = [
            args[self.returned_inputs[i]]
            if i in self.returned_inputs
            else o.clone()
            if isinstance(o, torch.Tensor)
            else o
            for i, o in enumerate(self.outputs)
        ]
        return tree_unflatten(results, self.spec)


class GraphedFunction:
    """``fn`` (a compiled computation) replayed as a CUDA graph, one per input layout."""

    def __init__(
        self, fn: Callable, name: str = "computation", mutated: frozenset = frozenset(), arg_names: tuple = ()
    ):
        self.fn, self.name, self.mutated = fn, name, mutated
        self.arg_names = arg_names  # the trace's names of the inputs, for messages
        self.plan: _InputPlan | None = None  # how each input position is handled, from the first call
        self.graphs: dict[tuple, _Captured] = {}
        self.refused: str | None = None  # why graphs are not used, once that is known
        self._last: tuple[tuple, _Captured] | None = None  # the last call's key and graph
        self._ran: set[tuple] = set()  # keys called once, not yet captured
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        if self.refused is not None:
            return self.fn(*args)
        key = self.key(args)
        last = self._last  # a decode loop replays one graph: equal keys compare faster than they hash
        captured = last[1] if last is not None and last[0] == key else self.graphs.get(key)
        if captured is None:
            reason = _unsupported(args, self.arg_names)
            if reason is not None:
                self._refuse(reason)
                return self.fn(*args)
            with self._lock:
                captured = self.graphs.get(key)
                if captured is None and key not in self._ran:  # a first call: no graph yet
                    if len(self._ran) >= _MAX_WAITING_KEYS:  # layouts seen once each (inputs at new
                        self._ran.clear()  # addresses every call) would grow it without bound
                    self._ran.add(key)
                    return self.fn(*args)
                if captured is None:
                    self._ran.discard(key)
                    try:
                        captured = self._capture(args)
                    except Exception as error:  # noqa: BLE001 -- any capture failure runs without a graph
                        torch.cuda.synchronize()
                        self._refuse(f"capturing failed: {type(error).__name__}: {error}")
                        return self.fn(*args)
                    self.graphs[key] = captured
        self._last = (key, captured)
        return captured.replay(args)

    def key(self, args: tuple) -> tuple:
        """What picks the graph for a call: its inputs' layout beyond what the prologue checked."""
        return self._plan(args).key(args)

    def _capture(self, args: tuple) -> _Captured:
        # the call before this one with the same key ran the program without a graph: that was the
        # warm-up (kernels compiled, libraries initialized), so the capture needs no run of its own
        plan = self._plan(args)
        static_inputs = list(args)
        for index in plan.copied:
            static_inputs[index] = _buffer_like(args[index])
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = self.fn(*static_inputs)
        outputs, spec = tree_flatten(result)
        return _Captured(graph, static_inputs, outputs, spec, plan.copied)

    def _plan(self, args: tuple) -> _InputPlan:
        if self.plan is None:
            self.plan = _InputPlan(args, self.mutated)
        return self.plan

    def _refuse(self, reason: str) -> None:
        if self.refused is None:
            self.refused = reason
            warnings.warn(
                f"thunder: cuda_graphs=True: the {self.name} runs without a CUDA graph ({reason})",
                CudaGraphWarning,
                stacklevel=4,
            )


def with_cuda_graphs(fn: Callable, enabled: bool, name: str = "computation", trace: Any = None) -> Callable:
    """``fn`` replayed as CUDA graphs when ``enabled`` (the ``cuda_graphs`` option), else ``fn``.

    ``trace``: the execution trace ``fn`` was made from, which says which inputs it updates in place.
    """
    if not enabled:
        return fn
    if trace is None:
        return GraphedFunction(fn, name)
    names = tuple(getattr(a, "name", f"input {i}") for i, a in enumerate(trace.args))
    return GraphedFunction(fn, name, mutated_inputs(trace), names)


def mutated_inputs(trace: Any) -> frozenset:
    """Positions of the trace's inputs that it writes in place: ``inplace.copy_(input, value)``, or an
    in-place op that replaced such a copy (``transforms/reinplace.py``: tagged ``writes_input``)."""
    positions = {getattr(arg, "name", None): i for i, arg in enumerate(trace.args)}
    return frozenset(
        positions[bound.args[0].name]
        for bound in trace.bound_symbols
        if (bound.symbol.id == "inplace.copy_" or "writes_input" in bound.symbol.tags)
        and getattr(bound.args[0], "name", None) in positions
    )


class _InputPlan:
    """Which inputs a graph reads where they are, which it copies into its own buffers, and which are
    numbers baked into it; decided once per compiled function, whose prologue fixes which positions
    hold tensors. (A per-call key over a model's hundreds of inputs cost a ``Parameter`` isinstance,
    a Python-level metaclass check, for each.)

    - Parameters and inputs written in place are read at their own address: the key holds it, so a
      new storage makes a new capture. A position that later holds another kind of tensor is still
      handled correctly: read in place, or copied.
    - Other tensors are copied into the graph's buffers before each replay; the key holds their strides.
    - Other inputs (numbers) are part of the key by type and value.
    """

    def __init__(self, args: tuple, mutated: frozenset):
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.pinned = [i for i in tensors if isinstance(args[i], torch.nn.Parameter) or i in mutated]
        pinned = set(self.pinned)
        self.copied = [i for i in tensors if i not in pinned]
        self.values = [i for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]
        self._pinned, self._copied = _picker(self.pinned), _picker(self.copied)

    def key(self, args: tuple) -> tuple:
        """What a capture depends on beyond what the prologue checked (shape, dtype, device).

        Built with C-level loops (``map`` over the tensor methods): a decode step keys a few hundred
        tensors on every call, and a generator over them cost twice as much.
        """
        pinned = self._pinned(args)
        return (
            tuple(map(_DATA_PTR, pinned)),
            tuple(map(_STRIDE, pinned)),
            tuple(map(_STRIDE, self._copied(args))),
            tuple((type(args[i]), args[i]) for i in self.values),
        )


_DATA_PTR, _STRIDE = torch.Tensor.data_ptr, torch.Tensor.stride
# At most this many layouts wait for their second call (the capture); forgetting one only delays
# its capture by a call.
_MAX_WAITING_KEYS = 64


def _picker(indices: list[int]) -> Callable[[tuple], tuple]:
    """``args -> tuple(args[i] for i in indices)``, in C (``itemgetter`` of one index gives no tuple)."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    return lambda args: tuple(args[i] for i in indices)


def _buffer_like(arg: torch.Tensor) -> torch.Tensor:
    buffer = torch.empty_strided(arg.shape, arg.stride(), dtype=arg.dtype, device=arg.device)
    return buffer.copy_(arg)


def _unsupported(args: tuple, names: tuple = ()) -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA device"
    for index, a in enumerate(args):
        if isinstance(a, torch.Tensor) and not a.is_cuda:
            name = names[index] if index < len(names) else f"input {index}"
            shape = "x".join(map(str, a.shape)) or "scalar"
            return f"an input is on {a.device}, not on a CUDA device ({name}: {shape} {a.dtype})"
        if not isinstance(a, (torch.Tensor, int, float, bool, type(None), str, torch.dtype, torch.device)):
            return f"an input of type {type(a).__name__} cannot be part of a graph's key"
    return None
