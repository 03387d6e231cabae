"""The nvFuser executor: fusion regions as nvFuser fusion definitions, cached per input layout.

nvFuser is imported on first use (``nvfuser_direct``, else the older ``nvfuser`` module). Regions
print as ``nvFusion<i>`` with their prims in comments, as in the seed traces.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from thunder.core import disk_cache
from thunder.core.executor import FusionExecutor
from thunder.core.fusion_fallback import PartiallyWrittenError, with_fallback
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.executors.nvfuser import kernel_db
from thunder.executors.nvfuser.canonical_order import in_canonical_order
from thunder.executors.nvfuser.stage_groups import (
    Group,
    inputs_of,
    scalar_groups_merged,
    scalars_first_groups,
    stage_groups,
    writes_in_place,
)
from thunder.executors.nvfuser.translate import (
    ELEMENTWISE,
    REDUCTIONS,
    SHAPES,
    SUPPORTED_DTYPES,
    define_fusion,
    layout_key,
    structure_key,
)

__all__ = ["NvFuserExecutor", "executor", "nvfuser_module"]

_MODULES = ("nvfuser_direct", "nvfuser")
_module: Any = None


# Where nvFuser has wheels (README.md, "nvFuser"); the `nvfuser` extra is empty everywhere else.
INSTALL_HINT = (
    "nvFuser publishes wheels for CPython 3.10 and 3.12 on Linux x86_64 only; there, "
    "pip install 'thunder[nvfuser]' (torch 2.10 or 2.11, CUDA 13) or the nvfuser-cuXXX-torchYY of your torch"
)


def nvfuser_module() -> Any:
    """The nvFuser Python module, imported on first use."""
    global _module
    if _module is None:
        for name in _MODULES:
            if importlib.util.find_spec(name) is not None:
                kernel_db.enable_before_import()
                _module = importlib.import_module(name)
                break
        else:
            raise ImportError(f"nvFuser is not installed: {INSTALL_HINT}")
    return _module


def _kernel_db_folder() -> str:
    """The shared folder of nvFuser's compiled kernels for this nvFuser and device (``kernel_db.py``)."""
    major, minor = torch.cuda.get_device_capability()
    version = "".join(c if c.isalnum() or c in ".-" else "_" for c in str(nvfuser_module().version()))
    return os.path.join(disk_cache.cache_dir(), "nvfuser", f"{version}-sm{major}{minor}")


# Compiled definitions shared by stages of the same structure and input layouts (the layers of a
# model): nvFuser compiles each definition on first run, seconds each, so a 12-layer model would
# otherwise pay twelve times. Least recently used definitions are dropped beyond the limit.
_SHARED_DEFINITIONS: OrderedDict[tuple, Any] = OrderedDict()
SHARED_DEFINITIONS_LIMIT = 4096
_shared_lock = threading.Lock()


def _shared_definition(key: tuple, define: Callable[[], Any]) -> Any:
    with _shared_lock:
        fd = _SHARED_DEFINITIONS.get(key)
        if fd is None:
            fd = _SHARED_DEFINITIONS[key] = define()
            while len(_SHARED_DEFINITIONS) > SHARED_DEFINITIONS_LIMIT:
                _SHARED_DEFINITIONS.popitem(last=False)
        else:
            _SHARED_DEFINITIONS.move_to_end(key)
        return fd


