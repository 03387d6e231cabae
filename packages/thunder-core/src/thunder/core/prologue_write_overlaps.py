"""The prologue's check that no tensor input the program writes in place shares memory with another.

A trace treats each tensor input as memory of its own: ``a.add_(1); return b * 2`` records
``t0 = a + 1; t1 = b * 2; copy_(a, t0)``, and executors may run the copy before or after the read of
``b``. Called with ``b = a.t()`` or ``b = a[1:]``, eager reads the new values through ``b``; the trace
does not know it should. Identical objects are one input already (``PrologueBuilder.add_tensor``);
this check covers distinct tensors over one memory: ``CHECK_WRITES_APART``, added by ``_finish_compile``
(core/pipeline.py) when the computation writes an input, fails a call where a written input overlaps
any other tensor input. A program traced for such a call is refused with an error naming both
(``pipeline._compile_and_fetch``), not run with another answer than eager's.

The check costs one storage address per tensor input (about 0.15 us each on a 2-core CPU) and runs
only in prologues of programs that write inputs. Tensors over one storage (a flat buffer's views, an
optimizer over a flattened model) are compared by the memory they reach; views that only interleave
(``B[:, 0]`` and ``B[:, 1]``) are told apart element by element when small, else refused as
overlapping.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace

__all__ = [
    "CHECK_WRITES_APART",
    "InputsShareMemoryError",
    "WriteOverlaps",
    "add_write_overlap_check",
    "memory_overlaps",
    "write_overlap_check",
]


class InputsShareMemoryError(NotImplementedError):
    """A tensor input the program writes in place shares memory with another tensor input."""


# Views spanning more elements than this are compared by their address ranges only (conservative).
_EXACT_COMPARISON_ELEMENTS = 1 << 22


def _storage_address(t: torch.Tensor) -> int:
    try:
        return _STORAGE_OF(t)
    except Exception:  # noqa: BLE001 -- no storage of its own (a sparse or wrapper tensor): never shared here
        return 0


def _address_range(t: torch.Tensor) -> tuple[int, int]:
    """The bytes ``t`` reaches: [first, last + 1)."""
    start = t.data_ptr()
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    size = t.element_size()
    return start + low * size, start + (high + 1) * size


def _element_offsets(t: torch.Tensor, base: int) -> torch.Tensor:
    """The offsets (in elements, from address ``base``) of ``t``'s elements."""
    first = (t.data_ptr() - base) // t.element_size()
    span = _address_range(t)[1] - base
    positions = torch.arange(span // t.element_size())
    return torch.as_strided(positions, tuple(t.shape), tuple(t.stride()), first).reshape(-1)


def memory_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` (distinct tensors) may reach a common element."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    a_start, a_end = _address_range(a)
    b_start, b_end = _address_range(b)
    if a_end <= b_start or b_end <= a_start:
        return False
    base = min(a_start, b_start)
    size = a.element_size()
    aligned = (a.data_ptr() - base) % size == 0 and (b.data_ptr() - base) % size == 0
    if (
        b.element_size() != size
        or not aligned
        or (max(a_end, b_end) - base) // size > _EXACT_COMPARISON_ELEMENTS
    ):
        return True  # not compared element by element: assumed to overlap
    reached = torch.zeros((max(a_end, b_end) - base) // size, dtype=torch.bool)
    reached[_element_offsets(a, base)] = True
    return bool(reached[_element_offsets(b, base)].any())


# Which storage a tensor is in: the address of its StorageImpl, one C call without a Python storage
# object (torch._C._storage_address; a private function, so the public spelling where it is gone).
def _storage_data_address(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


_STORAGE_OF: Callable[[torch.Tensor], int] = getattr(torch._C, "_storage_address", _storage_data_address)


class WriteOverlaps:
    """``check(*tensors)``: True when none of the tensors at positions ``written`` shares memory with
    another of ``tensors`` (the computation's tensor inputs, in the prologue's order)."""

    def __init__(self, written: tuple[int, ...], count: int):
        self.written = written
        self._written_set = frozenset(written)
        others = tuple(k for k in range(count) if k not in self._written_set)
        self._pick_written = _picker(written)
        self._pick_others = _picker(others)
        # tensors over a written storage as on the last call that passed: their storages, addresses
        # and strides (a flat buffer's views are swept once, not on every call)
        self._passed_shared: tuple | None = None

    def check(self, *tensors: torch.Tensor) -> bool:
        return self.overlap(tensors) is None

    def overlap(self, tensors: tuple) -> tuple[int, int] | None:
        """A (written position, other position) pair of tensors sharing memory, or None."""
        try:
            addresses = list(map(_STORAGE_OF, tensors))
        except Exception:  # noqa: BLE001 -- a tensor without a storage of its own is among them
            addresses = [_storage_address(t) for t in tensors]
        if len(set(addresses)) == len(addresses):
            return None  # the common case: every tensor in a storage of its own
        written = self._pick_written(addresses)
        alone = set(written)
        if len(alone) == len(written) and alone.isdisjoint(self._pick_others(addresses)):
            return None  # only tensors that are not written share storages (a decode step's positions)
        alone.discard(0)  # 0: no storage
        shared: dict[int, list[int]] = {}  # storage address -> positions, for the written storages
        for position, address in enumerate(addresses):
            if address in alone:
                shared.setdefault(address, []).append(position)
        groups = [positions for positions in shared.values() if len(positions) > 1]
        key = tuple(
            (addresses[k], k, tensors[k].data_ptr(), tuple(tensors[k].shape), tuple(tensors[k].stride()))
            for positions in groups
            for k in positions
        )
        if key == self._passed_shared:
            return None  # the same memory as on the last call that passed
        for positions in groups:
            found = _overlap_among(tensors, positions, self._written_set)
            if found is not None:
                return found
        self._passed_shared = key
        return None


def _picker(positions: tuple[int, ...]) -> Callable[[list], tuple]:
    """The items at ``positions`` of a list, as a tuple, picked at C speed."""
    if not positions:
        return lambda items: ()
    if len(positions) == 1:
        only = positions[0]
        return lambda items: (items[only],)
    return operator.itemgetter(*positions)


def _overlap_among(tensors: tuple, positions: list[int], written: frozenset[int]) -> tuple[int, int] | None:
    """A (written, other) pair among ``positions`` (tensors over one storage) that overlap, found by a
    sweep over their address ranges: the views of a flat buffer cost a sort, not a comparison each."""
    ranges = sorted((*_address_range(tensors[k]), k) for k in positions if tensors[k].numel())
    open_ranges: list[tuple[int, int]] = []  # (end, position) of ranges not yet passed
    for start, end, k in ranges:
        open_ranges = [(e, j) for e, j in open_ranges if e > start]
        for _, j in open_ranges:
            if (j in written or k in written) and memory_overlaps(tensors[j], tensors[k]):
                return (j, k) if j in written else (k, j)
        open_ranges.append((end, k))
    return None


def _print_check_writes_apart(bound_symbol: BoundSymbol) -> list[str]:
    name, proxies, written = bound_symbol.args
    shown = ", ".join(proxies[i].name for i in written)
    return [
        f"# the inputs written in place ({shown}) share no memory with other tensor inputs",
        f"if not {name}.check({', '.join(p.name for p in proxies)}): raise GuardFailure",
    ]


CHECK_WRITES_APART = Symbol(
    name="check_writes_apart",
    id="prologue.check_writes_apart",
    meta=lambda *args: None,
    printer=_print_check_writes_apart,
)


def write_overlap_check(
    proxies: tuple[Any, ...], written: tuple[int, ...], constants: dict[str, Any], name: str
) -> BoundSymbol:
    """The ``CHECK_WRITES_APART`` line for the tensor inputs ``proxies`` of which those at ``written``
    are written, its ``WriteOverlaps`` bound as ``name`` in ``constants``."""
    constants[name] = WriteOverlaps(written, len(proxies))
    return BoundSymbol(CHECK_WRITES_APART, (name, proxies, written))


def add_write_overlap_check(prologue: Trace, written_names: set[str]) -> WriteOverlaps | None:
    """Append the ``CHECK_WRITES_APART`` line to a finished prologue (before its return) when the
    computation writes some of its tensor inputs (``written_names``), so that a call whose written
    input shares memory with another tensor input is not accepted. Returns the check, if added."""
    if not written_names or prologue._python_callable is not None:
        return None
    bound_symbols = prologue.bound_symbols
    returned = next((b for b in reversed(bound_symbols) if b.symbol is RETURN), None)
    if returned is None:
        return None
    tensors = tuple(p for p in returned.args[0] if isinstance(p, TensorProxy))
    written = tuple(i for i, p in enumerate(tensors) if p.name in written_names)
    if not written or len(tensors) < 2:
        return None
    name = "_write_overlaps"
    while name in prologue.names:
        name = f"_{name}"
    prologue.names.add(name)
    bound_symbols.insert(
        bound_symbols.index(returned), write_overlap_check(tensors, written, prologue.constants, name)
    )
    return prologue.constants[name]
