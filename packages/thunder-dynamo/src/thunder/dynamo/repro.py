"""Standalone reproducer scripts for the pieces of a split graph.

The first call of each piece records what it was given (shapes, strides, dtypes, devices,
requires_grad, and the value range of integer tensors). A reproducer script holds the piece's FX
code as an ``nn.Module``, makes random inputs like those, runs it eagerly and compiled, and
compares outputs and input gradients. It needs only torch and thunder, not the user's program.
"""

from __future__ import annotations

import math
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from thunder.dynamo.reasons import CompilerType, SubgraphInfo

__all__ = ["TensorSpec", "describe_inputs", "record_first_inputs", "reproducer_script", "save_reproducers"]


@dataclass(frozen=True)
class TensorSpec:
    """What a reproducer needs to make a tensor like one a piece was called with."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: str
    requires_grad: bool
    low: float | None = None  # value range, for integer and bool tensors
    high: float | None = None

    def python(self) -> str:
        return (
            f"make_tensor({self.shape!r}, {self.stride!r}, {self.dtype}, {self.device!r}, "
            f"requires_grad={self.requires_grad}, low={self.low!r}, high={self.high!r})"
        )


def _spec(tensor: torch.Tensor) -> TensorSpec:
    low = high = None
    if not (tensor.is_floating_point() or tensor.is_complex()) and tensor.numel() > 0:
        low, high = tensor.min().item(), tensor.max().item()
    return TensorSpec(
        tuple(tensor.shape),
        tuple(tensor.stride()),
        tensor.dtype,
        str(tensor.device),
        tensor.requires_grad,
        low,
        high,
    )


def describe_inputs(args: tuple) -> list[Any]:
    """Tensors as TensorSpecs; Python values as they are."""
    return [_spec(a) if isinstance(a, torch.Tensor) else a for a in args]


def record_first_inputs(module: torch.nn.Module, store: dict[str, list[Any]], name: str) -> None:
    """Record ``describe_inputs`` of the first call of ``module`` into ``store[name]``."""

    def hook(module: torch.nn.Module, args: tuple) -> None:
        store[name] = describe_inputs(args)
        handle.remove()

    handle = module.register_forward_pre_hook(hook)


def _value_python(value: Any) -> str:
    if isinstance(value, TensorSpec):
        return value.python()
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, (torch.dtype, torch.device)):
        return f"torch.{value}" if isinstance(value, torch.dtype) else f"torch.device({str(value)!r})"
    return repr(value)


def _import_line(name: str, value: Any) -> str:
    """A line binding ``name`` to ``value`` as the FX code's globals do."""
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__}" if name == value.__name__ else f"import {value.__name__} as {name}"
    if isinstance(value, (str, int, float, bool)):
        return f"{name} = {_value_python(value)}"
    if value is type(None):
        return f"{name} = type(None)"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname:
        return f"{name} = importlib.import_module({module!r}).{qualname}"
    raise NotImplementedError(f"the reproducer cannot import {name} = {value!r}")


def _attribute_lines(piece: torch.fx.GraphModule) -> list[str]:
    """Lines of ``__init__`` that give the piece random parameters and buffers like its own."""
    lines = []
    for node in piece.graph.find_nodes(op="get_attr"):
        value = piece
        for part in str(node.target).split("."):
            value = getattr(value, part)
        if isinstance(value, torch.Tensor):
            make = _spec(value).python()
            if isinstance(value, torch.nn.Parameter):
                make = f"torch.nn.Parameter({make}, requires_grad={value.requires_grad})"
            lines.append(f"set_attribute(self, {str(node.target)!r}, {make})")
        else:
            lines.append(f"set_attribute(self, {str(node.target)!r}, {_value_python(value)})")
    return lines