class FusionStage:
    """One fusion definition of a region, cached per input layout (and shared, see above).

    ``writes``: (value, input) pairs, from copy-backs taken into the region (``FusionRunner``): the
    fusion writes each value into the input's memory, an output aliased to the input, where the
    input is contiguous; elsewhere the values come back after the outputs and are copied in.
    """

    def __init__(
        self,
        region: list[BoundSymbol],
        inputs: list[TensorProxy],
        outputs: list[TensorProxy],
        writes: Sequence[tuple[TensorProxy, TensorProxy]] = (),
    ):
        self.region, self.inputs, self.outputs = region, inputs, outputs
        self.writes = list(writes)
        self.structure = structure_key(region, inputs, outputs, [(v.name, d.name) for v, d in self.writes])
        positions = {p.name: i for i, p in enumerate(inputs)}
        self._destinations = [positions[d.name] for _, d in self.writes]
        self.definitions: dict[tuple, Any] = {}
        self._by_raw_metadata: dict[tuple, tuple[Any, frozenset[int], bool]] = {}
        reshaped = {b.args[0].name for b in region if b.symbol.name == "reshape"}
        self._reshaped_inputs = [i for i, p in enumerate(inputs) if p.name in reshaped]

    def __getstate__(self) -> dict:
        # kept on disk (core/disk_cache.py) without its definitions: they are defined again on first use
        return {**self.__dict__, "definitions": {}, "_by_raw_metadata": {}}

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        # Looked up by the tensors' raw metadata first (cheaper than the layout on every call,
        # microseconds a tensor); layouts equal under ``layout_key`` share one definition.
        raw = tuple((t.dtype, t.shape, t.stride(), t.device) for t in tensors)
        found = self._by_raw_metadata.get(raw)
        first = found is None
        if found is None:
            found = self._by_raw_metadata[raw] = self._definition_for(tensors)
        fd, expanded, aliased = found
        given = tensors
        if expanded:
            tensors = [t.contiguous() if i in expanded else t for i, t in enumerate(tensors)]
        if first:  # nvFuser compiles on a definition's first execution
            with kernel_db.compiling(_kernel_db_folder):
                results = list(fd.execute(tensors))
        else:
            results = list(fd.execute(tensors))
        if self.writes:
            if not aliased:  # the values came back after the outputs
                count = len(self.outputs)
                _copy_all([given[position] for position in self._destinations], results[count:])
                del results[count:]
            # a write outside torch: its version counter, which autograd checks saved tensors by
            for position in self._destinations:
                torch.autograd.graph.increment_version(given[position])
        return results

    def _definition_for(self, tensors: list[torch.Tensor]) -> tuple[Any, frozenset[int], bool]:
        """The definition for these inputs, which of them it reads materialized (an expanded input
        that the region reshapes: nvFuser reshapes expansions wrongly, ``_reshapes_an_expansion``),
        and whether it writes ``writes`` itself (every destination contiguous)."""
        expanded = frozenset(
            i
            for i in self._reshaped_inputs
            if any(stride == 0 and size > 1 for stride, size in zip(tensors[i].stride(), tensors[i].shape))
        )
        aliased = all(tensors[i].is_contiguous() and i not in expanded for i in self._destinations)
        tensors = [t.contiguous() if i in expanded else t for i, t in enumerate(tensors)]
        key = tuple(layout_key(t) for t in tensors)  # ``aliased`` follows from it
        fd = self.definitions.get(key)
        if fd is None:
            if aliased:
                outputs, writes = self.outputs, [(v.name, d.name) for v, d in self.writes]
                structure = self.structure
            else:
                outputs, writes = [*self.outputs, *(v for v, _ in self.writes)], []
                structure = structure_key(self.region, self.inputs, outputs)
            fd = _shared_definition(
                (structure, key),
                lambda: define_fusion(nvfuser_module(), self.region, self.inputs, outputs, tensors, writes),
            )
            self.definitions[key] = fd
        return fd, expanded, aliased


class ScalarStage:
    """A stage of 0-dim tensors only (an optimizer's step counter ``step + 1``, split from its update by
    ``side_outputs``): run with torch, one small kernel per op, not launched through nvFuser, whose
    ``execute`` costs tens of microseconds of host time per call (a whole GPT-2 training step has
    148 such stages, one per parameter)."""

    def __init__(self, region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]):
        self.region, self.inputs, self.outputs = region, inputs, outputs
        self.definitions: dict[tuple, Any] = {}  # nothing compiled by nvFuser
        self._program: Callable | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_program": None}  # generated again after a load from the disk cache

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        if self._program is None:
            from thunder.core.transforms.claim_executors import operator_callable

            self._program = operator_callable("scalar_stage", self.inputs, self.region, tuple(self.outputs))
        return list(self._program(*tensors))


class ExpandStage:
    """0-dim values broadcast to the shapes a later stage reads them at, as stride-0 views
    (``Tensor.expand``, no kernel): see ``scalars_first_groups``."""

    def __init__(self, region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy]):
        self.region, self.inputs, self.outputs = region, inputs, outputs
        self.definitions: dict[tuple, Any] = {}  # nothing compiled
        positions = {p.name: i for i, p in enumerate(inputs)}
        self._sources = [(positions[b.args[0].name], tuple(b.output.shape)) for b in region]

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return [tensors[position].expand(shape) for position, shape in self._sources]


