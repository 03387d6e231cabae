"""The matmul family beyond matmul itself: add-multiply forms, vector products, einsum, tensordot.

Everything lowers to ``prims.matmul`` (plus shape prims and elementwise prims), so the decomposition
of a contraction is a permute, a reshape to a batched matrix product, and a reshape back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, prims
from thunder.core.promotion import broadcast_shapes
from thunder.core.proxies import TensorProxy
from thunder.torch import arrange, reductions, shape
from thunder.torch import elementwise as ew
from thunder.torch.nn import matmul
from thunder.torch.nn_common import narrow
from thunder.torch.registry import torchsymbol
from thunder.torch.utils import canonical_dim, expand_to, to_dtype


def _same_dtype(name: str, *tensors: TensorProxy | None) -> None:
    present = [t for t in tensors if t is not None]
    for t in present[1:]:
        if t.dtype is not present[0].dtype:
            raise RuntimeError(
                f"{name}: expected all tensors to have the same dtype, got {present[0].dtype} and {t.dtype}"
            )


def _scalars(a: TensorProxy, beta: Any, alpha: Any) -> tuple[Any, Any]:
    """beta and alpha as eager's kernels use them: integer tensors truncate them to integers."""
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return beta, alpha
    convert = bool if a.dtype is dtypes.bool8 else int
    return convert(beta), convert(alpha)


def _scaled_sum(a: TensorProxy, product: TensorProxy, beta: Any, alpha: Any) -> TensorProxy:
    """``beta * a + alpha * product``; ``a`` is ignored (NaN included) when beta is 0, as in eager."""
    if a.ndim > product.ndim or broadcast_shapes(a.shape, product.shape) != product.shape:
        raise RuntimeError(f"the input of shape {a.shape} cannot be broadcast to {product.shape}")
    bool_ops = a.dtype is dtypes.bool8
    scaled_product = product
    if alpha != 1:
        scaled_product = ew.bitwise_and(product, bool(alpha)) if bool_ops else ew.mul(product, alpha)
    if beta == 0:
        return scaled_product
    added = expand_to(a, product.shape)
    if beta != 1:
        added = ew.bitwise_and(added, bool(beta)) if bool_ops else ew.mul(added, beta)
    return ew.bitwise_or(added, scaled_product) if bool_ops else ew.add(added, scaled_product)


def _to_float(t: TensorProxy) -> TensorProxy:
    return to_dtype(t, dtypes.float32) if dtypes.is_low_precision(t.dtype) else t


def _float_matmul(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    """A product that stays in float32 for half-precision operands: eager's fused add-multiply
    kernels round only their final result."""
    return prims.matmul(_to_float(a), _to_float(b))


def _in_float(fn: Any, a: TensorProxy, product: TensorProxy, beta: Any, alpha: Any) -> TensorProxy:
    if not dtypes.is_low_precision(a.dtype):
        return fn(a, product, beta, alpha)
    f32 = dtypes.float32
    return to_dtype(fn(to_dtype(a, f32), to_dtype(product, f32), beta, alpha), a.dtype)


@torchsymbol(torch.addmm, torch.Tensor.addmm, method="addmm")
def addmm(
    input: TensorProxy, mat1: TensorProxy, mat2: TensorProxy, *, beta: Any = 1, alpha: Any = 1
) -> TensorProxy:
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"addmm: expected 2-D matrices, got {mat1.ndim}-D and {mat2.ndim}-D")
    _same_dtype("addmm", input, mat1, mat2)
    beta, alpha = _scalars(input, beta, alpha)
    return _in_float(_scaled_sum, input, prims.matmul(mat1, mat2), beta, alpha)


