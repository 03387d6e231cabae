"""Kernel plan + input layouts -> the source of one Triton kernel.

Kernels are 2-D: a program owns ``BR`` rows (the dims that are not reduced, flattened) and walks the
columns (the reduced dims, or the last dim of an elementwise kernel) ``BN`` at a time. Sizes and
strides are literals in the source: a kernel is specialised to its layouts (``cache.py`` keys them).
A reduction kernel runs one loop over the columns per batch of independent reductions, recomputing
the elementwise values each loop needs from its loads (cheaper than a round trip through memory),
and a last loop that stores the full-shape outputs. 16-bit floats are computed and accumulated in
float32 and rounded to their dtype after every op, as eager PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.executors.triton import ops
from thunder.executors.triton.plan import KernelPlan

__all__ = ["KernelSource", "generate_kernel", "iteration_strides"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class KernelSource:
    source: str
    name: str
    grid: tuple[int, ...]
    num_warps: int


@dataclass
class _Node:
    out: str
    kind: str  # "full" or "row"
    code: str
    reads: list[str]
    dtype: torch.dtype


@dataclass
class _Reduce:
    out: str
    fn: str  # a key of ops.REDUCTIONS, or "sumsq"
    source: str
    dtype: torch.dtype = torch.float32
    reads: list[str] = field(default_factory=list)


def iteration_strides(
    tensor: torch.Tensor, shape: tuple[int, ...], reduce_dims: tuple[int, ...] | None, kind: str
) -> tuple[int, ...]:
    """The stride of ``tensor`` along each dim of the kernel's iteration shape (0 where it is broadcast)."""
    if kind == "full" or len(tensor.shape) == len(shape):
        return tuple(st if size != 1 else 0 for st, size in zip(tensor.stride(), tensor.shape))
    assert reduce_dims is not None
    kept = iter(zip(tensor.stride(), tensor.shape))
    result = []
    for d in range(len(shape)):
        if d in reduce_dims:
            result.append(0)
        else:
            st, size = next(kept)
            result.append(st if size != 1 else 0)
    return tuple(result)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _literal(value: Any, dtype: torch.dtype) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if dtype.is_floating_point or isinstance(value, float):
        value = float(value)
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    return repr(int(value))


def _tl(dtype: torch.dtype) -> str:
    return ops.TRITON_DTYPES[dtype]


def _cast(code: str, have: torch.dtype, want: torch.dtype) -> str:
    if want == torch.bool:
        return f"({code} != 0)"
    if have == torch.bool and want in (torch.float16, torch.bfloat16):
        return f"{code}.to(tl.float32).to({_tl(want)})"  # the interpreter cannot cast i1 to 16-bit floats
    return f"{code}.to({_tl(want)})"


