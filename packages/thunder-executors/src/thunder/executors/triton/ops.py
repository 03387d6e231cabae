"""What the Triton executor can generate, as tables: prim name -> Triton expression template.

Templates take their operands already converted to the op's compute dtype (float32 for 16-bit
floats). Functions that Triton's interpreter lacks (``libdevice`` is GPU-only) are small
``@triton.jit`` helpers written with ``tl`` primitives only (``HELPERS``), so the same generated
kernel runs in the interpreter on the CPU and compiled on the GPU.
"""

from __future__ import annotations

import torch

__all__ = [
    "UNARY_FLOAT",
    "UNARY_ANY",
    "BINARY_FLOAT",
    "BINARY_ANY",
    "BINARY_INTEGER",
    "COMPARISONS",
    "REDUCTIONS",
    "POW_EXPONENTS",
    "HELPERS",
    "TRITON_DTYPES",
    "helpers_used",
]

# unary ops on floating-point tensors
UNARY_FLOAT: dict[str, str] = {
    "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})",
    "expm1": "_expm1({0})",
    "log": "tl.log({0})",
    "log2": "tl.log2({0})",
    "log1p": "_log1p({0})",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "tan": "(tl.sin({0}) / tl.cos({0}))",
    "tanh": "_tanh({0})",
    "sinh": "_sinh({0})",
    "cosh": "_cosh({0})",
    "sqrt": "tl.sqrt_rn({0})",
    "rsqrt": "(1.0 / tl.sqrt_rn({0}))",
    "reciprocal": "(1.0 / {0})",
    "erf": "tl.erf({0})",
    "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})",
    "round": "_round_half_even({0})",
    "trunc": "_trunc({0})",
    "sigmoid": "tl.sigmoid({0})",
    "sign": "_sign({0})",
    "isnan": "({0} != {0})",
    "isfinite": "(tl.abs({0}) < float('inf'))",
}
# unary ops on any real dtype (integers and floats)
UNARY_ANY: dict[str, str] = {"abs": "tl.abs({0})", "neg": "(-{0})"}

BINARY_FLOAT: dict[str, str] = {"div": "({0} / {1})"}
BINARY_ANY: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
}
BINARY_INTEGER: dict[str, str] = {
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
}
COMPARISONS: dict[str, str] = {
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
}
# pow with a Python-number exponent, the exponents models use (x**2, gelu's x**3, sqrt, ...)
POW_EXPONENTS: dict[float, str] = {
    0.5: "tl.sqrt_rn({0})",
    1.0: "{0}",
    2.0: "({0} * {0})",
    3.0: "({0} * {0} * {0})",
    4.0: "({0} * {0} * {0} * {0})",
    -0.5: "(1.0 / tl.sqrt_rn({0}))",
    -1.0: "(1.0 / {0})",
    -2.0: "(1.0 / ({0} * {0}))",
}
# reductions: (identity element, combine template, final block reduction)
REDUCTIONS: dict[str, tuple[str, str, str]] = {
    "sum": ("0.0", "({0} + {1})", "tl.sum({0}, axis=1, keep_dims=True)"),
    "amax": (
        "-float('inf')",
        "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
        "tl.max({0}, axis=1, keep_dims=True)",
    ),
    "amin": (
        "float('inf')",
        "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
        "tl.min({0}, axis=1, keep_dims=True)",
    ),
}

TRITON_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.int16: "tl.int16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}

# Accuracy: below the thresholds the series are exact to float32 rounding; above them the
# closed forms lose no more than a few ulp.
HELPERS: dict[str, str] = {
    "_expm1": """
@triton.jit
def _expm1(x):
    small = x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0)))))
    return tl.where(tl.abs(x) < 0.05, small, tl.exp(x) - 1.0)
""",
    "_log1p": """
@triton.jit
def _log1p(x):
    u = 1.0 + x
    d = u - 1.0
    return tl.where(d == 0.0, x, tl.log(u) * (x / tl.where(d == 0.0, 1.0, d)))
""",
    "_tanh": """
@triton.jit
def _tanh(x):
    a = tl.abs(x)
    t = tl.exp(-2.0 * a)
    big = (1.0 - t) / (1.0 + t)
    x2 = x * x
    small = a * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    r = tl.where(a < 0.1, small, big)
    return tl.where(x < 0.0, -r, tl.where(x != x, x, r))
""",
    "_sinh": """
@triton.jit
def _sinh(x):
    a = tl.abs(x)
    e = tl.exp(a)
    x2 = x * x
    small = a * (1.0 + x2 * (1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (1.0 / 5040.0))))
    r = tl.where(a < 0.1, small, 0.5 * (e - 1.0 / e))
    return tl.where(x < 0.0, -r, tl.where(x != x, x, r))
""",
    "_cosh": """
@triton.jit
def _cosh(x):
    e = tl.exp(tl.abs(x))
    return 0.5 * (e + 1.0 / e)
""",
    "_trunc": """
@triton.jit
def _trunc(x):
    return tl.where(x < 0.0, tl.ceil(x), tl.floor(x))
""",
    "_round_half_even": """
@triton.jit
def _round_half_even(x):
    r = tl.floor(x + 0.5)
    half = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(half & odd, r - 1.0, r)
""",
    "_sign": """
@triton.jit
def _sign(x):
    return tl.where(x > 0.0, 1.0, tl.where(x < 0.0, -1.0, x))
""",
}


def helpers_used(source: str) -> list[str]:
    """The helper definitions a kernel body calls, in a fixed order."""
    return [code for name, code in HELPERS.items() if f"{name}(" in source]
