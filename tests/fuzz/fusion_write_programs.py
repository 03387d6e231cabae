"""Random programs that update their inputs in place, for fuzzing copy-backs taken into fusion regions.

A program is a function ``f(a, b, ...)`` of 2-4 float32 inputs, some of them views of one base
(a slice, a transpose, a ``.view``, or the base itself passed twice), whose lines mix in-place updates
of the inputs, of views of them and of clones (``add_``, ``mul_``, ``copy_``, ``lerp_``,
``addcmul_``, slice writes ``x[1:] += ...``) with reads of old and new values that run on torch
between nvFuser's regions (``clone``, matmuls, sums) or inside them (elementwise ops, reductions).

``check_program`` runs it under ``thunder.jit`` with nvFuser's regions built on any device
(``AnyDeviceNvFuser``: on the CPU they run on the torch fallback, which runs the copies a region
took in where the region runs), called several times on new values, against eager PyTorch: the
outputs and every input's final value must agree. Each line is tried eagerly while the program is
built, so every program runs in eager mode.

On the CPU a kernel that writes an input while it reads it never runs, so the plan is checked on the
real tensors instead (``_unsafe_writes``): no stage that nvFuser would have write an input in place,
nor a later stage of its region, may read another tensor sharing the input's memory (a view of it).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import torch
from hypothesis import strategies as st

import thunder
from thunder.core.fusion_fallback import ExecutorFallbackWarning, FusionFallback
from thunder.core.symbol import BoundSymbol
from thunder.executors.nvfuser.executor import FusionRunner, FusionStage, NvFuserExecutor

__all__ = ["WriteProgram", "write_programs", "check_program", "Mismatch", "transform_disabled", "counts"]

NAMES = "abcd"
# how input i is made from its own base B<i> or, where inputs share memory, from B0 (4x4): the base
# itself, or a view of it (a slice, a transpose, a ``.view``); "B0" twice is one tensor passed twice
INPUT_LAYOUTS = [
    "{B}", "{B}", "{B}[1:]", "{B}[:, 1:]", "{B}.t()", "{B}.view(2, -1)", "{B}[1]", "{B}[:2]", "{B}.view(-1)",
    "{B}[::2]",
]  # fmt: skip
BASE_SHAPES = [(4, 4), (4, 4), (3, 4), (4,)]
WRITE_TARGETS = ["{x}", "{x}", "{x}", "{x}[1:]", "{x}.t()", "{x}[:, :2]", "{x}.view(-1)", "{x}[0]"]
WRITES = [  # {t}: what is written (an input, a clone, or a view of one); {y}, {z}: same shape as {t}
    "{t}.add_({y})", "{t}.add_({y}, alpha=0.5)", "{t}.mul_({n})", "{t}.mul_({y}.sigmoid())",
    "{t}.copy_({y})", "{t}.copy_({y} * {n})", "{t}.lerp_({y}, 0.25)", "{t}.addcmul_({y}, {z}, value=0.5)",
    "{t}.div_({y}.abs() + 1)", "{t}.sub_({y}.exp() * 0.1)", "{t}.neg_()", "{t}.clamp_(-1.0, 1.0)",
    "{t}[1:] += {y}[1:]", "{t}[..., :2] *= {n}", "{t}[0] = {y}[0] + 1", "{t}.mul_(0.5).add_({y})",
    "{t}.copy_({t} / ({t}.sum().abs() + 1))", "{t}.copy_({t} * 2 + {y}.sum())",
]  # fmt: skip
READS = [  # {v}: a fresh name
    "{v} = {x}.clone()", "{v} = {x} @ {y}", "{v} = {x} @ {x}.mT", "{v} = torch.sum({x})", "{v} = {x}.sum(0)",
    "{v} = {x}.amax(-1, keepdim=True)", "{v} = {x} * 2 + 1", "{v} = torch.exp({x}) - {y}", "{v} = {x}.mean()",
    "{v} = {x}[1:]", "{v} = {x}.t()", "{v} = torch.softmax({x}, -1)", "{v} = {x}.sum() * {y}",
    "{v} = {x}.cumsum(0)", "{v} = {x}.clone(); {v}.mul_({y})", "{v} = {x} + {y}",
    # views read by torch (a matmul) after a region that makes a new value of their base
    "{v} = {x}.t() @ {y}", "{v} = {x}[1:] @ {y}", "{v} = {x}.view(-1) @ {y}.view(-1)", "{v} = {x}.mT @ {y}.t()",
    "{v} = {x} * 2 - {y}", "{v} = {x}.sigmoid() * {y}", "{v} = {x} @ {y}.mT", "{v} = {x}.view(-1)",
    "{v} = {x}[:, 1:]", "{v} = {x}.mT", "{v} = {x}[1:]", "{v} = {x}.t()",
]  # fmt: skip
NUMBERS = ["2.0", "-0.5", "3", "0.25"]


@dataclass
class WriteProgram:
    layouts: list[str]  # per input, its expression over the bases
    base_shapes: list[tuple[int, ...]]  # of B0, B1, ...
    lines: list[str]
    returns: list[str]

    @property
    def source(self) -> str:
        params = ", ".join(NAMES[: len(self.layouts)])
        inputs = ", ".join(f"{n}={e}" for n, e in zip(NAMES, self.layouts))
        body = [f"    {part}" for line in self.lines for part in line.split("\n")]
        return "\n".join(
            [f"# inputs: {inputs}; bases: {self.base_shapes}", f"def f({params}):"]
            + body
            + [f"    return ({', '.join(self.returns)},)"]
        )

    @property
    def shares_memory(self) -> bool:
        """Whether two different input tensors share memory (one tensor passed twice is one input)."""
        per_base: dict[str, list[str]] = {}
        for layout in self.layouts:
            per_base.setdefault(layout[:2], []).append(layout)
        return any(len(layouts) > 1 and set(layouts) != {base} for base, layouts in per_base.items())

    def inputs(self, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(bases, inputs): fresh tensors, the inputs made from the bases as ``layouts`` say."""
        generator = torch.Generator().manual_seed(seed)
        bases = [torch.randn(shape, generator=generator) for shape in self.base_shapes]
        namespace = {f"B{i}": base for i, base in enumerate(bases)}
        return bases, [eval(layout, namespace) for layout in self.layouts]

    def function(self) -> Callable:
        namespace = {"torch": torch}
        exec(self.source, namespace)
        return namespace["f"]