class _Lowering:
    """Bound symbols -> nodes, each an expression over variables ``v_<name>``."""

    def __init__(self, kernel: KernelPlan, dtypes_of: dict[str, torch.dtype], block: tuple[int, int]):
        self.kernel = kernel
        self.dtype = dict(dtypes_of)
        self.block = block
        self.nodes: list[_Node | _Reduce] = []

    def read(self, x: Any, dtype: torch.dtype) -> str:
        if isinstance(x, TensorProxy):
            have = self.dtype[x.name]
            if have == dtype:
                return f"v_{x.name}"
            return _cast(f"v_{x.name}", have, dtype)
        return _literal(x, dtype)

    def read_name(self, name: str, dtype: torch.dtype) -> str:
        have = self.dtype[name]
        return f"v_{name}" if have == dtype else _cast(f"v_{name}", have, dtype)

    def node(self, out: TensorProxy, code: str, reads: Sequence[Any], computed: torch.dtype) -> None:
        target = out.dtype.torch_dtype
        if computed != target:
            code = _cast(f"({code})", computed, target)
        names = [r.name for r in reads if isinstance(r, TensorProxy)]
        self.nodes.append(_Node(out.name, self.kernel.kinds[out.name], code, names, target))
        self.dtype[out.name] = target

    def lower(self, b: BoundSymbol) -> None:
        name, args, out = b.symbol.name, b.args, b.output
        if name in ("sum", "amax", "amin"):
            self.nodes.append(_Reduce(f"{out.name}__acc", name, args[0].name, reads=[args[0].name]))
            self.dtype[f"{out.name}__acc"] = torch.float32
            self.node(out, f"v_{out.name}__acc", [], torch.float32)
            self.nodes[-1].reads = [f"{out.name}__acc"]
        elif name == "var":
            self._lower_var(b)
        elif name == "broadcast_in_dim":
            self.node(out, f"tl.broadcast_to({self.read(args[0], args[0].dtype.torch_dtype)}, {list(self.block)})",
                      [args[0]], args[0].dtype.torch_dtype)  # fmt: skip
        elif name == "reshape":
            self.node(
                out, self.read(args[0], args[0].dtype.torch_dtype), [args[0]], args[0].dtype.torch_dtype
            )
        elif name == "convert_element_type":
            source = args[0].dtype.torch_dtype
            self.node(out, self.read(args[0], source), [args[0]], source)
        elif name == "where":
            computed = _compute_dtype(out.dtype.torch_dtype)
            code = f"tl.where({self.read(args[0], torch.bool)}, {self.read(args[1], computed)}, {self.read(args[2], computed)})"
            self.node(out, code, args, computed)
        elif name in ops.COMPARISONS:
            tensor = next(a for a in args if isinstance(a, TensorProxy))
            computed = _compute_dtype(tensor.dtype.torch_dtype)
            code = ops.COMPARISONS[name].format(*(self.read(a, computed) for a in args))
            self.node(out, code, args, torch.bool)
        elif name == "pow":
            computed = _compute_dtype(out.dtype.torch_dtype)
            self.node(
                out,
                ops.POW_EXPONENTS[float(args[1])].format(self.read(args[0], computed)),
                [args[0]],
                computed,
            )
        else:
            tensor = next(a for a in args if isinstance(a, TensorProxy))
            computed = _compute_dtype(tensor.dtype.torch_dtype)
            template = {
                **ops.UNARY_FLOAT,
                **ops.UNARY_ANY,
                **ops.BINARY_FLOAT,
                **ops.BINARY_ANY,
                **ops.BINARY_INTEGER,
                "bitwise_not": "(~{0})" if computed != torch.bool else "({0} == 0)",
            }[name]
            result = torch.bool if name in ("isnan", "isfinite") else computed
            self.node(out, template.format(*(self.read(a, computed) for a in args)), args, result)

    def _lower_var(self, b: BoundSymbol) -> None:
        source, dims, out = b.args[0], b.args[1], b.output
        correction = b.kwargs.get("correction", 1)
        n = math.prod(source.shape[d] for d in dims)
        base = out.name
        f32 = torch.float32
        self.nodes.append(_Reduce(f"{base}__s1", "sum", source.name, reads=[source.name]))
        self.nodes.append(
            _Node(f"{base}__mean", "row", f"(v_{base}__s1 / {float(n)!r})", [f"{base}__s1"], f32)
        )
        self.nodes.append(
            _Node(
                f"{base}__dev",
                "full",
                f"({self.read(source, f32)} - v_{base}__mean)",
                [source.name, f"{base}__mean"],
                f32,
            )
        )
        self.nodes.append(_Reduce(f"{base}__s2", "sumsq", f"{base}__dev", reads=[f"{base}__dev"]))
        for internal in ("__s1", "__mean", "__dev", "__s2"):
            self.dtype[base + internal] = f32
        denominator = float(max(n - correction, 0))
        self.node(out, f"(v_{base}__s2 / {denominator!r})", [], f32)
        self.nodes[-1].reads = [f"{base}__s2"]


