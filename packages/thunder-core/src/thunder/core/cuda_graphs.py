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
- Outputs are *lent*: the caller gets tensors that alias the graph's own output buffers (no copy;
  ``_LentOutputs``). Before the graph replays again, any lent output the caller still holds (or a
  view of it) is moved to memory of its own, values and all, so a later replay never overwrites a
  result held by the caller: a result dropped in time (a decode step's logits, a training step's
  activations once the backward has run, gradients set to ``None`` by ``zero_grad()``) costs
  nothing, one still held costs the copy the graph used to make on every replay. Outputs that alias
  an input (a view of a parameter) are copied out as before.
- An input that is a lent output of a graph (the forward's saved activations, read by the backward)
  is read where it is, like a parameter, not copied into the graph's buffers: its address is part of
  the key.
- A training step's two graphs share one memory pool, as eager's backward reuses what the forward
  leaves: the backward's first capture takes over the forward graph's saved activations (only the
  backward reads them) and frees each at its last use, so its own buffers (and the gradients) reuse
  their memory. The forward then writes where the backward's lent gradients lie: before it replays,
  those still held (``.grad`` accumulated over several forwards) are moved out, or where they cannot
  move the pair is retired. A backward under ``retain_graph=True`` runs without that graph, whose
  replay would overwrite the activations the next backward reads.
- Programs that cannot be captured (CPU tensors, a synchronizing call like ``.item()``) run
  without a graph, after one ``CudaGraphWarning`` naming the reason.

The first call per layout runs the function as it is, without a graph (kernels compile there and
lazily initialized libraries settle); the second call with that layout captures the graph, on a side
stream, and replays it. A program that runs once (a training step's first call, which creates the
optimizer's state) is never captured: a graph keeps its memory pool for as long as it lives, and a
capture's warm-up run needed scratch copies of every input written in place (a whole training
step's parameters and optimizer state, twice the memory of the model at the peak). A backward that
ran once already captures at once when it first meets a forward graph's activations: a run without a
graph would hold them all through that backward.
"""

from __future__ import annotations

import operator
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten, tree_unflatten

from thunder.core.autograd_function import _keeps_graph

__all__ = ["CudaGraphWarning", "GraphedFunction", "with_cuda_graphs", "mutated_inputs"]


class CudaGraphWarning(RuntimeWarning):
    """A compiled function could not be captured into a CUDA graph and runs without one."""


# The addresses of the lent outputs the caller may still hold (``_LentOutputs``), for the key of the
# graphs that read them (``_InputPlan``): address -> the weak reference of the lent storage.
_LENT_ADDRESSES: dict[int, StorageWeakRef] = {}
# Whether a storage's memory can be swapped for other memory under every tensor and view on it
# (``UntypedStorage._swap_data_ptr_``, torch 2.12 and later). Without it a held output cannot be moved.
CAN_MOVE_HELD_OUTPUTS = hasattr(torch.UntypedStorage, "_swap_data_ptr_")
# Smaller outputs (a loss, a decode step's logits) are copied out: a copy costs little, and a loss
# kept in a list across steps would otherwise need moving (or, without moving, retire the graph).
_LEND_MIN_BYTES = 1 << 20
# Graphs dropped while outputs they lent are still held: kept until those are dropped (their memory).
_OUTLIVING: list[_Captured] = []
# The saved activations forward graphs still own and may hand to their backward's capture
# (``_Captured.handoff``), by ``_handoff_key``: the forward's graph, weakly.
_HANDOFF: dict[tuple, weakref.ref[_Captured]] = {}


class _LentTensor(NamedTuple):
    """Where a lent output lies in its group's storage (the static tensor itself may be handed to a
    backward's capture, ``_Captured.hand_over``, so only its layout is kept)."""

    position: int  # the output's position
    group: int  # its storage among the lent ones
    dtype: torch.dtype
    offset: int
    shape: torch.Size
    stride: tuple[int, ...]


class _LentOutputs:
    """A graph's tensor outputs handed to the caller without a copy, and taken back before a replay.

    The caller's tensors live on storages of their own (``_construct_storage_from_data_pointer``:
    storages that alias the graph's buffers without owning them), so liveness is a weak reference to
    each: a lent storage still referenced (by the tensor, a view of it, autograd's saved tensors) when
    the graph is about to replay is *evicted*: fresh memory gets a copy of its bytes and the storage's
    data pointer is swapped to it (``_swap_data_ptr_``), which every tensor and view on it sees.
    Outputs that share a storage (a tensor and its view) share one lent storage.
    """

    def __init__(self, outputs: list[Any], lendable: list[int]):
        groups: dict[int, int] = {}  # storage address -> group
        self.storages: list[tuple[int, int, torch.device]] = []  # per group: address, bytes, device
        self.tensors: list[_LentTensor] = []
        for index in lendable:
            static = outputs[index]
            storage = static.untyped_storage()
            address = storage.data_ptr()
            if address not in groups:
                groups[address] = len(self.storages)
                self.storages.append((address, storage.nbytes(), static.device))
            layout = (static.dtype, static.storage_offset(), static.shape, static.stride())
            self.tensors.append(_LentTensor(index, groups[address], *layout))
        self.lent: list[StorageWeakRef] = []  # the last replay's lent storages
        self.addresses: list[int] = []  # and their tensors' addresses, in _LENT_ADDRESSES

    def lend(self, results: list[Any]) -> None:
        """Put tensors aliasing the static outputs into ``results``, in place of the static outputs."""
        storages = [torch._C._construct_storage_from_data_pointer(a, d, n) for a, n, d in self.storages]
        for t in self.tensors:
            lent = torch.empty((), dtype=t.dtype, device=self.storages[t.group][2])
            results[t.position] = lent.set_(storages[t.group], t.offset, t.shape, t.stride)
        self.lent = [StorageWeakRef(storage) for storage in storages]
        self.addresses = [results[t.position].data_ptr() for t in self.tensors]
        for address, t in zip(self.addresses, self.tensors):
            _LENT_ADDRESSES[address] = self.lent[t.group]

    def held(self) -> bool:
        """Whether the caller still holds an output of the last replay (or a view of one)."""
        return not all(ref.expired() for ref in self.lent)

    def held_tensors(self) -> list[str]:
        """The outputs whose lent storage is still referenced, described (for messages)."""
        return [_describe(t) for t in self.tensors if not self.lent[t.group].expired()]

    def take_back(self) -> None:
        """Give every lent storage still referenced memory of its own, before the buffers are written
        (only where ``CAN_MOVE_HELD_OUTPUTS``: else the caller checks ``held()`` first)."""
        for ref in self.lent:
            if not ref.expired():
                storage = torch.UntypedStorage._new_with_weak_ptr(ref.cdata)
                own = torch.empty(
                    storage.nbytes(), dtype=torch.uint8, device=storage.device
                ).untyped_storage()
                own.copy_(storage)
                storage._swap_data_ptr_(own)  # type: ignore[attr-defined]  # ``own`` now aliases the graph's buffer, and is dropped
        self.release()

    def release(self) -> None:
        """Forget the last replay's lent storages (an address another graph lends since stays its)."""
        for address, t in zip(self.addresses, self.tensors):
            if _LENT_ADDRESSES.get(address) is self.lent[t.group]:
                del _LENT_ADDRESSES[address]
        self.lent, self.addresses = [], []


class _Captured:
    """One captured graph: the buffers it reads and writes and how its outputs nest."""

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static_inputs: list[Any],
        outputs: list[Any],
        spec: Any,
        copied: list[int],
        lends: bool = True,
        saved: tuple[Sequence, Sequence] = ((), ()),
    ):
        self.graph, self.outputs, self.spec = graph, outputs, spec
        self.copied = [(i, static_inputs[i]) for i in copied]  # the graph's own buffers, filled per replay
        # outputs that are inputs (a forward returns the tensors its backward reads) are the caller's
        self.returned_inputs = {
            i: next(j for j, s in enumerate(static_inputs) if s is o)
            for i, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and any(s is o for s in static_inputs)
        }
        input_storages = {
            s.untyped_storage().data_ptr() for s in static_inputs if isinstance(s, torch.Tensor)
        }
        lendable, self.cloned = [], []
        for i, o in enumerate(outputs):
            if isinstance(o, torch.Tensor) and i not in self.returned_inputs:
                storage = o.untyped_storage()  # an output aliasing an input is copied out
                if not lends or storage.nbytes() < _LEND_MIN_BYTES or storage.data_ptr() in input_storages:
                    self.cloned.append(i)
                else:
                    lendable.append(i)
        self.lent = _LentOutputs(outputs, lendable)
        # saved activations the backward's capture may take over (``hand_over``): handoff key -> index
        self.handoff = _handoff(outputs, self.lent, saved)
        for key in self.handoff:
            _HANDOFF[key] = weakref.ref(self)
        # the backward captured into this graph's pool: its function and graph, whose lent outputs
        # (gradients) lie where this graph writes (``GraphedFunction._reclaim_from_partner``)
        self.partner: tuple[GraphedFunction, _Captured] | None = None
        self.shares_pool = False  # a backward's graph: captured into its forward's pool

    def hand_over(self) -> list[torch.Tensor]:
        """The saved activations this graph owns, for the backward's capture to free at their last
        use; this graph no longer holds them (it still lends them after each replay)."""
        owned = []
        for key, index in self.handoff.items():
            owned.append(self.outputs[index])
            self.outputs[index] = None
            _HANDOFF.pop(key, None)
        self.handoff = {}
        return owned

    def replay(self, args: tuple) -> Any:
        for index, static in self.copied:
            static.copy_(args[index])
        self.graph.replay()
        results = list(self.outputs)
        for i, j in self.returned_inputs.items():
            results[i] = args[j]
        for i in self.cloned:
            results[i] = results[i].clone()
        self.lent.lend(results)
        return tree_unflatten(results, self.spec)

    def __del__(self) -> None:
        # the graph's memory pool is freed with it: what the caller still holds must move out first,
        # or (where it cannot move) the graph outlives this object until the caller drops it
        try:
            for key in self.handoff:
                _HANDOFF.pop(key, None)
            if CAN_MOVE_HELD_OUTPUTS or not self.lent.held():
                self.lent.take_back() if CAN_MOVE_HELD_OUTPUTS else self.lent.release()
            else:
                _OUTLIVING.append(self)  # resurrected: finalized no more, freed once dropped from there
        except Exception:  # noqa: BLE001, S110 -- at interpreter exit torch may be gone already
            pass


def _handoff_key(tensor: torch.Tensor) -> tuple:
    return (tensor.data_ptr(), tensor.dtype, tensor.shape, tensor.stride())


def _handoff(outputs: list[Any], lent: _LentOutputs, saved: tuple[Sequence, Sequence]) -> dict[tuple, int]:
    """The lent outputs among the forward's saved activations that only its backward reads
    (``saved``: those and the forward's other outputs), with no storage in common with an output the
    caller gets: handoff key -> output index."""
    activations, returned = ({id(t) for t in part} for part in saved)  # alive here: their ids are theirs
    shared = {
        t.group
        for t in lent.tensors
        if id(outputs[t.position]) not in activations or id(outputs[t.position]) in returned
    }
    return {_handoff_key(outputs[t.position]): t.position for t in lent.tensors if t.group not in shared}


def _forward_to_share_with(args: tuple) -> _Captured | None:
    """The forward graph whose saved activations are among ``args``, all of them, if a capture may take
    them over: the backward of that forward's last replay, the first to be captured."""
    found: _Captured | None = None
    keys = set()
    for arg in args:
        if isinstance(arg, torch.Tensor):
            key = _handoff_key(arg)
            ref = _HANDOFF.get(key)
            captured = ref() if ref is not None else None
            if captured is None:
                continue
            if found is not None and captured is not found:
                return None  # the activations of two forwards
            found = captured
            keys.add(key)
    if found is None or found.partner is not None or not keys.issuperset(found.handoff):
        return None
    return found


def _describe(tensor: _LentTensor) -> str:
    return f"{'x'.join(map(str, tensor.shape)) or 'scalar'} {tensor.dtype}"


def _drop_outliving() -> None:
    """Free the graphs kept only for outputs they lent, once the caller dropped those (their
    ``__del__`` does not run again: a finalizer runs once, and it ran when they were kept)."""
    dropped = [captured for captured in _OUTLIVING if not captured.lent.held()]
    if dropped:
        _OUTLIVING[:] = [captured for captured in _OUTLIVING if captured.lent.held()]
        for captured in dropped:
            captured.lent.release()


class GraphedFunction:
    """``fn`` (a compiled computation) replayed as a CUDA graph, one per input layout."""

    def __init__(
        self,
        fn: Callable,
        name: str = "computation",
        mutated: frozenset = frozenset(),
        arg_names: tuple = (),
        takes_list: bool = False,
        saved_activations: tuple[int, ...] = (),
    ):
        self.fn, self.name, self.mutated = fn, name, mutated
        # a backward: ``fn`` takes its inputs as one list, which it empties (``Trace.takes_argument_list``),
        # so that a capture frees each at its last use; its first capture shares its forward's pool
        self.takes_list = takes_list
        # a training forward (``fn`` returns ``(output, saved)``): the positions in ``saved`` of the
        # activations only the backward reads, which its capture may take over (``_Captured.hand_over``)
        self.saved_activations = saved_activations
        self.arg_names = arg_names  # the trace's names of the inputs, for messages
        self.plan: _InputPlan | None = None  # how each input position is handled, from the first call
        self.graphs: dict[tuple, _Captured] = {}
        self.refused: str | None = None  # why graphs are not used, once that is known
        self._last: tuple[tuple, _Captured] | None = None  # the last call's key and graph
        self._ran: set[tuple] = set()  # keys called once, not yet captured
        self._warmed = False  # whether ``fn`` ran without a graph once (its kernels compiled)
        self._lending: _Captured | None = None  # the graph whose outputs were lent last
        self.lends = True  # whether captures lend their outputs (``_take_back``)
        self.copies_outputs_because: str | None = None  # why not, where it stopped
        self._lock = threading.Lock()
        # set by the pipeline: after the prologue passed, the inputs whose strides it checked
        # (``prologue.TensorChecks.covered``): (version, positions), or None when it did not
        self.checked_strides: Callable[[], tuple[int, tuple[int, ...]] | None] | None = None

    def _run(self, args: tuple) -> Any:
        """``fn`` on ``args``, without a graph."""
        return self.fn(list(args)) if self.takes_list else self.fn(*args)

    def __call__(self, *args: Any) -> Any:
        captured = self._graph_for(args)
        return self._run(args) if captured is None else captured.replay(args)

    def call_with_list(self, arguments: list) -> Any:
        """A backward's call as ``ThunderFunction`` makes it: its inputs in a list, which is emptied, so
        that without a graph (the warm-up, a refusal) ``fn`` frees each at its last use too."""
        args = tuple(arguments)
        captured = self._graph_for(args)
        if captured is None:
            del args
            return self.fn(arguments) if self.takes_list else self.fn(*arguments)
        arguments.clear()
        return captured.replay(args)

    def _graph_for(self, args: tuple) -> _Captured | None:
        """The graph to replay for ``args`` (captured now if its time has come), or None to run ``fn``."""
        if self.refused is not None:
            return None
        if self._lending is not None:  # before the key: an input may be a lent output that moves
            self._take_back(self._lending)
            self._lending = None
        if _OUTLIVING:
            _drop_outliving()
        key = self.key(args)
        last = self._last  # a decode loop replays one graph: equal keys compare faster than they hash
        captured = last[1] if last is not None and last[0] == key else self.graphs.get(key)
        if captured is None:
            reason = _unsupported(args, self.arg_names)
            if reason is not None:
                self._refuse(reason)
                return None
            with self._lock:
                captured = self.graphs.get(key)
                forward = self._forward_to_share_with(args) if captured is None else None
                if (
                    captured is None and key not in self._ran and forward is None
                ):  # a first call: no graph yet
                    if len(self._ran) >= _MAX_WAITING_KEYS:  # layouts seen once each (inputs at new
                        self._ran.clear()  # addresses every call) would grow it without bound
                    self._ran.add(key)
                    self._warmed = True
                    return None
                if captured is None:
                    self._ran.discard(key)
                    try:
                        captured = self._capture(args, forward)
                    except Exception as error:  # noqa: BLE001 -- any capture failure runs without a graph
                        torch.cuda.synchronize()
                        self._refuse(f"capturing failed: {type(error).__name__}: {error}")
                        return None
                    self.graphs[key] = captured
        if captured.shares_pool and _keeps_graph():
            return None  # a replay would reuse the activations' memory a later backward reads
        if captured.partner is not None and not self._reclaim_from_partner(captured, key):
            return None
        self._last = (key, captured)
        self._lending = captured
        return captured

    def _reclaim_from_partner(self, captured: _Captured, key: tuple) -> bool:
        """Before a forward graph replays into the pool it shares with its backward's graph: move what
        the caller holds of the backward's outputs (gradients) out of it. Where storages cannot move
        (torch before 2.12) and some are held (gradients accumulated over several forwards), the pair
        is retired, kept until those are dropped; this call runs without a graph, and the backward
        copies its outputs from then on, so that a new pair shares a pool again."""
        backward, partner = captured.partner  # type: ignore[misc]
        if CAN_MOVE_HELD_OUTPUTS:
            partner.lent.take_back()
            return True
        if not partner.lent.held():
            partner.lent.release()
            return True
        held = ", ".join(partner.lent.held_tensors())
        backward.lends = False
        backward.copies_outputs_because = (
            f"outputs of its graph were still held when its forward was called again ({held}), and "
            "torch before 2.12 cannot move them out of the pool the two graphs share"
        )
        backward._drop(partner)
        if backward._lending is partner:
            backward._lending = None
        _OUTLIVING.append(partner)
        self._drop(captured)
        self._ran.add(key)  # the next call captures again
        return False

    def _take_back(self, captured: _Captured) -> None:
        """Make the last replay's buffers writable again: move what the caller holds of its outputs out
        of them, or, where storages cannot move (torch before 2.12), retire the graph if anything is
        held: this function's later captures copy their outputs out, as graphs did before lending."""
        if CAN_MOVE_HELD_OUTPUTS:
            captured.lent.take_back()
        elif not captured.lent.held():
            captured.lent.release()
        else:
            self.lends = False
            self._drop(captured)
            _OUTLIVING.append(captured)
            if captured.partner is not None:  # its backward's graph reads activations it will not write again
                backward, partner = captured.partner
                backward._drop(partner)
            held = ", ".join(captured.lent.held_tensors())
            self.copies_outputs_because = (
                f"outputs of the last replay were still held when it was called again ({held}), and "
                "torch before 2.12 cannot move them out of the graph's memory"
            )

    def _drop(self, captured: _Captured) -> None:
        """Replay ``captured`` no more (its outputs the caller holds are still taken back, or it is kept
        in ``_OUTLIVING`` for them)."""
        self.graphs = {key: c for key, c in self.graphs.items() if c is not captured}
        self._last = None

    def key(self, args: tuple) -> tuple:
        """What picks the graph for a call: its inputs' layout beyond what the prologue checked."""
        checked = self.checked_strides() if self.checked_strides is not None else None
        return self._plan(args).key(args, checked)

    def _forward_to_share_with(self, args: tuple) -> _Captured | None:
        """For a backward that ran before (its kernels compiled): the forward graph whose activations
        ``args`` hold, if this call's capture may take them over. Such a call captures at once: a run
        without a graph would keep the activations through the whole backward, the peak of memory."""
        if not (self.takes_list and self._warmed and _HANDOFF) or _keeps_graph():
            return None
        return _forward_to_share_with(args)

    def _capture(self, args: tuple, forward: _Captured | None = None) -> _Captured:
        # the call before this one with the same key ran the program without a graph: that was the
        # warm-up (kernels compiled, libraries initialized), so the capture needs no run of its own
        copied = self._plan(args).copied_now(args)
        static_inputs = list(args)
        for index in copied:
            static_inputs[index] = _buffer_like(args[index])
        graph = torch.cuda.CUDAGraph()
        if self.takes_list:
            inputs = list(static_inputs)
            pool = None
            if forward is not None:  # its activations: owned by this list alone, freed at their last use
                pool = forward.graph.pool()
                owned = {_handoff_key(t): t for t in forward.hand_over()}
                inputs = [owned.get(_handoff_key(a), a) if isinstance(a, torch.Tensor) else a for a in inputs]
                del owned
                # no longer inputs of the graph: outputs may reuse their memory, and are lent all the same
                static_inputs = [s if s is i else None for s, i in zip(static_inputs, inputs)]
            with torch.cuda.graph(graph, pool=pool):
                result = self.fn(inputs)
            del inputs
        else:
            with torch.cuda.graph(graph):
                result = self.fn(*static_inputs)
        outputs, spec = tree_flatten(result)
        saved = self._saved_parts(result)
        captured = _Captured(graph, static_inputs, outputs, spec, copied, self.lends, saved)
        if forward is not None:
            captured.shares_pool = True
            forward.partner = (self, captured)
            # the memory the pair's runs without a graph left cached (their activations, the warm-up's)
            # now runs in the pool, which cannot reuse it: given back once, not held beside the pool
            torch.cuda.empty_cache()
        return captured

    def _saved_parts(self, result: Any) -> tuple[list, list]:
        """A training forward's result ``(output, saved)``: the saved activations only the backward
        reads, and the outputs the caller gets (``_handoff``)."""
        if not self.saved_activations:
            return [], []
        output, saved = result
        return [saved[i] for i in self.saved_activations], tree_flatten(output)[0]

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


def with_cuda_graphs(
    fn: Callable,
    enabled: bool,
    name: str = "computation",
    trace: Any = None,
    saved_activations: tuple[int, ...] = (),
) -> Callable:
    """``fn`` replayed as CUDA graphs when ``enabled`` (the ``cuda_graphs`` option), else ``fn``.

    ``trace``: the execution trace ``fn`` was made from, which says which inputs it updates in place,
    and whether ``fn`` takes its inputs as one list (a backward). ``saved_activations``: for a
    training forward, the positions among its saved values of those only its backward reads.
    """
    if not enabled:
        return fn
    if trace is None:
        return GraphedFunction(fn, name, saved_activations=saved_activations)
    names = tuple(getattr(a, "name", f"input {i}") for i, a in enumerate(trace.args))
    return GraphedFunction(
        fn, name, mutated_inputs(trace), names, trace.takes_argument_list, saved_activations
    )


def mutated_inputs(trace: Any) -> frozenset:
    """Positions of the trace's inputs that it writes in place: ``inplace.copy_(input, value)``, also
    one taken into a fusion region (among its subsymbols, ``transforms/fusion_copy_backs.py``), or an
    in-place op that replaced such a copy (``transforms/reinplace.py``: tagged ``writes_input``)."""
    positions = {getattr(arg, "name", None): i for i, arg in enumerate(trace.args)}
    writers = (
        writer
        for bound in trace.bound_symbols
        for writer in (bound, *(bound.subsymbols if "side_effect" in bound.symbol.tags else ()))
    )
    return frozenset(
        positions[writer.args[0].name]
        for writer in writers
        if (writer.symbol.id == "inplace.copy_" or "writes_input" in writer.symbol.tags)
        and getattr(writer.args[0], "name", None) in positions
    )


class _InputPlan:
    """Which inputs a graph reads where they are, which it copies into its own buffers, and which are
    numbers baked into it; decided once per compiled function, whose prologue fixes which positions
    hold tensors. (A per-call key over a model's hundreds of inputs cost a ``Parameter`` isinstance,
    a Python-level metaclass check, for each.)

    - Parameters and inputs written in place are read at their own address: the key holds it, so a
      new storage makes a new capture. A position that later holds another kind of tensor is still
      handled correctly: read in place, or copied.
    - Other tensors are copied into the graph's buffers before each replay; the key holds their
      strides. One that is a lent output of a graph (``_LENT_ADDRESSES``) is read in place instead:
      the key holds its address.
    - Other inputs (numbers) are part of the key by type and value.
    """

    def __init__(self, args: tuple, mutated: frozenset):
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.pinned = [i for i in tensors if isinstance(args[i], torch.nn.Parameter) or i in mutated]
        pinned = set(self.pinned)
        self.copied = [i for i in tensors if i not in pinned]
        self.values = [i for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]
        self._pinned, self._copied = _picker(self.pinned), _picker(self.copied)
        self._strided = _picker(self.pinned + self.copied)  # whose strides a key holds
        self._unchecked: tuple[int, Callable] | None = None  # (version, picker): those the prologue did not

    def key(self, args: tuple, checked: tuple[int, tuple[int, ...]] | None = None) -> tuple:
        """What a capture depends on beyond what the prologue checked (shape, dtype, device; with
        ``checked``, (version, positions), also the strides at those positions, the same for every
        call of that version).

        Built with C-level loops (``map`` over the tensor methods): a decode step keys a few hundred
        tensors on every call, and a generator over them cost twice as much.
        """
        pinned, copied = self._pinned(args), self._copied(args)
        version, strided = None, self._strided
        if checked is not None:
            version = checked[0]
            if self._unchecked is None or self._unchecked[0] != version:
                left = set(checked[1])
                self._unchecked = (version, _picker([i for i in self.pinned + self.copied if i not in left]))
            strided = self._unchecked[1]
        return (
            tuple(map(_DATA_PTR, pinned)),
            version,
            tuple(map(_STRIDE, strided(args))),
            tuple((type(args[i]), args[i]) for i in self.values),
            _lent_addresses(copied) if _LENT_ADDRESSES else None,
        )

    def copied_now(self, args: tuple) -> list[int]:
        """The positions copied into the graph's buffers for this call: not those holding lent outputs."""
        return [i for i in self.copied if _LENT_ADDRESSES.get(args[i].data_ptr()) is None]


def _lent_addresses(tensors: tuple) -> tuple | None:
    """The addresses of the lent outputs among ``tensors`` (None for the others), or None if none is."""
    addresses = tuple(a if a in _LENT_ADDRESSES else None for a in map(_DATA_PTR, tensors))
    return addresses if any(a is not None for a in addresses) else None


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