def _try(line: str, env: dict) -> bool:
    """Whether ``line`` runs eagerly on ``env``'s tensors (and updates ``env`` if it does)."""
    trial = dict(env)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(line, trial)
    except Exception:  # noqa: BLE001 -- eager rejects it for these shapes: another line
        return False
    env.clear()
    env.update(trial)
    return True


def _tensors(env: dict) -> list[str]:
    return [name for name, value in env.items() if isinstance(value, torch.Tensor)]


@st.composite
def write_programs(draw: st.DrawFn) -> WriteProgram:
    count = draw(st.integers(2, 4))
    share = draw(st.integers(0, 2)) == 0
    base_shapes = [(4, 4), *(draw(st.sampled_from(BASE_SHAPES)) for _ in range(count - 1))]
    layouts = []
    for i in range(count):
        base = "B0" if share and draw(st.booleans()) else f"B{i}"
        layout = draw(st.sampled_from(INPUT_LAYOUTS)).format(B=base)
        try:
            eval(layout, {base: torch.empty(base_shapes[int(base[1])])})
        except Exception:  # noqa: BLE001 -- not a view of this shape
            layout = base
        layouts.append(layout)
    program = WriteProgram(layouts, base_shapes, [], [])
    _, inputs = program.inputs(0)
    env: dict = {"torch": torch, **dict(zip(NAMES, inputs))}
    fresh = iter(f"v{i}" for i in range(100))
    for _ in range(draw(st.integers(1, 7))):
        for _attempt in range(12):
            names = _tensors(env)
            x = draw(st.sampled_from(names))
            if draw(st.booleans()):  # a write: into an input or a view of one, mostly
                target = draw(st.sampled_from(WRITE_TARGETS)).format(x=x)
                try:
                    shape = eval(target, dict(env)).shape
                except Exception:  # noqa: BLE001
                    continue
                same = [n for n in names if env[n].shape == shape] or [f"{x}.mean()"]
                made = [n for n in same if n.startswith("v")]  # a value made earlier, written late
                if made and draw(st.booleans()):
                    same = made
                line = draw(st.sampled_from(WRITES)).format(
                    t=target, y=draw(st.sampled_from(same)), z=draw(st.sampled_from(same)),
                    n=draw(st.sampled_from(NUMBERS)),
                )  # fmt: skip
            else:
                y = draw(st.sampled_from(names))
                line = draw(st.sampled_from(READS)).format(v=next(fresh), x=x, y=y)
            if _try(line, env):
                program.lines.append(line)
                break
    names = [n for n in _tensors(env) if n != "torch"]
    program.returns = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    return program


