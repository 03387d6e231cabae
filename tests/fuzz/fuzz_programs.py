"""Random tensor programs for the differential fuzzer: generated as Python source, checked on meta tensors.

A program is the source of a function ``make(c)`` returning ``f(a, b, k, ...)`` (``c`` becomes a
closure cell of ``f``); ``f`` reads the globals ``SCALE`` (a float) and ``W`` (a tensor) of the
namespace it is executed in. Each line is one op over earlier values: elementwise ops with
broadcasting, Python numbers, reductions, views, in-place updates of clones (or, without gradients,
of the inputs, and writes through views of views, eager's aliases, ``out=``, ``__setitem__`` with
masks, tensors, ``None`` and ellipsis, keys mixing index tensors with slices and bools, ``index_put_``,
``masked_fill_``, writes into expanded tensors, which eager refuses, or into one copy of them, writes
through ``detach()``, ``.data`` and under no_grad, resizing ``out=``), dtype conversions, integer and
bool tensors with Python numbers, 0-dim tensors, and Python control flow on shapes and on the number
``k``.

Each candidate line is run on meta tensors while the program is built: a line eager PyTorch
rejects for the shapes at hand is replaced by a simpler one, so every program runs in eager mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

__all__ = ["Program", "programs", "build"]

FLOATS = ("torch.float32", "torch.float64")


@dataclass
class Program:
    source: str
    shapes: list[tuple[int, ...]]  # of the tensor inputs a, b, ...
    dtype: torch.dtype
    k: float | int  # the Python number argument
    c: float  # the closure value
    w_shape: tuple[int, ...]
    grads: bool  # whether the inputs require grad (then nothing updates an input in place)
    notes: list[str] = field(default_factory=list)


# (template, needs) -- {x}, {y}: earlier values; {n}: a small Python number; {d}: a dim of {x}
UNARY = [
    "torch.neg({x})", "{x}.abs()", "torch.exp({x}.clamp(max=4.0))", "torch.tanh({x})", "torch.sin({x})",
    "{x}.cos()", "torch.sigmoid({x})", "torch.relu({x})", "torch.nn.functional.gelu({x})",
    "torch.sqrt({x}.abs() + 1)", "torch.log1p({x}.abs())", "{x} * {x}", "{x} ** 2", "-{x} + {n}",
    "{x} * {n}", "{x} / 2", "torch.nn.functional.silu({x})", "{x}.float()", "{x}.double()",
    "{x}.to(torch.float32)", "torch.clamp({x}, -1.0, 1.0)", "torch.rsqrt({x}.abs() + 0.5)",
]  # fmt: skip
BINARY = [
    "{x} + {y}", "{x} - {y}", "{x} * {y}", "{x} / ({y}.abs() + 1)", "torch.maximum({x}, {y})",
    "torch.minimum({x}, {y})", "torch.where({x} > {y}, {x}, {y} * 2)", "torch.add({x}, {y}, alpha=2)",
    "torch.lerp({x}, {y}, 0.25)",
]  # fmt: skip
REDUCE = [
    "{x}.sum({d})", "{x}.sum({d}, keepdim=True)", "{x}.mean({d})", "torch.amax({x}, {d}, keepdim=True)",
    "torch.softmax({x}, {d})", "torch.log_softmax({x}, dim={d})", "{x}.var({d}, keepdim=True)",
    "torch.cumsum({x}, {d})", "{x}.sum()", "{x}.norm(dim={d})",
]  # fmt: skip
VIEW = [
    "{x}.transpose(0, -1)", "{x}.reshape(-1)", "{x}.unsqueeze(0)", "{x}.flatten()", "{x}.t()",
    "{x}.permute(*reversed(range({x}.ndim)))", "{x}[..., ::2]", "{x}[0]", "{x}[-1:]", "{x}.squeeze()",
    "{x}.view({x}.shape[0], -1)", "{x}.expand(2, *{x}.shape)", "{x}.contiguous()", "{x}.narrow({d}, 0, 1)",
    "{x}.mT", "{x}.unbind(0)[0]", "{x}.chunk(2, {d})[0]", "{x}.split(1, {d})[-1]",
]  # fmt: skip
COMBINE = [
    "torch.cat([{x}, {y}], {d})", "torch.stack([{x}, {y}])", "{x} @ {y}", "torch.matmul({x}, {y}.mT)",
    "torch.outer({x}.flatten(), {y}.flatten())",
]  # fmt: skip
INPLACE = [  # on a clone: {v} is a fresh name
    "{v} = {x}.clone(); {v}.add_({y})", "{v} = {x}.clone(); {v}.mul_({n})", "{v} = {x}.clone(); {v} += {y}",
    "{v} = {x}.clone(); {v}[0] = {n}", "{v} = {x}.clone(); {v}[..., :1].mul_(2)",
    "{v} = {x}.clone(); {v}.clamp_(min=0)", "{v} = {x}.clone(); {v}.copy_({y})",
    "{v} = {x}.clone(); {v}.neg_()",  # (t_() and other in-place metadata changes are unsupported, by design)
    # keys mixing index tensors with slices, None, Ellipsis, ints and bools (eager's advanced indexing)
    "{v} = {x}.clone(); {v}[:, torch.tensor([0, -1])] = {y}[..., :1]", "{v} = {x}.clone(); {v}[..., torch.tensor([-1])] *= 2",
    "{v} = {x}.clone(); {v}[torch.tensor([0]), ..., 1:] = {n}", "{v} = {x}.clone(); {v}[None, torch.tensor([0])] = {y}.sum()",
    "{v} = {x}.clone(); {v}[True] = {y}", "{v} = {x}.clone(); {v}[:, {x}[0] > 0] = {n}",
    # writes autograd does not see (through detach, .data, under no_grad), and through one copy of an expand
    "{v} = {x}.clone(); {v}.detach().mul_({n})", "{v} = {x} * 1\nwith torch.no_grad():\n    {v}[..., :1].add_({n})",
    "{v} = {x}.clone(); {v}.data[0] = {n}", "{v} = {x}.clone(); {v}.unsqueeze(0).expand(2, *{v}.shape)[1].add_({y})",
]  # fmt: skip
ALIASED_WRITES = [  # writes through eager's aliases and views of views, on a clone: {v} is a fresh name
    "{v} = {x}.clone(); {v}.t()[0].mul_(2)", "{v} = {x}.clone(); {v}.unsqueeze(0)[0][..., :1].add_({n})",
    "{v} = {x}.clone(); {v}[..., ::2][..., :1].sub_(1)", "{v} = {x}.clone(); {v}.mT[..., 1:].neg_()",
    "{v} = {x}.clone(); torch.nn.functional.dropout({v}, 0.5, training=False).add_(1)",
    "{v} = {x}.clone(); torch.positive({v}).mul_({n})", "{v} = {x}.clone(); {v}.reshape_as({v}).mul_(-1)",
    "{v} = {x}.clone(); torch.broadcast_to({v}, {v}.shape).add_({n})",
    "{v} = {x}.clone(); torch.atleast_2d({v}).sub_(2)", "{v} = {x}.clone(); {v}.contiguous().add_(1)",
    "{v} = {x}.clone(); {v}.masked_fill_({v} > 0, {n})", "{v} = {x}.clone(); {v}.t().masked_fill_({v}.t() < 0, 0.0)",
    "{v} = {x}.clone(); {v}.view(-1).index_put_((torch.tensor([0]),), torch.tensor({n}, dtype={v}.dtype))",
    "{v} = {x}.clone(); {v}.flatten().index_put_((torch.tensor([0, 0]),), torch.tensor(1.0, dtype={v}.dtype), accumulate=True)",
    "{v} = {x}.clone(); {v}[{v} > 0] = {n}", "{v} = {x}.clone(); {v}[...] = {y}", "{v} = {x}.clone(); {v}[..., 0] = {n}",
    "{v} = {x}.clone(); {v}[torch.tensor(0)] = {n}", "{v} = {x}.clone(); {v}[None] = {y}",
    "{v} = torch.empty_like({x}); torch.mul({x}, {n}, out={v})", "{v} = {x}.clone(); torch.add({v}, {y}, out={v})",
    "{v} = {x}.expand(2, *{x}.shape); {v}.add_(1)", "{v} = {x}.repeat(2, 1); {v}.add_(1)",
    "{v} = {x}.clone(); {v}.t().contiguous().add_(1)", "{v} = ({x}.t() * 2).contiguous(); {v}.add_(1)",
    "{v} = {x}.t() * 1; {v}.reshape(-1)[:1].fill_({n})",
    "{v} = {x}.clone(); {v}.t()[:, torch.tensor([0, 0])] = {n}", "{v} = {x}.clone(); {v}[..., ::2][:, torch.tensor([-1])] += {y}[..., :1]",
    "{v} = {x}.clone(); {v}[torch.tensor(0), :, torch.tensor([1, 0])] = {n}", "{v} = {x}.clone(); {v}[0, torch.tensor(True)] = {n}",
    "{v} = torch.empty(0, dtype={x}.dtype, device={x}.device); torch.add({x}, {y}, out={v})",
    "{v} = torch.zeros(1, device={x}.device); torch.mul({x}, {n}, out={v})",
    "{v} = {x}.clone(); {v}.t().detach()[..., :1] = {n}", "{v} = {x}.clone(); {v}[:1].expand(3, *{v}.shape[1:])[2].sub_({n})",
]  # fmt: skip
PROMOTION = [  # integer and bool tensors with Python numbers, 0-dim tensors, torch.where with numbers
    "({x} > 0) + {n}", "({x} > 0) * {x}", "({x} > 0).sum() * {x}", "torch.where({x} > 0, {x}, {n})",
    "torch.where({x} > 0, 1, 0) * {x}", "torch.where({x} > {y}, 2, {y})", "({x} > 0).long() * {n}",
    "{x}.long() // 2 + {x}", "{x}.to(torch.int32) % 3 * {x}", "(({x} > 0) & ({y} < 0)) * 1.0",
    "{x}.sum() * {y}", "torch.tensor({n}) * {x}", "torch.tensor(2) + {x}", "{x}.amax() + {y}.sum()",
    "{x}.to(torch.int64) + True", "({x} > 0) / 2", "{x}.sum().expand_as({y}) + {x}.mean()",
    "{x}.long().copy_({y}) * 0.5", "({x}.long() << 1) + ({x}.long() >> 1)",
]  # fmt: skip
INPUT_INPLACE = ["{i}.add_(1)", "{i}.mul_({n})", "{i}[0] = {n}", "{i}.sub_({y})"]  # updates an input
CONTROL = [  # Python control flow on shapes and numbers: {v} is a fresh name
    "{v} = {x} * 2 if {x}.shape[0] > 2 else {x} - 1",
    "{v} = {x} + k if k > 0 else {x} * k",
    "{v} = {x}\nfor _ in range(int(abs(k)) % 3):\n    {v} = {v} * 0.5 + {y}",
    "{v} = {x} * SCALE + c",
    "{v} = {x} + (W.sum() if W.ndim else W)",
    "{v} = {x} * len({x}.shape) + {x}.numel() / 7",
    "{v} = sum(t.sum() for t in ({x}, {y}))",
]  # fmt: skip


def _meta(value: torch.Tensor) -> torch.Tensor:
    return torch.empty(value.shape, dtype=value.dtype, device="meta")


def _try(line: str, env: dict) -> bool:
    """Whether ``line`` runs on the meta tensors of ``env`` (and updates ``env`` if it does)."""
    trial = dict(env)
    try:
        exec(line, trial)
    except Exception:
        return False
    for value in trial.values():
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            return False
    env.update(trial)
    return True


@st.composite
def programs(draw: st.DrawFn, *, grads: bool | None = None) -> Program:
    """A random program with its input shapes, dtype, number, closure value and global tensor shape."""
    rank = draw(st.integers(1, 3))
    base = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):  # broadcastable variants of the base shape
        drop = draw(st.integers(0, len(base) - 1))
        shape = tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in base[drop:])
        shapes.append(shape)
    dtype = getattr(torch, draw(st.sampled_from(FLOATS)).split(".")[1])
    grads = draw(st.booleans()) if grads is None else grads
    k = draw(st.one_of(st.integers(-3, 3), st.floats(-2, 2, allow_nan=False).map(lambda v: round(v, 2))))
    w_shape = base[-1:] if draw(st.booleans()) else ()
    names = [chr(ord("a") + i) for i in range(n_inputs)]
    params = ", ".join(names + ["k"])
    env: dict = {"torch": torch, "k": k, "SCALE": 1.5, "c": 0.25, "W": torch.empty(w_shape, device="meta")}
    env.update({name: torch.empty(shape, dtype=dtype, device="meta") for name, shape in zip(names, shapes)})
    values = list(names)
    body: list[str] = []
    for index in range(draw(st.integers(1, 8))):
        family = draw(st.sampled_from(["unary", "binary", "reduce", "view", "combine", "inplace", "control",
                                       "promotion"] + ([] if grads else ["input_inplace", "aliased_writes"])))  # fmt: skip
        templates = {
            "unary": UNARY, "binary": BINARY, "reduce": REDUCE, "view": VIEW, "combine": COMBINE,
            "inplace": INPLACE, "control": CONTROL, "input_inplace": INPUT_INPLACE,
            "aliased_writes": ALIASED_WRITES, "promotion": PROMOTION,
        }[family]  # fmt: skip
        template = draw(st.sampled_from(templates))
        x = draw(st.sampled_from(values))
        y = draw(st.sampled_from(values))
        ndim = env[x].ndim if isinstance(env[x], torch.Tensor) else 0
        fields = {
            "x": x, "y": y, "n": draw(st.sampled_from(["2", "0.5", "-1.5", "3"])),
            "d": draw(st.integers(-max(ndim, 1), max(ndim, 1) - 1)),
            "v": f"v{index}", "i": draw(st.sampled_from(names)),
        }  # fmt: skip
        line = template.format(**fields)
        if family in ("inplace", "control", "aliased_writes"):
            target, statement = f"v{index}", line
        elif family == "input_inplace":
            target, statement = fields["i"], line
        else:
            target, statement = f"v{index}", f"v{index} = {line}"
        if not _try(statement, env) or not isinstance(env.get(target), torch.Tensor):
            statement = f"v{index} = {x} + 1"  # eager rejects it for these shapes: something simpler
            target = f"v{index}"
            if not _try(statement, env):
                continue
        body.append(statement)
        if target not in values:
            values.append(target)
    outputs = [v for v in values if v not in names][-2:] or values[-1:]
    if not grads:
        outputs += [n for n in names if n not in outputs]  # updated inputs are checked too
    lines = ["def make(c):", f"    def f({params}):"]
    for statement in body:
        lines += [f"        {part}" for part in statement.split("\n")]
    lines += [f"        return ({', '.join(outputs)},)", "    return f"]
    c = draw(st.sampled_from([0.25, -1.0, 2.0]))
    return Program("\n".join(lines) + "\n", shapes, dtype, k, c, w_shape, grads)


def build(program: Program, scale: float = 1.5, w: torch.Tensor | None = None) -> tuple:
    """``(f, namespace)``: the program's function, and the globals it reads (``SCALE``, ``W``)."""
    namespace: dict = {
        "torch": torch,
        "SCALE": scale,
        "W": w if w is not None else torch.randn(program.w_shape),
    }
    exec(compile(program.source, "<fuzz program>", "exec"), namespace)
    return namespace["make"](program.c), namespace