@torchsymbol(torch.baddbmm, torch.Tensor.baddbmm, method="baddbmm")
def baddbmm(
    input: TensorProxy, batch1: TensorProxy, batch2: TensorProxy, *, beta: Any = 1, alpha: Any = 1
) -> TensorProxy:
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"baddbmm: expected 3-D tensors, got {batch1.ndim}-D and {batch2.ndim}-D")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError("baddbmm: batch1 and batch2 must have the same number of batches")
    _same_dtype("baddbmm", input, batch1, batch2)
    beta, alpha = _scalars(input, beta, alpha)
    return _in_float(_scaled_sum, input, _float_matmul(batch1, batch2), beta, alpha)


@torchsymbol(torch.addbmm, torch.Tensor.addbmm, method="addbmm")
def addbmm(
    input: TensorProxy, batch1: TensorProxy, batch2: TensorProxy, *, beta: Any = 1, alpha: Any = 1
) -> TensorProxy:
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"addbmm: expected 3-D tensors, got {batch1.ndim}-D and {batch2.ndim}-D")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError("addbmm: batch1 and batch2 must have the same number of batches")
    _same_dtype("addbmm", input, batch1, batch2)
    beta, alpha = _scalars(input, beta, alpha)
    # one matrix product over the concatenated batch: (n, b*k) @ (b*k, p)
    b, n, k = batch1.shape
    p = batch2.shape[2]
    left = prims.reshape(prims.transpose(batch1, (1, 0, 2)), (n, b * k))
    right = prims.reshape(batch2, (b * k, p))
    return _in_float(_scaled_sum, input, _float_matmul(left, right), beta, alpha)


@torchsymbol(torch.addmv, torch.Tensor.addmv, method="addmv")
def addmv(
    input: TensorProxy, mat: TensorProxy, vec: TensorProxy, *, beta: Any = 1, alpha: Any = 1
) -> TensorProxy:
    product = mv(mat, vec)
    _same_dtype("addmv", input, mat, vec)
    beta, alpha = _scalars(input, beta, alpha)
    return _in_float(_scaled_sum, input, product, beta, alpha)


@torchsymbol(torch.addr, torch.Tensor.addr, method="addr")
def addr(
    input: TensorProxy, vec1: TensorProxy, vec2: TensorProxy, *, beta: Any = 1, alpha: Any = 1
) -> TensorProxy:
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: expected 1-D vectors, got {vec1.ndim}-D and {vec2.ndim}-D")
    _same_dtype("addr", input, vec1, vec2)
    beta, alpha = _scalars(input, beta, alpha)
    if input.dtype is dtypes.bool8:
        product = ew.bitwise_and(shape.unsqueeze(vec1, 1), shape.unsqueeze(vec2, 0))
        return _scaled_sum(input, product, beta, alpha)
    product = ew.mul(shape.unsqueeze(_to_float(vec1), 1), shape.unsqueeze(_to_float(vec2), 0))
    return _in_float(_scaled_sum, input, product, beta, alpha)


@torchsymbol(torch.mv, torch.Tensor.mv, method="mv")
def mv(input: TensorProxy, vec: TensorProxy) -> TensorProxy:
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({input.shape[0]}), mat ({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})"
        )
    _same_dtype("mv", input, vec)
    return prims.matmul(input, vec)


@torchsymbol(torch.dot, torch.Tensor.dot, method="dot")
def dot(input: TensorProxy, tensor: TensorProxy) -> TensorProxy:
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.shape != tensor.shape:
        raise RuntimeError("inconsistent tensor size")
    _same_dtype("dot", input, tensor)
    return prims.matmul(input, tensor)


@torchsymbol(torch.vdot, torch.Tensor.vdot, method="vdot")
def vdot(input: TensorProxy, other: TensorProxy) -> TensorProxy:
    if input.dtype.is_complex:
        raise NotImplementedError("vdot of complex tensors (conjugation) is not supported by thunder yet")
    return dot(input, other)


@torchsymbol(torch.outer, torch.ger, torch.Tensor.outer, torch.Tensor.ger, method=("outer", "ger"))
def outer(input: TensorProxy, vec2: TensorProxy) -> TensorProxy:
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D vectors, got {input.ndim}-D and {vec2.ndim}-D")
    return ew.mul(shape.unsqueeze(input, 1), shape.unsqueeze(vec2, 0))