_STAGE_KINDS: dict[str, type] = {"fusion": FusionStage, "scalar": ScalarStage, "expand": ExpandStage}


class FusionRunner:
    """The callable of an ``nvFusion`` bound symbol: its stages run in order, one kernel set each.

    A region is one stage, except that outputs computed from lower-rank inputs alone are computed
    by a first stage (see ``side_outputs``) and that independent parts of a region are stages of
    their own (see ``connected_groups``).

    ``writes``: (value, input) pairs, the copy-backs taken into the region
    (``transforms/fusion_copy_backs.py``). The stage that makes a value writes it into the input's
    memory itself where that is safe (``writes_in_place``); the others are copied in by torch after
    the last stage, where the copy-back stood.
    """

    def __init__(
        self,
        region: list[BoundSymbol],
        inputs: list[TensorProxy],
        outputs: list[TensorProxy],
        writes: Sequence[tuple[TensorProxy, TensorProxy]] = (),
    ):
        self.region, self.inputs, self.outputs = region, inputs, outputs
        self.writes = list(writes)
        # planned on first use (``_plan``): a region that ``write_inputs`` replaces by one writing its
        # copy-backs (most of a whole training step's) is then never planned for nothing
        self._stages: list[Any] | None = None

    @property
    def stages(self) -> list[Any]:
        return self._plan() if self._stages is None else self._stages

    @property
    def copied(self) -> list[tuple[TensorProxy, TensorProxy]]:
        if self._stages is None:
            self._plan()
        return self._copied

    def _plan(self) -> list[Any]:
        inputs, outputs = self.inputs, self.outputs
        stages, self._copied = _stages(self.region, inputs, outputs, self.writes)
        # the first stage that writes inputs in place: a later one's failure cannot fall back
        self._first_writer = next(
            (i for i, s in enumerate(stages) if getattr(s, "writes", None)), len(stages)
        )
        only = stages[0] if len(stages) == 1 else None
        # the common case, on every call: no bookkeeping by name, only the stage's own order of the
        # region's inputs and outputs (``canonical_order``), None where it is the region's
        self._one_stage = (
            only is not None
            and not self._copied
            and sorted(p.name for p in only.inputs) == sorted(p.name for p in inputs)
            and sorted(p.name for p in only.outputs) == sorted(p.name for p in outputs)
        )
        self._input_order: tuple[int, ...] | None = None
        self._output_order: tuple[int, ...] | None = None
        if only is not None and self._one_stage:
            self._input_order = _permutation([p.name for p in inputs], [p.name for p in only.inputs])
            self._output_order = _permutation([p.name for p in only.outputs], [p.name for p in outputs])
        self._stages = stages
        return stages

    def __getstate__(self) -> dict:
        # kept on disk (core/disk_cache.py) planned, so that a warm process does not plan again
        if self._stages is None:
            self._plan()
        return self.__dict__

    @property
    def definitions(self) -> dict[tuple, Any]:
        return {key: fd for stage in self._stages or () for key, fd in stage.definitions.items()}

    def __call__(self, *tensors: torch.Tensor) -> tuple:
        stages = self._plan() if self._stages is None else self._stages
        if self._one_stage:
            if self._input_order is not None:
                tensors = tuple(tensors[i] for i in self._input_order)
            results = stages[0](list(tensors))
            if self._output_order is not None:
                return tuple(results[i] for i in self._output_order)
            return tuple(results)
        values = {p.name: t for p, t in zip(self.inputs, tensors)}
        for index, stage in enumerate(stages):
            try:
                results = stage([values[p.name] for p in stage.inputs])
            except Exception as error:
                if (
                    index > self._first_writer
                ):  # rerunning the region on torch would read inputs already written
                    raise PartiallyWrittenError(
                        f"an nvFuser stage failed after an earlier stage of its region had written "
                        f"inputs in place ({', '.join(d.name for _, d in self.writes)}); the region "
                        f"cannot be run again on torch: {type(error).__name__}: {error}"
                    ) from error
                raise
            values.update((p.name, t) for p, t in zip(stage.outputs, results))
        if self._copied:
            _copy_all(
                [values[destination.name] for _, destination in self._copied],
                [values[value.name] for value, _ in self._copied],
            )
        return tuple(values[p.name] for p in self.outputs)


def _permutation(given: list[str], wanted: list[str]) -> tuple[int, ...] | None:
    """Where each of ``wanted`` is in ``given`` (the same names), or None if they are in one order."""
    if given == wanted:
        return None
    position = {name: i for i, name in enumerate(given)}
    return tuple(position[name] for name in wanted)


