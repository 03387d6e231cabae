"""The prologue's tensor checks as one call: ``TensorChecks`` and the ``CHECK_TENSORS`` line calling it.

``PrologueBuilder.finish`` (core/prologue.py) gathers the prologue's ``CHECK_TENSOR`` lines, one per
tensor input, into one ``CHECK_TENSORS`` line (``tensor_checks``) whose ``TensorChecks`` runs torch's
C++ tensor check (``TORCH_TENSOR_GUARDS``) after the first call that passes; ``fold_layout_guards``
then moves the checks of the inputs' own layouts into it. Every name here is also importable from
``thunder.core.prologue``.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from thunder.core.symbol import RETURN, BoundSymbol, Symbol
from thunder.core.trace import Trace

__all__ = [
    "CHECK_TENSORS",
    "TORCH_TENSOR_GUARDS",
    "TensorChecks",
    "fold_layout_guards",
    "same_shape",
    "tensor_checks",
]


def same_shape(actual: tuple, expected: tuple) -> bool:
    """``actual`` is ``expected``, where a None in ``expected`` (a symbolic dim) takes any size."""
    return len(actual) == len(expected) and all(e is None or a == e for a, e in zip(actual, expected))


def _torch_tensor_guards() -> Any:
    """torch's C++ tensor check, the one torch.compile's guards run, or None where this torch lacks it."""
    try:
        from torch._C._dynamo.guards import TensorGuards

        probe = torch.zeros(2, 3)
        # torch's stub omits the tensors (positional) and that its lists hold one list per tensor
        guards = TensorGuards(probe, dynamic_dims_sizes=None, dynamic_dims_strides=[[None, None]])  # type: ignore[misc,arg-type,list-item]
        # what the prologue relies on: same metadata passes, other metadata, a non-tensor, strides do not
        if not guards.check(torch.zeros(3, 2).t()) or guards.check(torch.zeros(2, 4)) or guards.check(2):
            return None
        if guards.check(torch.zeros(2, 3, dtype=torch.float64)) or guards.check(probe.requires_grad_()):
            return None
        return TensorGuards
    except Exception:  # noqa: BLE001 -- a private API: any change in it means the checks stay in Python
        return None


TORCH_TENSOR_GUARDS = _torch_tensor_guards()


class TensorChecks:
    """The checks of all of a prologue's tensors as one call: ``check(*tensors)`` is True when each has
    the shape, dtype, device and requires_grad the computation was traced with, and the layout the
    program's answers depend on (``layouts``: position -> (contiguous, traced strides), the layout
    guards of ``fold_layout_guards``).

    The first call that passes is checked in Python; its tensors then make torch's C++ tensor check
    (``torch._C._dynamo.guards.TensorGuards``), which later calls run: about 60 ns a tensor, against
    400 ns for a line of Python reading four attributes. torch's check never checks less: it also
    checks the exact class (a ``Parameter`` is not a plain tensor), the device index and the dispatch
    keys under the thread's state (an inference tensor, a conjugate view, autocast), so a call
    differing only there compiles another entry. Made on the first call, not while compiling, so that
    it records the caller's state, not the compiler's.

    Two of torch's checks are made: ``native`` leaves strides unchecked (what the entry requires),
    ``exact`` also checks the first call's strides of every tensor of static shape. A call passing
    ``exact`` needs no layout check of its own, and its strides are known: ``covered()`` says so to
    the computation's CUDA graphs (their key then leaves those tensors' strides out). A call failing
    ``exact`` is checked as the entry requires (``native`` and the layouts in Python); if it passes,
    the tensors whose strides differed are left out of ``exact`` from then on, so that a program
    called with changing strides does not take the slow path every time.
    """

    def __init__(
        self,
        expected: tuple[tuple[tuple[int, ...], torch.device, torch.dtype, bool], ...],
        layouts: dict[int, tuple[bool, tuple[int, ...]]] | None = None,
        arg_positions: tuple[int | None, ...] = (),
    ):
        self.expected = expected  # per tensor: shape, device, dtype, requires_grad
        self.layouts = dict(layouts or {})
        self.arg_positions = arg_positions  # per tensor: its position among the computation's inputs
        self.native: Any = None
        self.exact: Any = None
        self._recorded: list[list[int | None]] = []  # the strides ``exact`` checks (None: not checked)
        self._covered: tuple[int, tuple[int, ...]] | None = None  # (version, computation positions)
        self._local = threading.local()
        self.check: Any = self._check_first

    def _check_first(self, *tensors: Any) -> bool:
        if self.mismatch(tensors) is not None:
            return False
        try:
            unchecked = [[None] * t.dim() for t in tensors]  # the prologue never checked strides
            sizes = [list(shape) for shape, *_ in self.expected]  # None: a symbolic dim, not checked
            native = TORCH_TENSOR_GUARDS(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=unchecked)
        except Exception:  # noqa: BLE001 -- keep checking in Python
            native = None
        if native is None or not native.check(*tensors):
            self.check = self._check_python
            return True
        self.native = native
        self._recorded = [
            list(t.stride()) if None not in shape else [None] * t.dim()
            for t, (shape, *_) in zip(tensors, self.expected)
        ]
        self._make_exact(tensors)
        self.check = self._check_exact
        return True

    def _make_exact(self, tensors: tuple) -> None:
        sizes = [list(shape) for shape, *_ in self.expected]
        self.exact = TORCH_TENSOR_GUARDS(
            *tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=self._recorded
        )
        positions = tuple(
            p
            for p, strides in zip(self.arg_positions, self._recorded)
            if p is not None and None not in strides
        )
        version = 0 if self._covered is None else self._covered[0] + 1
        self._covered = (version, positions)
        self._local.covered = self._covered

    def _check_exact(self, *tensors: Any) -> bool:
        if self.exact.check(*tensors):
            self._local.covered = self._covered
            return True
        self._local.covered = None
        if self.mismatch(tensors) is not None:
            return False
        for index, (t, recorded) in enumerate(zip(tensors, self._recorded)):  # passed, other strides
            if None not in recorded and list(t.stride()) != recorded:
                self._recorded[index] = [None] * t.dim()
        self._make_exact(tensors)
        return True

    def _check_python(self, *tensors: Any) -> bool:
        return self.mismatch(tensors) is None

    def covered(self) -> tuple[int, tuple[int, ...]] | None:
        """For the computation called after this check passed (once: taken, it is forgotten): the
        positions among its inputs whose strides are those ``exact`` recorded, and a version that
        changes whenever those positions do; None when the last check did not pass ``exact``."""
        local = self._local
        covered = getattr(local, "covered", None)
        local.covered = None
        return covered

    def mismatch(self, tensors: tuple) -> tuple[int, list[tuple[str, str, str]]] | None:
        """The position of the first tensor failing the checks and what differs (what, before, after:
        ``("shape", "(4,)", "(2, 2)")``), or None when all pass."""
        if len(tensors) != len(self.expected):
            return -1, [("the number of tensors", str(len(self.expected)), str(len(tensors)))]
        for index, (t, (shape, device, dtype, requires_grad)) in enumerate(zip(tensors, self.expected)):
            if not isinstance(t, torch.Tensor):
                return index, [("", "a tensor", f"a {type(t).__qualname__}")]
            wanted: dict[str, Any] = {
                "shape": tuple(shape),
                "dtype": dtype,
                "requires_grad": requires_grad,
                "device": device,
            }
            actual: dict[str, Any] = {
                "shape": tuple(t.shape),
                "dtype": t.dtype,
                "requires_grad": t.requires_grad,
                "device": t.device,
            }
            if same_shape(actual["shape"], wanted["shape"]):  # symbolic dims (None) take any size
                actual["shape"] = wanted["shape"]
            differing = [k for k in wanted if wanted[k] != actual[k]]
            if differing:
                from thunder.core.prologue import shown_value  # prologue imports this module

                return index, [(k, shown_value(wanted[k]), shown_value(actual[k])) for k in differing]
        if self.native is not None and not self.native.check(*tensors):
            names = [f"input{i}" for i in range(len(tensors))]
            message = str(self.native.check_verbose(*tensors, tensor_check_names=names))
            index = next((i for i, name in enumerate(names) if f"'{name}'" in message), 0)
            return index, [("kind (torch's tensor check)", "as on the first call", message)]
        for index, (contiguous, traced) in self.layouts.items():
            if not _layout_holds(tensors[index], contiguous, traced):
                from thunder.core import layouts  # layouts imports prologue, which imports this module

                before, after, consequence = layouts.describe_guard(
                    tensors[index], (), "strides", (), contiguous, traced
                )
                return index, [("layout:", before, f"{after}; {consequence}")]
        return None


def _layout_holds(x: torch.Tensor, contiguous: bool, traced: tuple) -> bool:
    """``layouts.guard``'s check of an input's own layout: contiguous, or the very strides traced."""
    return x.is_contiguous() if contiguous else tuple(x.stride()) == tuple(traced)


def _print_check_tensors(bound_symbol: BoundSymbol) -> list[str]:
    checks_name, entries, *rest = bound_symbol.args
    layouts = rest[0] if rest else {}

    def layout(index: int) -> str:
        if index not in layouts:
            return ""
        contiguous, traced = layouts[index]
        return ", layout contiguous" if contiguous else f", layout strides {tuple(traced)}"

    expected = [
        f"# {proxy.name}: shape {tuple(shape)!r}, dtype {dtype}, device {proxy.device}, "
        f"requires_grad {requires_grad}{layout(index)}"
        for index, (proxy, shape, _, dtype, requires_grad) in enumerate(entries)
    ]
    names = ", ".join(entry[0].name for entry in entries)
    return [*expected, f"if not {checks_name}.check({names}): raise GuardFailure"]


CHECK_TENSORS = Symbol(
    name="check_tensors", id="prologue.check_tensors", meta=lambda *args: None, printer=_print_check_tensors
)


def tensor_checks(
    entries: tuple,
    constants: dict[str, Any],
    name: str,
    layouts: dict[int, tuple[bool, tuple[int, ...]]] | None = None,
    arg_positions: tuple[int | None, ...] = (),
) -> BoundSymbol:
    """The ``CHECK_TENSORS`` line for ``entries`` (the arguments of ``CHECK_TENSOR`` lines: proxy, shape,
    device name, dtype, requires_grad), its ``TensorChecks`` bound as ``name`` in ``constants``."""
    expected = tuple(
        (tuple(shape), constants[device], dtype, requires_grad)
        for _, shape, device, dtype, requires_grad in entries
    )
    constants[name] = TensorChecks(expected, layouts, arg_positions)
    return BoundSymbol(CHECK_TENSORS, (name, tuple(entries), dict(layouts or {})))


def fold_layout_guards(prologue: Trace) -> TensorChecks | None:
    """Move the checks of inputs' own layouts (``layouts.guard(x, (), 'strides', ...)`` on a tensor of
    static shape) into the prologue's ``TensorChecks``, whose C++ check then covers them, and tell it
    where each tensor goes among the computation's inputs (for ``TensorChecks.covered``). Run once the
    prologue has all its guards, before its callable is made. Returns the ``TensorChecks``, if any."""
    bound_symbols = prologue.bound_symbols
    found = next(((i, b) for i, b in enumerate(bound_symbols) if b.symbol is CHECK_TENSORS), None)
    if found is None or prologue._python_callable is not None:
        return None
    _, checks_line = found
    name, entries, layouts = checks_line.args
    index_of = {entry[0].name: i for i, entry in enumerate(entries)}
    layouts, kept = dict(layouts), []
    for bound in bound_symbols:
        if bound.symbol.id == "layouts.guard":
            x, steps, kind, _, expected, traced = bound.args
            index = index_of.get(getattr(x, "name", None))
            if kind == "strides" and not steps and index is not None and None not in entries[index][1]:
                layouts[index] = (expected, tuple(traced))
                continue
        kept.append(bound)
    returned: list = next((b.args[0] for b in reversed(bound_symbols) if b.symbol is RETURN), [])
    position_of = {getattr(p, "name", None): i for i, p in enumerate(returned)}
    arg_positions = tuple(position_of.get(entry[0].name) for entry in entries)
    kept[kept.index(checks_line)] = tensor_checks(entries, prologue.constants, name, layouts, arg_positions)
    bound_symbols[:] = kept
    return prologue.constants[name]