class AnyDeviceNvFuser(NvFuserExecutor):
    """nvFuser's claims without its CUDA-only check; its regions fall back to torch on the CPU
    (as in packages/thunder-executors/tests/test_nvfuser_writes.py)."""

    def can_fuse(self, bound_symbol: BoundSymbol) -> bool:
        return self.fuses_on_any_device(bound_symbol)

    def is_available(self) -> tuple[bool, str]:
        return True, ""


def _copies_taken(jitted: Callable) -> int:
    """How many copy-backs the last trace's fusion regions took in."""
    trace = thunder.last_traces(jitted)[-1]
    regions = [b for b in trace.bound_symbols if "side_effect" in b.symbol.tags and b.subsymbols]
    return sum(s.symbol.id == "inplace.copy_" for b in regions for s in b.subsymbols)


class Mismatch(AssertionError):
    pass


def _overlap(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr():
        return False

    def span(t: torch.Tensor) -> tuple[int, int]:
        last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n)
        return t.storage_offset(), last

    (a, b), (c, d) = span(x), span(y)
    return a <= d and c <= b


def _unsafe_writes(runner: FusionRunner, args: tuple, found: list[str]) -> None:
    """Where a stage writes an input in place (an aliased output), another tensor that the stage or a
    later one reads, given to the region, sharing the input's memory: on a GPU it would read values
    written during the region."""
    given = {p.name: t for p, t in zip(runner.inputs, args) if isinstance(t, torch.Tensor)}
    for k, stage in enumerate(runner.stages):
        for _, destination in getattr(stage, "writes", ()) if isinstance(stage, FusionStage) else ():
            written = given[destination.name]
            read = {p.name for later in runner.stages[k:] for p in later.inputs} - {destination.name}
            found.extend(
                f"a stage writes {destination.name} in place while its region reads {name}, a view of it"
                for name in sorted(read)
                if name in given and _overlap(given[name], written)
            )


@contextlib.contextmanager
def _plans_checked(found: list[str]) -> Iterator[None]:
    run = FusionFallback.__call__

    def checked(self: FusionFallback, *args: object) -> object:
        if isinstance(self.runner, FusionRunner) and self.runner.writes:
            _unsafe_writes(self.runner, args, found)
        return run(self, *args)

    with mock.patch.object(FusionFallback, "__call__", checked):
        yield


@contextlib.contextmanager
def transform_disabled() -> Iterator[None]:
    """The oracle: copy-backs stay where functionalization and ``place_copy_backs`` put them."""
    with mock.patch("thunder.core.pipeline.copy_backs_into_fusions", lambda trace: trace):
        yield


# how many programs and calls ran, and how many thunder refused (by the first words of its error)
counts: dict = {"programs": 0, "calls": 0, "skipped programs": 0, "refused": {}}


def check_program(program: WriteProgram, seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    """Raise ``Mismatch`` where a jitted call's outputs or inputs differ from eager's."""
    counts["programs"] += 1
    f = program.function()
    jitted = thunder.jit(f, executors=[AnyDeviceNvFuser("nvfuser_on_cpu"), "torch"])
    for seed in seeds:
        eager_bases, eager_inputs = program.inputs(seed)
        bases, inputs = program.inputs(seed)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = f(*eager_inputs)
        except RuntimeError:
            counts["skipped programs"] += 1  # eager rejects these values (built on others)
            return
        unsafe: list[str] = []
        try:
            with warnings.catch_warnings(), _plans_checked(unsafe):
                warnings.simplefilter("ignore", ExecutorFallbackWarning)
                actual = jitted(*inputs)
        except NotImplementedError as error:
            key = str(error)[:70]
            counts["refused"][key] = counts["refused"].get(key, 0) + 1
            return
        except Exception as error:  # noqa: BLE001 -- eager ran it: any other error is a wrong answer
            raise Mismatch(
                f"call with seed {seed}: thunder raised {error!r}, eager did not\n{program.source}"
            ) from None
        counts["calls"] += 1
        if unsafe:
            raise Mismatch(f"call with seed {seed}: {unsafe[0]}\n{program.source}")
        if seed == seeds[0] and _copies_taken(jitted):
            counts["programs with copies taken"] = counts.get("programs with copies taken", 0) + 1
        for what, a, e in (
            ("outputs", actual, expected),
            ("inputs", [*bases, *inputs], [*eager_bases, *eager_inputs]),
        ):
            try:
                torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5, equal_nan=True)
            except AssertionError as error:
                raise Mismatch(
                    f"call with seed {seed}: {what} differ from eager's\n{program.source}\n{error}"
                ) from None