def _copy_all(destinations: list[torch.Tensor], values: list[torch.Tensor]) -> None:
    """The copy-backs a region does itself after its stages, as one ``_foreach_copy_`` under no_grad,
    as ``inplace.copy_`` (a parameter requires grad).

    Not one multi-tensor kernel, as d922893 expected: an H200 profile of the whole GPT-2 step (at
    6161426, torch 2.11) shows ``_foreach_copy_`` as a device-to-device memcpy per tensor (592 a step,
    0.88 ms of copies) and about 78 us of host time per call under the profiler (98 calls a step). What would remove
    them is the update writing its inputs itself (``writes_in_place``)."""
    with torch.no_grad():
        if len(destinations) == 1:
            destinations[0].copy_(values[0])
        else:
            torch._foreach_copy_(destinations, values)


def _stages(
    region: list[BoundSymbol],
    inputs: list[TensorProxy],
    outputs: list[TensorProxy],
    writes: Sequence[tuple[TensorProxy, TensorProxy]] = (),
) -> tuple[list[Any], list[tuple[TensorProxy, TensorProxy]]]:
    """The region's stages, and the writes that no stage makes itself (copied after the last).

    A region that writes inputs may be planned a second way, its 0-dim computations first
    (``scalars_first_groups``); that plan is taken when it leaves fewer writes to copy.
    """
    output_names = {p.name for p in outputs}
    wanted = [*outputs, *(v for v, _ in writes if v.name not in output_names)]
    plan = _stages_of(scalar_groups_merged(stage_groups(region, inputs, wanted)), writes, output_names)
    if plan[1]:
        groups = scalars_first_groups(region, wanted, {v.name for v, _ in writes})
        if groups is not None:
            other = _stages_of(groups, writes, output_names)
            if len(other[1]) < len(plan[1]):
                return other
    return plan


def _stages_of(
    groups: list[tuple[Group, str]],
    writes: Sequence[tuple[TensorProxy, TensorProxy]],
    output_names: set[str],
) -> tuple[list[Any], list[tuple[TensorProxy, TensorProxy]]]:
    """A stage per group, each write made by the stage that computes it where ``writes_in_place``
    allows and no later stage reads its input; the other writes, copied after the last stage."""
    read_after: list[set[str]] = [set() for _ in groups]  # names read by the stages after each one
    for k in range(len(groups) - 2, -1, -1):
        read_after[k] = read_after[k + 1] | {p.name for p in groups[k + 1][0][1]}
    stages: list[Any] = []
    written: set[int] = set()
    for k, ((symbols, group_inputs, group_outputs), kind) in enumerate(groups):
        made = {p.name for p in group_outputs}
        own = [
            (i, (value, destination))
            for i, (value, destination) in enumerate(writes)
            if kind == "fusion"
            and value.name in made
            and destination.name not in read_after[k]
            and writes_in_place(symbols, destination)
        ]
        if not own:
            if kind == "fusion":
                symbols, group_inputs, group_outputs = in_canonical_order(
                    symbols, group_inputs, group_outputs
                )
            stages.append(_STAGE_KINDS[kind](symbols, group_inputs, group_outputs))
            continue
        written.update(i for i, _ in own)
        values = {value.name for _, (value, _) in own}
        needed = output_names | read_after[k]
        kept = [p for p in group_outputs if p.name not in values or p.name in needed]
        known = {p.name for p in group_inputs}
        extra = [d for _, (_, d) in own if d.name not in known]
        symbols, ordered_inputs, kept = in_canonical_order(symbols, [*group_inputs, *extra], kept)
        stages.append(FusionStage(symbols, ordered_inputs, kept, [w for _, w in own]))
    return stages, [w for i, w in enumerate(writes) if i not in written]


# What a reduction's accumulator starts from; nvFuser pads the reduced tensor with it.
_INIT_VALUES = {"sum": "0", "var": "0", "prod": "1", "amax": "-inf", "amin": "+inf"}


