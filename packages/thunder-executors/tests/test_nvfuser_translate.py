"""What the nvFuser executor asks nvFuser to build, checked on the CPU with a recording stand-in
for nvFuser's ``FusionDefinition`` (nothing here runs nvFuser; test_nvfuser runs it on a GPU).

nvFuser segments a fusion (seconds of compile time for a layer norm) when an output looks like a
view to its alias analysis: a cast to the dtype a value already has is a ``Set``, and a reshape
makes symbolic dims. The definitions must contain neither.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from test_nvfuser_regions import _runners

from thunder.executors.nvfuser.translate import _inserted_ones, define_fusion

_HALF = {"BFloat16", "Half"}
_SAME_DTYPE = {
    "broadcast",
    "broadcast_in_dim",
    "reshape",
    "permute",
    "slice",
    "pad",
    "cat",
    "squeeze",
    "expand",
}


class Value:
    def __init__(self, dtype: str):
        self._dtype = dtype

    def dtype(self) -> str:  # as nvfuser_direct's TensorView
        return self._dtype


class RecordingOps:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (op, first input's dtype, result's dtype)

    def __getattr__(self, name: str) -> Any:
        def op(*args: Any, **kwargs: Any) -> Value:
            first = next(a for a in (*args, *args[0:1]) if isinstance(a, (Value, list)))
            first = first[0] if isinstance(first, list) else first
            if name == "cast":
                dtype = args[1]
            elif name in _SAME_DTYPE:
                dtype = first.dtype()
            else:  # nvFuser computes 16-bit floats in float32
                dtype = "Float" if first.dtype() in _HALF else first.dtype()
            self.calls.append((name, first.dtype(), dtype))
            return Value(dtype)

        return op


class RecordingDefinition:
    last: RecordingDefinition

    def __init__(self) -> None:
        self.ops = RecordingOps()
        self.outputs: list[Value] = []
        self.static_inputs: list[bool] = []
        RecordingDefinition.last = self

    def __enter__(self) -> RecordingDefinition:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def from_pytorch(self, tensor: torch.Tensor, static_sizes: bool = False) -> Value:
        self.static_inputs.append(static_sizes)
        return Value({torch.bfloat16: "BFloat16", torch.float16: "Half"}.get(tensor.dtype, "Float"))

    def define_scalar(self, value: Any, dtype: Any = None) -> Value:
        return Value("Double")

    def add_output(self, value: Value) -> None:
        self.outputs.append(value)


_DATA_TYPES = SimpleNamespace(
    **{n: n for n in ("Float", "Half", "BFloat16", "Double", "Int32", "Int", "Bool")}
)
recording_nvfuser = SimpleNamespace(FusionDefinition=RecordingDefinition, DataType=_DATA_TYPES)


def _definitions(fn, *inputs: torch.Tensor) -> list[RecordingDefinition]:
    definitions = []
    for runner in _runners(fn, *inputs):
        for stage in runner.stages:
            tensors = [torch.empty(p.shape, dtype=p.dtype.torch_dtype) for p in stage.inputs]
            define_fusion(recording_nvfuser, stage.region, stage.inputs, stage.outputs, tensors)
            definitions.append(RecordingDefinition.last)
    return definitions


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


def test_no_cast_to_the_dtype_a_value_already_has() -> None:
    x, w, b = torch.randn(8, 32, dtype=torch.bfloat16), torch.randn(32, dtype=torch.bfloat16), torch.randn(32)
    (definition,) = _definitions(layer_norm, x, w, b.bfloat16())
    casts = [call for call in definition.ops.calls if call[0] == "cast"]
    assert casts and all(source != target for _, source, target in casts), casts
    assert definition.outputs[-1].dtype() == "BFloat16"  # the result is still rounded to bf16 once


def test_inputs_have_static_sizes() -> None:
    """A whole-dim slice of a symbolic size is a resize to nvFuser, which segments a rotary fusion."""
    (definition,) = _definitions(lambda x: torch.cat((-x[..., 4:], x[..., :4]), -1) * 2, torch.randn(2, 8))
    assert definition.static_inputs == [True]


def test_keepdim_statistics_are_broadcasts_not_reshapes() -> None:
    (definition,) = _definitions(lambda x: x - x.mean(-1, keepdim=True), torch.randn(8, 32))
    names = [name for name, _, _ in definition.ops.calls]
    assert "broadcast" in names and "reshape" not in names, names


def test_other_reshapes_stay_reshapes() -> None:
    (definition,) = _definitions(lambda x: (x * 2).reshape(4, 64) + 1, torch.randn(8, 32))
    assert "reshape" in [name for name, _, _ in definition.ops.calls]


def test_inserted_ones() -> None:
    assert _inserted_ones((5,), (5, 1)) == [False, True]
    assert _inserted_ones((2, 3), (1, 2, 3, 1)) == [True, False, False, True]
    assert _inserted_ones((1, 3), (1, 1, 3)) == [False, True, False]
    assert _inserted_ones((2, 3), (6,)) is None
    assert _inserted_ones((5, 1), (5,)) is None  # a squeeze: left to nvFuser's reshape