@dataclass
class _Dims:
    shape: tuple[int, ...]
    rows: list[int]
    cols: list[int]

    @property
    def R(self) -> int:  # noqa: N802 -- the conventional name
        return math.prod(self.shape[d] for d in self.rows)

    @property
    def N(self) -> int:  # noqa: N802
        return math.prod(self.shape[d] for d in self.cols)


def _offset(
    var: str, dims: list[int], shape: tuple[int, ...], strides: tuple[int, ...], index_names: dict
) -> str:
    """The memory offset, in elements, of position ``var`` of the flattened ``dims`` for ``strides``."""
    live = [d for d in dims if shape[d] != 1]
    if not any(strides[d] for d in live):
        return f"{var} * 0"  # a block of zeros: loads and stores need a block of pointers
    # collapsible: strides are those of a row-major layout of these dims (up to a common factor)
    if all(strides[a] == strides[b] * shape[b] for a, b in zip(live, live[1:])):
        step = strides[live[-1]]
        return var if step == 1 else f"{var} * {step}"
    terms = []
    for d in live:
        if strides[d]:
            index = index_names.setdefault(d, f"{var}i{d}")
            terms.append(f"{index} * {strides[d]}")
    return " + ".join(terms)


def _index_lines(var: str, dims: list[int], shape: tuple[int, ...], index_names: dict) -> list[str]:
    lines = []
    for d, name in sorted(index_names.items()):
        inner = math.prod(shape[e] for e in dims if e > d)
        lines.append(f"{name} = ({var} // {inner}) % {shape[d]}")
    return lines