_TEMPLATE = '''\
"""Reproducer of {title}, written by thunder.dynamo.

Runs the piece eagerly and compiled on random inputs like those it was first called with, and
compares outputs and input gradients. Usage: python {filename} [--compiler thunder|inductor]
"""

import argparse
import importlib

import torch

{imports}


class Piece(torch.nn.Module):
    def __init__(self):
        super().__init__()
{attributes}

{forward}

def set_attribute(module, qualified_name, value):
    *parents, name = qualified_name.split(".")
    for parent in parents:
        if not hasattr(module, parent):
            module.add_module(parent, torch.nn.Module())
        module = getattr(module, parent)
    setattr(module, name, value)


def make_tensor(shape, stride, dtype, device, requires_grad=False, low=None, high=None):
    size = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    if dtype is torch.bool:
        flat = torch.randint(0, 2, (size,), device=device).to(torch.bool)
    elif dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(size, device=device).to(dtype)
    else:
        flat = torch.randint(int(low or 0), int(high or 0) + 1, (size,), device=device, dtype=dtype)
    return flat.as_strided(shape, stride).detach().requires_grad_(requires_grad)


def make_inputs():
    return [
{inputs}
    ]


def copy_inputs(inputs):
    return [
        x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs
    ]


def run(fn, inputs, grad_seed=1):
    outputs = fn(*inputs)
    flat = [o for o in torch.utils._pytree.tree_leaves(outputs) if isinstance(o, torch.Tensor)]
    differentiable = [o for o in flat if o.requires_grad]
    leaves = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    grads = []
    if differentiable and leaves:
        generator = torch.Generator().manual_seed(grad_seed)
        cotangents = [torch.randn(o.shape, generator=generator).to(o) for o in differentiable]
        grads = torch.autograd.grad(differentiable, leaves, cotangents, allow_unused=True)
    return [o.detach() for o in flat], [g for g in grads if g is not None]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compiler", default={default_compiler!r}, choices=["thunder", "inductor"])
    compiler = parser.parse_args().compiler
    torch.manual_seed(0)
    model = Piece()
    inputs = make_inputs()
    expected = run(model, copy_inputs(inputs))
    if compiler == "thunder":
        thunder = importlib.import_module("thunder")
        compiled = thunder.jit(model)
    else:
        compiled = torch.compile(model, backend="inductor")
    actual = run(compiled, copy_inputs(inputs))
    torch.testing.assert_close(actual, expected, equal_nan=True)
    print(f"OK: {{compiler}} matches eager on {title} ({{len(actual[0])}} outputs, {{len(actual[1])}} gradients)")


if __name__ == "__main__":
    main()
'''


def reproducer_script(
    piece: torch.fx.GraphModule, inputs: list[Any], *, title: str, filename: str, compiler: CompilerType
) -> str:
    """The text of a standalone script that checks ``piece`` compiled against eager on inputs like ``inputs``."""
    code = piece.graph.python_code(root_module="self", include_stride=True, include_device=True)
    imports = [_import_line(name, value) for name, value in sorted(code.globals.items())]
    forward = textwrap.indent(code.src.strip("\n"), "    ")
    attributes = textwrap.indent("\n".join(_attribute_lines(piece) or ["pass"]), " " * 8)
    input_lines = textwrap.indent("\n".join(f"{_value_python(v)}," for v in inputs), " " * 8)
    return _TEMPLATE.format(
        title=title,
        filename=filename,
        imports="\n".join(i for i in imports if i != "import torch"),
        attributes=attributes,
        forward=forward,
        inputs=input_lines,
        default_compiler="thunder" if compiler is CompilerType.THUNDER else "inductor",
    )


def save_reproducers(info: SubgraphInfo, folder: Path, prefix: str) -> list[Path]:
    """Write a script for each piece of ``info`` that has been called (``{prefix}_{piece}.py``)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    pieces = {name: module for name, module in info.split_graph_module.named_children()}
    for piece, compiled in info.submodule_to_compiled_functions.items():
        name = next(n for n, m in pieces.items() if m is compiled.compiled_fn)
        if name not in info.recorded_inputs:
            continue  # never called, so no inputs to imitate
        filename = f"{prefix}_{name}.py"
        text = reproducer_script(
            piece,
            info.recorded_inputs[name],
            title=f"piece {name} of {prefix}",
            filename=filename,
            compiler=compiled.compiler,
        )
        (folder / filename).write_text(text)
        written.append(folder / filename)
    return written
