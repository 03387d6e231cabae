"""Splitting a fusion region into Triton kernels and host-side views.

Every kernel iterates over one shape ``S``. Its values are *full* (shape ``S``) or, in a reduction
kernel with reduced dims ``D``, *row* values (``S`` without ``D``, or with ``D`` kept as size 1).
A reduction kernel is thus the row-wise pattern of softmax and layer norm; an elementwise kernel has
no ``D``. Broadcasting a row value back to ``S`` and reshaping between the two row shapes happen in
registers. Any other ``broadcast_in_dim`` or ``reshape`` becomes a host-side view (``expand``,
``reshape``) of a tensor the kernels then load with its (possibly zero) strides.

Symbols join a kernel of a producer if their shape fits, else any other kernel that fits without
creating a cycle between steps, else a new kernel. Steps run in a topological order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol

__all__ = ["KernelPlan", "ViewStep", "RegionPlan", "plan_region", "REDUCTION_NAMES", "row_shapes"]

REDUCTION_NAMES = frozenset({"sum", "amax", "amin", "var"})
_VIEWS = frozenset({"broadcast_in_dim", "reshape"})


def row_shapes(shape: tuple[int, ...], reduce_dims: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    dropped = tuple(s for d, s in enumerate(shape) if d not in reduce_dims)
    kept = tuple(1 if d in reduce_dims else s for d, s in enumerate(shape))
    return (dropped, kept)


@dataclass(eq=False)
class KernelPlan:
    """The symbols of one kernel and the kind ("full" or "row") of every tensor it touches."""

    shape: tuple[int, ...]
    reduce_dims: tuple[int, ...] | None = None
    bound_symbols: list[BoundSymbol] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    inputs: list[TensorProxy] = field(default_factory=list)
    outputs: list[TensorProxy] = field(default_factory=list)

    def kind_of(self, shape: tuple[int, ...]) -> str | None:
        if shape == self.shape:
            return "full"
        if self.reduce_dims is not None and shape in row_shapes(self.shape, self.reduce_dims):
            return "row"
        return None


@dataclass(frozen=True)
class ViewStep:
    """A ``broadcast_in_dim`` or ``reshape`` done by torch on the host (a view, no kernel)."""

    bound_symbol: BoundSymbol


@dataclass
class RegionPlan:
    steps: list[KernelPlan | ViewStep]
    inputs: list[TensorProxy]
    outputs: list[TensorProxy]


def plan_region(region: list[BoundSymbol], outputs: Iterable[str] | None = None) -> RegionPlan:
    """Kernels and views computing ``region``; ``outputs`` names what is read after it (default: all)."""
    planner = _Planner()
    for bound_symbol in region:
        planner.place(bound_symbol)
    produced = [p for b in region for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
    produced_names = {p.name for p in produced}
    wanted = set(outputs) if outputs is not None else produced_names
    region_outputs = [p for p in produced if p.name in wanted]
    inputs: dict[str, TensorProxy] = {}
    for b in region:
        for p in b.proxy_args():
            if isinstance(p, TensorProxy) and p.name not in produced_names:
                inputs.setdefault(p.name, p)
    planner.finish(wanted)
    return RegionPlan(planner.ordered_steps(), list(inputs.values()), region_outputs)


class _Planner:
    def __init__(self) -> None:
        self.steps: list[KernelPlan | ViewStep] = []
        self.home: dict[str, int] = {}  # value name -> index of the step that computes it
        self.reads: list[set[int]] = []  # step -> steps it reads from
        self.values: dict[str, TensorProxy] = {}

    def place(self, b: BoundSymbol) -> None:
        operands = [p for p in b.proxy_args() if isinstance(p, TensorProxy)]
        homes = {self.home[p.name] for p in operands if p.name in self.home}
        chosen = self._choose(b, operands, homes)
        if chosen is None:
            chosen = len(self.steps)
            if b.symbol.name in _VIEWS:
                self.steps.append(ViewStep(b))
            else:
                self.steps.append(KernelPlan(shape=self._iteration_shape(b)))
            self.reads.append(set())
        step = self.steps[chosen]
        if isinstance(step, KernelPlan):
            self._add_to_kernel(step, b, operands)
        self.reads[chosen] |= homes - {chosen}
        for p in b.proxy_outputs():
            if isinstance(p, TensorProxy):
                self.home[p.name] = chosen
                self.values[p.name] = p

    @staticmethod
    def _iteration_shape(b: BoundSymbol) -> tuple[int, ...]:
        if b.symbol.name in REDUCTION_NAMES:
            return tuple(b.args[0].shape)
        return tuple(b.output.shape)

    def _choose(self, b: BoundSymbol, operands: list[TensorProxy], homes: set[int]) -> int | None:
        producer_kernels = sorted(homes, reverse=True)
        others = [i for i in reversed(range(len(self.steps))) if i not in homes]
        for index in producer_kernels + others:
            step = self.steps[index]
            if (
                isinstance(step, KernelPlan)
                and self._fits(step, index, b, operands)
                and self._acyclic(index, homes)
            ):
                return index
        return None

    def _fits(self, kernel: KernelPlan, index: int, b: BoundSymbol, operands: list[TensorProxy]) -> bool:
        name = b.symbol.name
        local = {p.name: kernel.kinds[p.name] for p in operands if self.home.get(p.name) == index}
        if name in REDUCTION_NAMES:
            source, dims = b.args[0], tuple(b.args[1])
            if tuple(source.shape) != kernel.shape or kernel.reduce_dims not in (None, dims):
                return False
            return local.get(source.name, "full") == "full"
        if name in _VIEWS:
            source = b.args[0]
            if source.name not in local:
                return False  # views of loaded tensors are host views (they are free there)
            target = tuple(b.output.shape)
            if name == "broadcast_in_dim":
                return (
                    local[source.name] == "row" and target == kernel.shape and self._row_broadcast(kernel, b)
                )
            return kernel.kind_of(target) == local[source.name] == "row"
        kind = kernel.kind_of(tuple(b.output.shape))
        return kind is not None and all(k == kind for k in local.values())

    @staticmethod
    def _row_broadcast(kernel: KernelPlan, b: BoundSymbol) -> bool:
        source, dims = b.args[0], tuple(b.args[2])
        assert kernel.reduce_dims is not None
        kept = tuple(d for d in range(len(kernel.shape)) if d not in kernel.reduce_dims)
        if len(source.shape) == len(kernel.shape):
            return dims == tuple(range(len(kernel.shape)))
        return dims == kept

    def _acyclic(self, index: int, homes: set[int]) -> bool:
        """Whether reading ``homes`` from step ``index`` keeps the step graph acyclic."""
        return not any(self._depends_on(h, index) for h in homes if h != index)

    def _depends_on(self, step: int, ancestor: int) -> bool:
        seen: set[int] = set()
        stack = [step]
        while stack:
            current = stack.pop()
            if current == ancestor:
                return True
            if current not in seen:
                seen.add(current)
                stack.extend(self.reads[current])
        return False

    def _add_to_kernel(self, kernel: KernelPlan, b: BoundSymbol, operands: list[TensorProxy]) -> None:
        if b.symbol.name in REDUCTION_NAMES:
            kernel.reduce_dims = tuple(b.args[1])
        kernel.bound_symbols.append(b)
        for p in operands:
            if p.name not in kernel.kinds:  # read from memory: a region input or another step's output
                kind = kernel.kind_of(tuple(p.shape))
                assert kind is not None, f"{p.name} does not fit kernel of shape {kernel.shape}"
                kernel.kinds[p.name] = kind
                kernel.inputs.append(p)
        output = b.output
        kind = kernel.kind_of(tuple(output.shape))
        if b.symbol.name == "broadcast_in_dim":
            kind = "full"
        assert kind is not None
        kernel.kinds[output.name] = kind

    def finish(self, wanted: set[str]) -> None:
        read_elsewhere: set[str] = set()
        for index, step in enumerate(self.steps):
            names = (
                [p.name for p in step.inputs]
                if isinstance(step, KernelPlan)
                else [p.name for p in step.bound_symbol.proxy_args()]
            )
            read_elsewhere.update(n for n in names if self.home.get(n, index) != index)
        for step in self.steps:
            if isinstance(step, KernelPlan):
                produced = [b.output for b in step.bound_symbols]
                step.outputs = [p for p in produced if p.name in wanted or p.name in read_elsewhere]

    def ordered_steps(self) -> list[KernelPlan | ViewStep]:
        done: set[int] = set()
        order: list[int] = []
        while len(order) < len(self.steps):
            for index in range(len(self.steps)):
                if index not in done and self.reads[index] <= done:
                    done.add(index)
                    order.append(index)
                    break
            else:
                raise AssertionError("Triton fusion steps form a cycle")
        steps = [self.steps[i] for i in order]
        return [s for s in steps if not isinstance(s, KernelPlan) or s.outputs]
