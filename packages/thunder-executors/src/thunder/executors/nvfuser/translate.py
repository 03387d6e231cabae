"""A fusion region as an nvFuser fusion definition, and the layout key definitions are cached by.

Op families are tables (prim name -> ``fd.ops`` name). nvFuser computes 16-bit floats in float32
and may return float32: every result is cast back to the dtype its prim says, as eager rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol

__all__ = [
    "ELEMENTWISE",
    "REDUCTIONS",
    "SHAPES",
    "SUPPORTED_DTYPES",
    "define_fusion",
    "layout_key",
    "structure_key",
]

ELEMENTWISE: dict[str, str] = {
    name: name
    for name in (
        "abs neg exp exp2 expm1 log log1p log2 sin cos tan tanh sinh cosh asin acos atan sqrt rsqrt reciprocal "
        "erf erfc sign floor ceil round trunc sigmoid bitwise_not isfinite isnan add sub mul div pow remainder "
        "fmod maximum minimum atan2 bitwise_and bitwise_or bitwise_xor eq ne lt le gt ge where"
    ).split()
}
REDUCTIONS: dict[str, str] = {"sum": "sum", "amax": "max", "amin": "min", "prod": "prod", "var": "var"}
# slice_prim with unit strides and pad without interior padding only (NvFuserExecutor.can_fuse);
# with cat they keep a rotary embedding (two slices, a negation and a cat) in one region.
SHAPES = frozenset(
    {"broadcast_in_dim", "reshape", "transpose", "convert_element_type", "slice_prim", "pad", "cat"}
)
SUPPORTED_DTYPES = frozenset(
    {torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.bool}
)
_DATA_TYPES = {
    torch.float32: "Float",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.float64: "Double",
    torch.int32: "Int32",
    torch.int64: "Int",
    torch.bool: "Bool",
}


def layout_key(tensor: torch.Tensor) -> tuple:
    """What a definition depends on besides the trace: dtype, sizes, stride order and contiguity."""
    sizes, strides = tuple(tensor.shape), tuple(tensor.stride())
    order = tuple(sorted(range(len(sizes)), key=lambda d: (strides[d], d), reverse=True))
    contiguity: list[bool | None] = []
    expected = 1
    for d in reversed(order):
        if sizes[d] == 1:
            contiguity.append(None)
            continue
        contiguity.append(strides[d] == expected)
        expected = strides[d] * sizes[d]
    return (tensor.dtype, sizes, order, tuple(reversed(contiguity)), tensor.device)


def structure_key(
    region: list[BoundSymbol],
    inputs: list[TensorProxy],
    outputs: list[TensorProxy],
    writes: Sequence[tuple[str, str]] = (),
) -> tuple:
    """What a definition depends on in the trace: each prim, its arguments and the dtypes it makes,
    and which values it writes into which inputs (``writes``, as ``define_fusion`` takes them).

    Proxies are numbered by first appearance, so the regions of two layers of one model (same
    prims, other names) share a key, and with equal input layouts one compiled definition.
    """
    numbers: dict[str, int] = {p.name: i for i, p in enumerate(inputs)}

    def encode(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return ("tensor", numbers[x.name])
        if isinstance(x, (list, tuple)):
            return tuple(encode(v) for v in x)
        if isinstance(x, dict):
            return tuple(sorted((k, encode(v)) for k, v in x.items()))
        return (type(x).__name__, repr(x))

    prims = []
    for b in region:
        arguments = (encode(b.args), encode(b.kwargs))
        produced = [p for p in b.proxy_outputs() if isinstance(p, TensorProxy)]
        for p in produced:
            numbers.setdefault(p.name, len(numbers))
        prims.append((b.symbol.name, arguments, tuple((numbers[p.name], repr(p.dtype)) for p in produced)))
    written = tuple((numbers[value], numbers[destination]) for value, destination in writes)
    return tuple(prims), tuple(numbers[p.name] for p in outputs), written


class _Definer:
    def __init__(self, nvf: Any, fd: Any):
        self.nvf, self.fd = nvf, fd
        self.env: dict[str, Any] = {}

    def data_type(self, dtype: torch.dtype) -> Any:
        return getattr(self.nvf.DataType, _DATA_TYPES[dtype])

    def value(self, x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return self.env[x.name]
        if isinstance(x, bool):
            return self.fd.define_scalar(x, dtype=self.nvf.DataType.Bool)
        if isinstance(x, int):
            return self.fd.define_scalar(x, dtype=self.nvf.DataType.Int)
        return self.fd.define_scalar(float(x), dtype=self.nvf.DataType.Double)

    def cast_to(self, result: Any, proxy: TensorProxy) -> Any:
        """``result`` in ``proxy``'s dtype; no op where it already is one.

        A cast to the same dtype is a ``Set`` in nvFuser, which its alias analysis takes for a
        view: an output made by one makes nvFuser segment the fusion (seconds to compile a layer
        norm backward instead of one kernel's compile).
        """
        dtype = self.data_type(proxy.dtype.torch_dtype)
        if _dtype_of(result) == dtype:
            return result
        return self.fd.ops.cast(result, dtype)

    def reshape(self, x: Any, old: tuple[int, ...], new: tuple[int, ...]) -> Any:
        """A reshape that only inserts size-1 dims is a broadcast.

        nvFuser's reshape makes symbolic dims, which its alias analysis takes for a view to
        segment off (a keepdim mean's ``[n] -> [n, 1]``), so those reshapes stay out of it.
        """
        if old == new:
            return x
        inserted = _inserted_ones(old, new)
        if inserted is None:
            return self.fd.ops.reshape(x, list(new))
        return self.fd.ops.broadcast(x, inserted)

    def define(self, b: BoundSymbol) -> None:
        name, args, ops = b.symbol.name, b.args, self.fd.ops
        x = self.value(args[0]) if isinstance(args[0], TensorProxy) else None
        if name in ELEMENTWISE:
            result = getattr(ops, ELEMENTWISE[name])(*(self.value(a) for a in args))
        elif name in REDUCTIONS and args[0].dtype.torch_dtype in (torch.float16, torch.bfloat16):
            # nvFuser's generated code cannot reduce 16-bit floats directly: accumulate in float32
            widened = ops.cast(x, self.nvf.DataType.Float)
            if name == "var":
                result = ops.var(widened, list(args[1]), b.kwargs.get("correction", 1), False)
            else:
                result = getattr(ops, REDUCTIONS[name])(widened, list(args[1]), False)
        elif name == "var":
            result = ops.var(x, list(args[1]), b.kwargs.get("correction", 1), False)
        elif name in REDUCTIONS:
            result = getattr(ops, REDUCTIONS[name])(x, list(args[1]), False)
        elif name == "convert_element_type":
            result = x
        elif name == "broadcast_in_dim":
            result = ops.broadcast_in_dim(x, list(args[1]), list(args[2]))
        elif name == "reshape":
            result = self.reshape(x, tuple(args[0].shape), tuple(args[1]))
        elif name == "slice_prim":
            result = ops.slice(x, list(args[1]), list(args[2]), list(args[3]))
        elif name == "pad":  # nvFuser's widths: (low, high) per dim, last dim first, as F.pad's
            widths = [width for low, high, _ in reversed(args[2]) for width in (low, high)]
            value = self.fd.define_scalar(args[1], dtype=self.data_type(args[0].dtype.torch_dtype))
            result = ops.pad(x, widths, value)
        elif name == "cat":
            result = ops.cat([self.value(t) for t in args[0]], args[1])
        else:  # transpose
            result = ops.permute(x, list(args[1]))
        self.env[b.output.name] = self.cast_to(result, b.output)


def _inserted_ones(old: tuple[int, ...], new: tuple[int, ...]) -> list[bool] | None:
    """Which dims of ``new`` are size-1 dims inserted into ``old``; None if it is another reshape."""
    inserted, j = [], 0
    for size in new:
        if j < len(old) and old[j] == size:
            inserted.append(False)
            j += 1
        elif size == 1:
            inserted.append(True)
        else:
            return None
    return inserted if j == len(old) else None


def _static_input(fd: Any, tensor: torch.Tensor) -> Any:
    """A fusion input of ``tensor``'s exact sizes (definitions are made per input shape anyway).

    With symbolic sizes nvFuser cannot tell that a slice over a whole dim is no slice: it resizes
    the dim, and its resize scheduler refuses a resized dim that meets a broadcast (a rotary
    embedding's ``cos`` broadcast over batch and heads), which segments the fusion.
    """
    try:
        return fd.from_pytorch(tensor, static_sizes=True)
    except TypeError:  # a frontend without the option
        return fd.from_pytorch(tensor)


def _dtype_of(value: Any) -> Any:
    dtype = getattr(value, "dtype", None)  # a method in nvfuser_direct, an attribute in nvfuser
    return dtype() if callable(dtype) else dtype


def define_fusion(nvf: Any, region: list[BoundSymbol], inputs: list[TensorProxy], outputs: list[TensorProxy],
                  tensors: list[torch.Tensor], writes: Sequence[tuple[str, str]] = ()) -> Any:  # fmt: skip
    """A ``FusionDefinition`` of ``region`` for inputs laid out as ``tensors``.

    ``writes``: (value, input) names; the fusion writes the value into that input's memory (an
    output aliased to the input, which ``execute`` does not return) after ``outputs``.
    """
    with nvf.FusionDefinition() as fd:
        definer = _Definer(nvf, fd)
        for proxy, tensor in zip(inputs, tensors):
            definer.env[proxy.name] = _static_input(fd, tensor)
        for b in region:
            definer.define(b)
        for proxy in outputs:
            fd.add_output(definer.env[proxy.name])
        for value, destination in writes:
            fd.add_output(definer.env[value], alias_input=definer.env[destination])
    return fd