@torchsymbol(torch.inner, torch.Tensor.inner, method="inner")
def inner(input: TensorProxy, other: TensorProxy) -> TensorProxy:
    if input.ndim == 0 or other.ndim == 0:
        return ew.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes {input.shape} and {other.shape}"
        )
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


@torchsymbol(torch.linalg.vecdot)
def vecdot(x: TensorProxy, y: TensorProxy, *, dim: int = -1) -> TensorProxy:
    _same_dtype("linalg.vecdot", x, y)
    if x.dtype.is_complex:
        raise NotImplementedError(
            "linalg.vecdot of complex tensors (conjugation) is not supported by thunder yet"
        )
    out_ndim = max(x.ndim, y.ndim)
    d = canonical_dim(dim, out_ndim)
    return reductions.sum(ew.mul(x, y), d)


@torchsymbol(torch.kron, torch.Tensor.kron, method="kron")
def kron(input: TensorProxy, other: TensorProxy) -> TensorProxy:
    ndim = max(input.ndim, other.ndim)
    a_shape = (1,) * (ndim - input.ndim) + input.shape
    b_shape = (1,) * (ndim - other.ndim) + other.shape
    # interleave: a's dims at even positions, b's at odd ones, so the product's reshape is kron
    a_view = shape.reshape(input, tuple(s for size in a_shape for s in (size, 1)))
    b_view = shape.reshape(other, tuple(s for size in b_shape for s in (1, size)))
    return shape.reshape(ew.mul(a_view, b_view), tuple(x * y for x, y in zip(a_shape, b_shape)))


def _contract(a: TensorProxy, b: TensorProxy, a_dims: Sequence[int], b_dims: Sequence[int]) -> TensorProxy:
    """Sum over ``a_dims`` of ``a`` paired with ``b_dims`` of ``b``; result: a's free dims, then b's."""
    a_free = [d for d in range(a.ndim) if d not in a_dims]
    b_free = [d for d in range(b.ndim) if d not in b_dims]
    k = math.prod(a.shape[d] for d in a_dims)
    left = shape.reshape(shape.permute(a, a_free + list(a_dims)), (math.prod(a.shape[d] for d in a_free), k))
    right = shape.reshape(shape.permute(b, list(b_dims) + b_free), (k, math.prod(b.shape[d] for d in b_free)))
    result_shape = tuple(a.shape[d] for d in a_free) + tuple(b.shape[d] for d in b_free)
    return shape.reshape(prims.matmul(left, right), result_shape)


@torchsymbol(torch.tensordot)
def tensordot(a: TensorProxy, b: TensorProxy, dims: Any = 2, out: Any = None) -> TensorProxy:
    if out is not None:
        raise NotImplementedError("tensordot with out= is not supported by thunder yet")
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        a_dims, b_dims = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, TensorProxy):
        raise NotImplementedError("tensordot with dims given as a tensor is not supported by thunder")
    else:
        a_dims = [canonical_dim(d, a.ndim) for d in _as_list(dims[0])]
        b_dims = [canonical_dim(d, b.ndim) for d in _as_list(dims[1])]
        if len(a_dims) != len(b_dims):
            raise RuntimeError("both dimension lists should have same length")
    a_target, b_target = list(a.shape), list(b.shape)
    for da, db in zip(a_dims, b_dims):
        if a.shape[da] != b.shape[db] and 1 not in (a.shape[da], b.shape[db]):
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}"
            )
        a_target[da] = b_target[db] = max(a.shape[da], b.shape[db])  # size 1 broadcasts
    _same_dtype("tensordot", a, b)
    a, b = expand_to(a, tuple(a_target)), expand_to(b, tuple(b_target))
    return _contract(a, b, a_dims, b_dims)


def _as_list(dims: Any) -> list[int]:
    return [dims] if isinstance(dims, int) else list(dims)