def _blocks(dims: _Dims, reduction: bool, interpret: bool) -> tuple[int, int]:
    budget = 4096 if interpret else (2048 if reduction else 1024)
    block_n = min(triton_next_power_of_2(dims.N), budget)
    block_r = min(triton_next_power_of_2(dims.R), max(1, budget // block_n))
    return block_r, block_n


def triton_next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def generate_kernel(
    kernel: KernelPlan,
    input_layouts: Sequence[tuple[torch.dtype, tuple[int, ...]]],
    output_strides: Sequence[tuple[int, ...]],
    *,
    name: str,
    interpret: bool,
) -> KernelSource:
    """Triton source computing ``kernel`` for inputs of these (dtype, iteration strides)."""
    reduction = kernel.reduce_dims is not None
    ndim = len(kernel.shape)
    cols = list(kernel.reduce_dims) if kernel.reduce_dims is not None else ([ndim - 1] if ndim else [])
    dims = _Dims(kernel.shape, [d for d in range(ndim) if d not in cols], sorted(cols))
    block = _blocks(dims, reduction, interpret)
    dtypes_of = {p.name: dt for p, (dt, _) in zip(kernel.inputs, input_layouts)}
    lowering = _Lowering(kernel, dtypes_of, block)
    for b in kernel.bound_symbols:
        lowering.lower(b)
    strides = {p.name: st for p, (_, st) in zip(kernel.inputs, input_layouts)}
    strides.update({p.name: st for p, st in zip(kernel.outputs, output_strides)})
    extent = max(
        [sum((s - 1) * abs(st) for s, st in zip(kernel.shape, v)) for v in strides.values()]
        + [dims.R * dims.N]
    )
    emitter = _Emitter(kernel, dims, block, lowering, strides, wide=extent > _INT32_MAX)
    body = emitter.emit(reduction)
    parameters = [f"in_{p.name}" for p in kernel.inputs] + [f"out_{p.name}" for p in kernel.outputs]
    lines = ["@triton.jit", f"def {name}({', '.join(parameters)}):"] + [f"    {line}" for line in body]
    source = "\n".join(lines) + "\n"
    helpers = "".join(ops.helpers_used(source))
    header = "import triton\nimport triton.language as tl\n"
    grid = (triton_cdiv(dims.R, block[0]),) + (() if reduction else (triton_cdiv(dims.N, block[1]),))
    warps = 8 if block[0] * block[1] >= 2048 else 4
    return KernelSource(header + helpers + "\n\n" + source, name, grid, warps)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Emitter:
    def __init__(self, kernel: KernelPlan, dims: _Dims, block: tuple[int, int], lowering: _Lowering,
                 strides: dict[str, tuple[int, ...]], wide: bool):  # fmt: skip
        self.kernel, self.dims, self.block, self.lowering, self.strides, self.wide = (
            kernel, dims, block, lowering, strides, wide,
        )  # fmt: skip
        self.by_out: dict[str, _Node | _Reduce] = {n.out: n for n in lowering.nodes}
        self.inputs = {p.name: p for p in kernel.inputs}

    def kind(self, name: str) -> str:
        if name in self.inputs:
            return self.kernel.kinds[name]
        node = self.by_out[name]
        return "row" if isinstance(node, _Reduce) else node.kind

    def cone(self, targets: list[str]) -> tuple[list[_Node], list[str], set[str]]:
        """The full nodes computing ``targets`` (in order), the full inputs they load, the row values they read."""
        needed: set[str] = set()
        loads: set[str] = set()
        rows: set[str] = set()
        stack = list(targets)
        while stack:
            name = stack.pop()
            if name in needed or name in loads:
                continue
            if self.kind(name) == "row":
                rows.add(name)
            elif name in self.inputs:
                loads.add(name)
            else:
                needed.add(name)
                stack.extend(self.by_out[name].reads)
        nodes = [n for n in self.lowering.nodes if isinstance(n, _Node) and n.out in needed]
        return nodes, [p.name for p in self.kernel.inputs if p.name in loads], rows

    def zero_rows(self, name: str) -> bool:
        return not any(self.strides[name][d] for d in self.dims.rows if self.dims.shape[d] != 1)

    def row_offset(self, name: str, index_names: dict) -> str:
        return _offset("r", self.dims.rows, self.dims.shape, self.strides[name], index_names)

    def col_offset(self, name: str, index_names: dict) -> str:
        return _offset("c", self.dims.cols, self.dims.shape, self.strides[name], index_names)

    def emit(self, reduction: bool) -> list[str]:
        block_r, block_n = self.block
        lines = [f"r = tl.program_id(0) * {block_r} + tl.arange(0, {block_r})[:, None]"]
        if self.wide:
            lines.append("r = r.to(tl.int64)")
        lines.append(f"rmask = r < {self.dims.R}")
        row_index: dict[int, str] = {}
        offsets = {name: self.row_offset(name, row_index) for name in self.strides}
        lines += _index_lines("r", self.dims.rows, self.dims.shape, row_index)
        lines += [f"ro_{name} = {off}" for name, off in offsets.items()]
        # Row values are kept as full [BR, BN] blocks (equal along the columns): one register layout
        # for everything avoids a layout-conversion failure of Triton 3.6's compiler seen on H100/H200.
        lines.append(f"zc = tl.arange(0, {block_n})[None, :]")
        lines.append(f"rmask_full = rmask & (zc < {block_n})")
        lines.append("first = rmask & (zc == 0)")
        for p in self.kernel.inputs:
            if self.kernel.kinds[p.name] == "row":
                lines.append(
                    f"v_{p.name} = tl.load(in_{p.name} + (ro_{p.name} + zc * 0), mask=rmask_full, other=0)"
                )
        full_outputs = [p.name for p in self.kernel.outputs if self.kind(p.name) == "full"]
        if reduction:
            lines += self.reduction_stages()
            if full_outputs:
                lines += self.column_loop(full_outputs, [], store=True)
        else:
            lines.append(f"c = tl.program_id(1) * {block_n} + tl.arange(0, {block_n})[None, :]")
            if self.wide:
                lines.append("c = c.to(tl.int64)")
            lines += self.column_body(full_outputs, [], store=True)
        for p in self.kernel.outputs:
            if self.kind(p.name) == "row":
                lines.append(f"tl.store(out_{p.name} + (ro_{p.name} + zc * 0), v_{p.name}, mask=first)")
        return lines

    def reduction_stages(self) -> list[str]:
        lines: list[str] = []
        ready = {p.name for p in self.kernel.inputs if self.kernel.kinds[p.name] == "row"}
        pending = [n for n in self.lowering.nodes if isinstance(n, _Reduce) or n.kind == "row"]
        while pending:
            progressed = False
            for node in list(pending):
                if isinstance(node, _Node) and set(node.reads) <= ready:
                    lines.append(f"v_{node.out} = {node.code}")
                    ready.add(node.out)
                    pending.remove(node)
                    progressed = True
            batch = [n for n in pending if isinstance(n, _Reduce) and self.cone([n.source])[2] <= ready]
            if batch:
                lines += self.column_loop([n.source for n in batch], batch, store=False)
                for n in batch:
                    ready.add(n.out)
                    pending.remove(n)
                progressed = True
            assert progressed, f"Triton codegen: no progress with {[n.out for n in pending]}"
        return lines

    def column_loop(self, targets: list[str], reductions: list[_Reduce], store: bool) -> list[str]:
        block_r, block_n = self.block
        lines = []
        for red in reductions:
            identity = ops.REDUCTIONS["sum" if red.fn == "sumsq" else red.fn][0]
            lines.append(f"acc_{red.out} = tl.full([{block_r}, {block_n}], {identity}, tl.float32)")
        lines.append(f"for c0 in range(0, {self.dims.N}, {block_n}):")
        body = [f"c = c0 + tl.arange(0, {block_n})[None, :]"]
        body += self.column_body(targets, reductions, store)
        lines += [f"    {line}" for line in body]
        for red in reductions:
            final = ops.REDUCTIONS["sum" if red.fn == "sumsq" else red.fn][2]
            lines.append(
                f"v_{red.out} = tl.broadcast_to({final.format(f'acc_{red.out}')}, [{block_r}, {block_n}])"
            )
        return lines

    def column_body(self, targets: list[str], reductions: list[_Reduce], store: bool) -> list[str]:
        lines = [f"m = rmask & (c < {self.dims.N})"]
        nodes, loads, _ = self.cone(targets)
        col_index: dict[int, str] = {}
        used = loads + ([t for t in targets] if store else [])
        offsets = {name: self.col_offset(name, col_index) for name in used}
        lines += _index_lines("c", self.dims.cols, self.dims.shape, col_index)
        for name in loads:
            # a tensor broadcast along the rows is loaded as one row of the block
            if self.zero_rows(name) and offsets[name] != "c * 0":
                lines.append(
                    f"v_{name} = tl.load(in_{name} + {offsets[name]}, mask=c < {self.dims.N}, other=0)"
                )
            else:
                lines.append(
                    f"v_{name} = tl.load(in_{name} + (ro_{name} + {offsets[name]}), mask=m, other=0)"
                )
        lines += [f"v_{n.out} = {n.code}" for n in nodes]
        for red in reductions:
            identity, combine, _ = ops.REDUCTIONS["sum" if red.fn == "sumsq" else red.fn]
            value = self.lowering.read_name(red.source, torch.float32)
            if red.fn == "sumsq":
                value = f"{value} * {value}"
            lines.append(
                f"acc_{red.out} = {combine.format(f'acc_{red.out}', f'tl.where(m, {value}, {identity})')}"
            )
        if store:
            for name in targets:
                value = (
                    f"tl.broadcast_to(v_{name}, [{self.block[0]}, {self.block[1]}])"  # loads may be narrow
                )
                lines.append(f"tl.store(out_{name} + (ro_{name} + {offsets[name]}), {value}, mask=m)")
        return lines