def _reduction_key(bound_symbol: BoundSymbol, aliases: dict[str, str]) -> tuple[str, tuple] | None:
    """(the reduced tensor, (its reduced axes, the initial value)) for a reduction prim, else None.

    ``aliases`` maps the outputs of same-dtype conversions (no-ops in nvFuser) to their inputs.
    """
    if bound_symbol.symbol.name not in REDUCTIONS or not isinstance(bound_symbol.args[0], TensorProxy):
        return None
    source = bound_symbol.args[0]
    rank = max(len(source.shape), 1)
    axes = frozenset(int(d) % rank for d in bound_symbol.args[1])
    return aliases.get(source.name, source.name), (axes, _INIT_VALUES.get(bound_symbol.symbol.name))


def _same_dtype_conversions(region: Sequence[BoundSymbol]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for b in region:
        if b.symbol.name == "convert_element_type" and isinstance(b.args[0], TensorProxy):
            if b.args[0].dtype == b.output.dtype:
                aliases[b.output.name] = aliases.get(b.args[0].name, b.args[0].name)
    return aliases


def _is_identity(bound_symbol: BoundSymbol) -> bool:
    if bound_symbol.symbol.is_leaf or bound_symbol.subsymbols:
        return False
    inputs = {p.name for p in bound_symbol.proxy_args()}
    return all(p.name in inputs for p in bound_symbol.proxy_outputs())


def _reshapes_an_expansion(region: Sequence[BoundSymbol], bound_symbol: BoundSymbol) -> bool:
    """A reshape of a broadcast made in the region that expands a size-1 dim (HF's ``repeat_kv``).

    nvFuser gave a wrong output for that pair on an H100: grouped-query attention's keys, broadcast
    [2, 4, 1, 512, 64] -> [2, 4, 4, 512, 64] and reshaped to [2, 16, 512, 64], came out with 4
    heads (HF Llama's float32 training step, tests/integration/test_hf_training_gpu.py). Such a
    reshape goes to another region, whose runner materializes the expanded input (``FusionStage``).
    """
    if bound_symbol.symbol.name != "reshape":
        return False
    source = bound_symbol.args[0]
    for b in region:
        if b.symbol.name == "broadcast_in_dim" and b.output.name == source.name:
            return any(old != new for old, new in zip(_broadcast_source_sizes(b), b.output.shape))
    return False


def _broadcast_source_sizes(b: BoundSymbol) -> list[int]:
    """The input's size at each output dim of a broadcast_in_dim (1 where a dim is new)."""
    sizes = [1] * len(b.output.shape)
    for input_dim, output_dim in enumerate(b.args[2]):
        sizes[output_dim] = b.args[0].shape[input_dim]
    return sizes


def _values_of(bound_symbol: BoundSymbol) -> list:
    if bound_symbol.symbol.name == "cat":
        return [*bound_symbol.args[0], *bound_symbol.args[1:]]
    return [*bound_symbol.args, *bound_symbol.kwargs.values()]


def _tensors_of(bound_symbol: BoundSymbol) -> list[TensorProxy]:
    """The tensors a prim reads and the one it makes."""
    return [a for a in _values_of(bound_symbol) if isinstance(a, TensorProxy)] + [bound_symbol.output]


class NvFuserExecutor(FusionExecutor):
    def is_available(self) -> tuple[bool, str]:
        """Installed, a CUDA device, and the module imports (imported here, once, on a CUDA machine)."""
        installed = [name for name in _MODULES if importlib.util.find_spec(name) is not None]
        if not installed:
            return (
                False,
                f"not installed: neither nvfuser_direct nor nvfuser imports ({INSTALL_HINT})",
            )
        if not torch.cuda.is_available():
            return False, "no CUDA device (nvFuser generates CUDA kernels only)"
        try:
            nvfuser_module()
        except Exception as error:  # a wheel built for another torch or CUDA fails here, not mid-run
            return False, f"import {installed[0]} failed: {type(error).__name__}: {error}"
        return True, ""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        if not self.fuses_on_any_device(bound_symbol):
            return False
        return all(t.device.type == "cuda" for t in _tensors_of(bound_symbol))

    def fuses_on_any_device(self, bound_symbol: BoundSymbol) -> bool:
        """What ``can_fuse`` claims, the device aside (tests build nvFuser's regions on the CPU)."""
        symbol = bound_symbol.symbol
        if not symbol.is_leaf or symbol.module != "prims" or not isinstance(bound_symbol.output, TensorProxy):
            return False
        name = symbol.name
        if name not in ELEMENTWISE and name not in REDUCTIONS and name not in SHAPES:
            return False
        if name == "slice_prim" and any(step != 1 for step in bound_symbol.args[3]):
            return False
        if name == "pad" and any(interior for _, _, interior in bound_symbol.args[2]):
            return False
        values = _values_of(bound_symbol)
        if any(isinstance(a, Proxy) and not isinstance(a, TensorProxy) for a in values):
            return False
        return all(t.dtype.torch_dtype in SUPPORTED_DTYPES for t in _tensors_of(bound_symbol))

    def can_execute(self, bound_symbol: BoundSymbol) -> bool:
        return _is_identity(bound_symbol) or super().can_execute(bound_symbol)

    def can_join(self, region: Sequence[BoundSymbol], bound_symbol: BoundSymbol) -> bool:
        """All reductions of one tensor in a fusion share their axes and their initial value.

        nvFuser 0.2.36 fails an internal assert lowering a kernel where one tensor feeds a sum
        (init 0) and an amax (init -inf): ``predicate_elimination.cpp:1056``, "Inconsistent setting
        of initialization value", seen on an H200 and an H100 with the "reductions" case of
        test_nvfuser (``x.sum(-1) + x.amax(-1) * ...``). Reductions of one tensor over different axes
        are kept apart too (that case also mixed dim 0 and dim 1). A refused reduction goes to
        another region.
        """
        if _reshapes_an_expansion(region, bound_symbol):
            return False
        if bound_symbol.symbol.name not in REDUCTIONS:  # before the aliases: a scan of the region
            return True
        aliases = _same_dtype_conversions([*region, bound_symbol])
        key = _reduction_key(bound_symbol, aliases)
        if key is None:
            return True
        others = (_reduction_key(b, aliases) for b in region)
        return all(other is None or other[0] != key[0] or other[1] == key[1] for other in others)

    def stages(self, region: Sequence[BoundSymbol], outputs: set[str]) -> list[list[BoundSymbol]]:
        """The symbols of each stage ``FusionRunner`` would run (one ``execute`` or ScalarStage each)."""
        region = [b for b in region if not _is_identity(b)]
        produced = [p for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        region_outputs = [p for p in produced if p.name in outputs]
        if not region_outputs:
            return []
        groups = scalar_groups_merged(stage_groups(region, inputs_of(region), region_outputs))
        return [symbols for (symbols, _, _), _ in groups]

    def fuse(
        self, region: list[BoundSymbol], index: int, outputs: Iterable[str] | None = None
    ) -> BoundSymbol:
        """One ``nvFusion<index>`` bound symbol; ``outputs`` names the values read after the region."""
        region = [b for b in region if not _is_identity(b)]
        produced = [p for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        wanted = set(outputs) if outputs is not None else {p.name for p in produced}
        inputs = inputs_of(region)
        region_outputs = [p for p in produced if p.name in wanted]
        runner = FusionRunner(region, inputs, region_outputs)
        name = f"nvFusion{index}"
        symbol = Symbol(name=name, id=f"{self.name}.{name}", meta=None, fn=runner, executor=self)
        return BoundSymbol(symbol, tuple(inputs), {}, tuple(region_outputs), tuple(region))

    writes_inputs = True

    def write_inputs(
        self, region: BoundSymbol, copies: Sequence[BoundSymbol], outputs: set[str]
    ) -> BoundSymbol | None:
        """``region`` writing the values of ``copies`` into their inputs (``FusionRunner``'s writes);
        the copies stay among its subsymbols, where the printed trace shows them and the torch
        fallback runs them. None for a region this class did not make (a subclass's own runner)."""
        runner = region.symbol.fn
        runner = getattr(runner, "runner", runner)  # under its FusionFallback
        if not isinstance(runner, FusionRunner):
            return None
        writes = [(c.args[1], c.args[0]) for c in copies]
        known = {p.name for p in runner.inputs}
        inputs = [*runner.inputs, *(d for _, d in writes if d.name not in known)]
        region_outputs = [p for p in runner.outputs if p.name in outputs]
        fn = FusionRunner(runner.region, inputs, region_outputs, writes)
        symbol = Symbol(
            name=region.symbol.name, id=region.symbol.id, meta=None, fn=fn, executor=self,
            tags=frozenset({"side_effect"}),
        )  # fmt: skip
        written = BoundSymbol(symbol, tuple(inputs), {}, tuple(region_outputs), (*runner.region, *copies))
        return with_fallback(written, self.name)


executor = NvFuserExecutor("nvfuser")