@torchsymbol(torch.linalg.multi_dot)
def multi_dot(tensors: Sequence[TensorProxy], *, out: Any = None) -> TensorProxy:
    if out is not None:
        raise NotImplementedError("multi_dot with out= is not supported by thunder yet")
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            raise RuntimeError(
                f"multi_dot(): tensor {i} must be {' or '.join(map(str, allowed))}D but got {t.ndim}D"
            )
    _same_dtype("multi_dot", *tensors)
    if len(tensors) == 2:
        return matmul(tensors[0], tensors[1])
    # as matrices (a vector first is a row, last a column), multiplied in eager's order: it rounds the same
    first, last = tensors[0], tensors[-1]
    matrices = [
        prims.reshape(first, (1, first.shape[0])) if first.ndim == 1 else first,
        *tensors[1:-1],
        prims.reshape(last, (last.shape[0], 1)) if last.ndim == 1 else last,
    ]
    result = _chain_product(matrices, _chain_order(matrices), 0, len(matrices) - 1)
    shape = (*first.shape[:-1], *last.shape[1:])  # the vector dims squeezed again
    return prims.reshape(result, shape) if result.shape != shape else result


def _chain_order(matrices: Sequence[TensorProxy]) -> list[list[int]]:
    """ATen's ``matrix_chain_order``: where to split each sub-chain i..j; three matrices have ATen's own
    test, which breaks a tie the other way (left pair first)."""
    n = len(matrices)
    p = [m.shape[0] for m in matrices] + [matrices[-1].shape[1]]
    if n == 3:
        left_first, right_first = p[0] * p[2] * (p[1] + p[3]), p[1] * p[3] * (p[0] + p[2])
        return [[0, 0, 0 if left_first > right_first else 1], [0] * 3, [0] * 3]
    cost: list[list[float]] = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


def _chain_product(matrices: Sequence[TensorProxy], split: list[list[int]], i: int, j: int) -> TensorProxy:
    if i == j:
        return matrices[i]
    k = split[i][j]
    return matmul(_chain_product(matrices, split, i, k), _chain_product(matrices, split, k + 1, j))


@torchsymbol(F.bilinear)
def bilinear(
    input1: TensorProxy, input2: TensorProxy, weight: TensorProxy, bias: TensorProxy | None = None
) -> TensorProxy:
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear: input batch dimensions differ: {input1.shape} and {input2.shape}")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(
            f"bilinear: weight of shape {weight.shape} does not fit inputs {input1.shape} and {input2.shape}"
        )
    _same_dtype("bilinear", input1, input2, weight, bias)
    result = einsum("...i,oij,...j->...o", input1, weight, input2)
    return ew.add(result, bias) if bias is not None else result


# ---------------------------------------------------------------------------------------------
# einsum


def _parse_einsum(equation: str, operands: Sequence[TensorProxy]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's. The dims under ``...`` get labels ``@0``, ``@1``...
    right-aligned across operands, as broadcasting aligns them."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): {len(terms)} operand subscripts for {len(operands)} operands")
    extras = []
    for term, operand in zip(terms, operands):
        named = term.replace("...", "")
        if not all(c.isalpha() for c in named) or term.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscript in {term!r}")
        extra = operand.ndim - len(named)
        if extra < 0 or ("..." not in term and extra != 0):
            raise RuntimeError(
                f"einsum(): the number of subscripts in {term!r} does not match the number of dimensions ({operand.ndim})"
            )
        extras.append(extra)
    widest = max(extras)
    labels = [_expand_ellipsis(term, extra, widest) for term, extra in zip(terms, extras)]
    if arrow:
        output = _expand_ellipsis(rhs, widest, widest)
        if not all(c.isalpha() for c in rhs.replace("...", "")):
            raise RuntimeError(f"einsum(): invalid output subscript {rhs!r}")
    else:
        counts: dict[str, int] = {}
        for term_labels in labels:
            for label in term_labels:
                counts[label] = counts.get(label, 0) + 1
        named_output = sorted(c for c, n in counts.items() if n == 1 and not c.startswith("@"))
        output = [f"@{i}" for i in range(widest)] + named_output
    if len(set(output)) != len(output):
        raise RuntimeError(f"einsum(): output subscript {rhs!r} contains a label more than once")
    all_labels = {label for term_labels in labels for label in term_labels}
    for label in output:
        if label not in all_labels:
            raise RuntimeError(
                f"einsum(): output subscript {label} does not appear in the equation for any input operand"
            )
    return labels, output


