"""The torch language: thunder symbols for PyTorch's operators, printed as ``ltorch.<name>``.

Each symbol is written in terms of other symbols and, at the bottom, prims; the frontend calls
them in place of the torch callables they are registered for (``symbol_for``), and proxies call
them for their methods and operators.
"""

from thunder.torch.conversions import bfloat16, bool, double, float, half, int, long, to, type_as  # noqa: A004
from thunder.torch.creation import full, ones, ones_like, rand, zeros, zeros_like
from thunder.torch.elementwise import (  # type: ignore[attr-defined]
    abs, acos, add, asin, atan, atan2, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, ceil, clamp, cos, cosh,
    div, eq, erf, erfc, exp, exp2, expm1, floor, floor_divide, fmod, ge, gt, isfinite, isnan, le, log, log1p, log2,
    lt, maximum, minimum, mul, ne, neg, positive, pow, reciprocal, remainder, round, rsqrt, sign, sin, sinh, sqrt,
    sub, tan, tanh, tensor_where, true_divide, trunc, where,
)  # fmt: skip  # noqa: A004
from thunder.torch.nn import (
    bmm, cross_entropy, dropout, gelu, linear, log_softmax, matmul, mm, nll_loss, relu, sigmoid, silu, softmax,
)  # fmt: skip
from thunder.torch.reductions import amax, amin, argmax, argmin, mean, prod, sum, var  # noqa: A004
from thunder.torch.registry import symbol_for, torch_callables, torchsymbol
from thunder.torch.shape import (
    T, cat, contiguous, expand, flatten, getitem, mT, permute, reshape, squeeze, stack, t, transpose, unbind,
    unsqueeze, view,
)  # fmt: skip

__all__ = [name for name in dir() if not name.startswith("_")]
