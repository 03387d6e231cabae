"""The convolution prim (aten.convolution semantics: groups, stride, padding, dilation, transposed) and its rule."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from thunder.core.gradients import register_vjp
from thunder.core.prims.core import (
    _check,
    reshape,
    slice_prim,
    sum,  # noqa: A004 -- the prims, as in core
    transpose,
)
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import make_prim


def _convolution_output_size(
    size: int, kernel: int, stride: int, padding: int, dilation: int, transposed: bool, output_padding: int
) -> int:
    if transposed:
        return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _convolution_meta(
    a: TensorProxy,
    weight: TensorProxy,
    bias: TensorProxy | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> TensorProxy:
    """aten.convolution over a batched input (N, C, *spatial); every per-dim argument is explicit.

    The weight is (C_out, C_in / groups, *kernel), or (C_in, C_out / groups, *kernel) when transposed.
    """
    spatial = a.ndim - 2
    _check(
        spatial >= 1 and weight.ndim == a.ndim, lambda: f"convolution of {a.shape} with weight {weight.shape}"
    )
    _check(a.dtype is weight.dtype, lambda: f"convolution: input is {a.dtype} and weight is {weight.dtype}")
    for name, values in (
        ("stride", stride),
        ("padding", padding),
        ("dilation", dilation),
        ("output_padding", output_padding),
    ):
        _check(len(values) == spatial, lambda: f"convolution: {name} needs {spatial} values, got {values}")
    _check(
        builtins.min(stride) > 0 and builtins.min(dilation) > 0,
        lambda: "convolution: stride and dilation must be positive",
    )
    _check(
        builtins.min(padding) >= 0 and builtins.min(output_padding) >= 0,
        lambda: "convolution: negative padding",
    )
    _check(groups > 0, lambda: "convolution: non-positive groups is not supported")
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    _check(
        a.shape[1] == in_channels,
        lambda: (
            f"convolution: input {a.shape} has {a.shape[1]} channels, weight {weight.shape} expects {in_channels}"
        ),
    )
    _check(
        weight.shape[0] % groups == 0,
        lambda: f"convolution: weight {weight.shape} is not divisible into {groups} groups",
    )
    if transposed:
        for op, s, d in zip(output_padding, stride, dilation):
            _check(
                op < builtins.max(s, d),
                lambda: "convolution: output padding must be smaller than either stride or dilation",
            )
    if bias is not None:
        _check(
            bias.shape == (out_channels,),
            lambda: f"convolution: bias {bias.shape} for {out_channels} output channels",
        )
        _check(bias.dtype is a.dtype, lambda: f"convolution: bias is {bias.dtype} and input is {a.dtype}")
    shape = [a.shape[0], out_channels]
    for d in range(spatial):
        size = _convolution_output_size(
            a.shape[d + 2],
            weight.shape[d + 2],
            stride[d],
            padding[d],
            dilation[d],
            transposed,
            output_padding[d],
        )
        _check(
            size > 0 or a.shape[d + 2] == 0,
            lambda: f"convolution: the output of {a.shape} with kernel {weight.shape} would be empty",
        )
        shape.append(builtins.max(size, 0))
    requires_grad = a.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    return a.replace(shape=tuple(shape), requires_grad=requires_grad)


convolution = make_prim("convolution", _convolution_meta)


@register_vjp(convolution)
def _convolution_vjp(
    g: Any, a: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
    output_padding: Any, groups: int, *, out: Any,
) -> tuple:  # fmt: skip
    if g is None:
        return (None,) * 9
    kernel = weight.shape[2:]
    if transposed:
        # a transposed convolution is the adjoint of the convolution from its output to its input;
        # with output_padding >= stride that convolution reaches past the input: cut it back
        grad_a = convolution(g, weight, None, stride, padding, dilation, False, [0] * len(kernel), groups)
        if grad_a.shape != a.shape:
            grad_a = slice_prim(grad_a, [0] * a.ndim, list(a.shape), [1] * a.ndim)
        grad_weight = _convolution_weight_grad(g, a, kernel, stride, padding, dilation, groups)
    else:
        adjoint_padding = [
            size - _convolution_output_size(o, k, s, p, d, True, 0)
            for size, o, k, s, p, d in zip(a.shape[2:], g.shape[2:], kernel, stride, padding, dilation)
        ]
        grad_a = convolution(g, weight, None, stride, padding, dilation, True, adjoint_padding, groups)
        grad_weight = _convolution_weight_grad(a, g, kernel, stride, padding, dilation, groups)
    grad_bias = None
    if bias is not None:
        grad_bias = sum(g, [0] + list(range(2, g.ndim)))
    return (grad_a, grad_weight, grad_bias, None, None, None, None, None, None)


def _convolution_weight_grad(
    a: TensorProxy, g: TensorProxy, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
    dilation: Sequence[int], groups: int,
) -> TensorProxy:  # fmt: skip
    """d(conv(a, w))/dw applied to ``g``: itself a convolution of ``a`` (batch as channels) by ``g``,
    with stride and dilation swapped, cut to the kernel's size."""
    n, channels = a.shape[0], a.shape[1]
    out_channels = g.shape[1]
    spatial = list(range(3, a.ndim + 1))
    per_group_in, per_group_out = channels // groups, out_channels // groups
    # (C_in/G, G*N, *spatial): each group's input channels see that group's N batch entries
    lhs = reshape(a, (n, groups, per_group_in, *a.shape[2:]))
    lhs = reshape(transpose(lhs, [2, 1, 0, *spatial]), (per_group_in, groups * n, *a.shape[2:]))
    # (G*C_out/G, N, *out_spatial)
    rhs = reshape(g, (n, groups, per_group_out, *g.shape[2:]))
    rhs = reshape(transpose(rhs, [1, 2, 0, *spatial]), (out_channels, n, *g.shape[2:]))
    full = convolution(lhs, rhs, None, dilation, padding, stride, False, [0] * len(kernel), groups)
    cut = full
    if tuple(full.shape[2:]) != tuple(kernel):
        cut = slice_prim(full, [0] * full.ndim, [full.shape[0], full.shape[1], *kernel], [1] * full.ndim)
    return transpose(cut, [1, 0, *range(2, full.ndim)])