def _expand_ellipsis(term: str, extra: int, widest: int) -> list[str]:
    before, ellipsis, after = term.partition("...")
    if not ellipsis:
        return list(term)
    return list(before) + [f"@{widest - extra + i}" for i in range(extra)] + list(after)


def _diagonal_of_repeats(a: TensorProxy, labels: list[str]) -> tuple[TensorProxy, list[str]]:
    """Collapse a label repeated within one operand into its diagonal (``ii->i``)."""
    while len(set(labels)) != len(labels):
        label = next(x for x in labels if labels.count(x) > 1)
        first, second = (i for i, x in enumerate(labels) if x == label)
        if a.shape[first] != a.shape[second]:
            raise RuntimeError(
                f"einsum(): subscript {label} is repeated for operand but the sizes don't match, {a.shape[first]} != {a.shape[second]}"
            )
        rest = [d for d in range(a.ndim) if d not in (first, second)]
        n = a.shape[first]
        moved = shape.permute(a, rest + [first, second])
        flat = shape.reshape(moved, tuple(a.shape[d] for d in rest) + (n * n,))
        a = narrow(flat, flat.ndim - 1, 0, n, n + 1) if n > 1 else flat
        labels = [labels[d] for d in rest] + [label]
    return a, labels


@torchsymbol(torch.einsum)
def einsum(equation: str, *operands: Any) -> TensorProxy:
    if len(operands) == 1 and isinstance(operands[0], Sequence) and not isinstance(operands[0], TensorProxy):
        operands = tuple(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    _same_dtype("einsum", *operands)
    labels, output = _parse_einsum(equation, operands)
    terms = [_diagonal_of_repeats(op, list(term)) for op, term in zip(operands, labels)]
    sizes = _label_sizes(terms)
    result, result_labels = terms[0]
    for index in range(1, len(terms)):
        later = {x for _, term in terms[index + 1 :] for x in term} | set(output)
        result, result_labels = _sum_out(result, result_labels, later | set(terms[index][1]))
        other, other_labels = _sum_out(*terms[index], later | set(result_labels))
        result, result_labels = _pairwise(result, result_labels, other, other_labels, later, sizes)
    result, result_labels = _sum_out(result, result_labels, set(output))
    result = _broadcast_labels(result, result_labels, sizes)
    return shape.permute(result, [result_labels.index(x) for x in output]) if result.ndim else result


def _label_sizes(terms: list[tuple[TensorProxy, list[str]]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for a, term in terms:
        for size, label in zip(a.shape, term):
            if label in sizes and size != sizes[label] and 1 not in (size, sizes[label]):
                raise RuntimeError(
                    f"einsum(): operands do not broadcast with remapped shapes for subscript {label}: {sizes[label]} and {size}"
                )
            sizes[label] = size if label not in sizes or sizes[label] == 1 else sizes[label]
    return sizes


def _sum_out(a: TensorProxy, labels: list[str], keep: set[str]) -> tuple[TensorProxy, list[str]]:
    dims = [d for d, x in enumerate(labels) if x not in keep]
    if not dims:
        return a, labels
    return reductions.sum(a, dims), [x for x in labels if x in keep]


def _broadcast_labels(a: TensorProxy, labels: list[str], sizes: dict[str, int]) -> TensorProxy:
    target = tuple(sizes[x] for x in labels)
    return expand_to(a, target) if target != a.shape else a


def _pairwise(a: TensorProxy, a_labels: list[str], b: TensorProxy, b_labels: list[str], later: set[str],
              sizes: dict[str, int]) -> tuple[TensorProxy, list[str]]:  # fmt: skip
    """One contraction: shared labels needed later are batch dims, shared labels not needed are summed."""
    shared = [x for x in a_labels if x in b_labels]
    batch = [x for x in shared if x in later]
    contracted = [x for x in shared if x not in later]
    a_only = [x for x in a_labels if x not in shared]
    b_only = [x for x in b_labels if x not in shared]
    # size-1 dims broadcast against the other operand's size
    a = _broadcast_labels(
        a, a_labels, {x: (sizes[x] if x in shared else s) for x, s in zip(a_labels, a.shape)}
    )
    b = _broadcast_labels(
        b, b_labels, {x: (sizes[x] if x in shared else s) for x, s in zip(b_labels, b.shape)}
    )
    batch_shape = tuple(sizes[x] for x in batch)
    m = math.prod(a.shape[a_labels.index(x)] for x in a_only)
    n = math.prod(b.shape[b_labels.index(x)] for x in b_only)
    k = math.prod(sizes[x] for x in contracted)
    left = shape.permute(a, [a_labels.index(x) for x in batch + a_only + contracted])
    right = shape.permute(b, [b_labels.index(x) for x in batch + contracted + b_only])
    left = shape.reshape(left, batch_shape + (m, k))
    right = shape.reshape(right, batch_shape + (k, n))
    product = prims.matmul(left, right)
    result_shape = (
        batch_shape
        + tuple(a.shape[a_labels.index(x)] for x in a_only)
        + tuple(b.shape[b_labels.index(x)] for x in b_only)
    )
    return shape.reshape(product, result_shape), batch + a_only + b_only


def _cross(a: TensorProxy, b: TensorProxy, dim: int) -> TensorProxy:
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = canonical_dim(dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}"
        )
    _same_dtype("linalg.cross", a, b)
    shape_ = broadcast_shapes(a.shape, b.shape)
    a, b = expand_to(a, shape_), expand_to(b, shape_)
    # component i is a[i+1] * b[i+2] - a[i+2] * b[i+1], as eager's kernel computes it
    next_a, next_b = arrange.roll(a, -1, d), arrange.roll(b, -1, d)
    after_a, after_b = arrange.roll(a, -2, d), arrange.roll(b, -2, d)
    return ew.sub(ew.mul(next_a, after_b), ew.mul(after_a, next_b))


@torchsymbol(torch.linalg.cross, name="linalg_cross")
def linalg_cross(input: TensorProxy, other: TensorProxy, *, dim: int = -1) -> TensorProxy:
    return _cross(input, other, dim)


@torchsymbol(torch.cross, torch.Tensor.cross, method="cross")
def cross(input: TensorProxy, other: TensorProxy, dim: int | None = None) -> TensorProxy:
    if dim is None:  # eager's deprecated default: the first dim of size 3
        dim = next(
            (i for i, size in enumerate(broadcast_shapes(input.shape, other.shape)) if size == 3), None
        )
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return _cross(input, other, dim)


@torchsymbol(torch.linalg.vander, name="vander")
def vander(x: TensorProxy, *, N: int | None = None) -> TensorProxy:  # noqa: N803 -- torch's name
    """Columns of increasing powers, ``x ** 0`` to ``x ** (N - 1)``, built by cumprod as eager does."""
    if x.dtype is dtypes.bool8:
        raise RuntimeError(
            "linalg.vander supports floating point, complex, and integer tensors, but got Bool"
        )
    x = prims.reshape(x, (1,)) if x.ndim == 0 else x
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = prims.broadcast_in_dim(x, (*x.shape, n - 1), tuple(range(x.ndim)))
    powers = prims.cumprod(powers, x.ndim)
    ones = prims.full((*x.shape, 1), 1, device=x.device, dtype=x.dtype)
    return prims.cat([ones, powers], x.ndim)
