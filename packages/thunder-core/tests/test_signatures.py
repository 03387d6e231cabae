"""Every torch-language symbol takes its arguments as the torch callables it stands for do (issue 21).

A symbol is called with the arguments the user wrote (``torch.mul(x, other=2.0)``), and the torch
executor calls the torch callable with the bound symbol's arguments unchanged, so a parameter
spelled differently (``b`` for ``other``) is a TypeError under ``thunder.jit`` that eager never
raises. For each (torch callable, symbol) pair of the registry, torch's signatures are read from
``inspect.signature`` (Python functions), else from the ATen schemas of the operator, which
Python's bindings follow (``self`` is ``input`` in the function form and the tensor itself in the
method form; the docstrings are looser: ``true_divide(dividend, divisor)``, ``Tensor.mul(value)``),
else from the signature lines of the docstring. For every signature (overload):

* its positional parameter names are a prefix of the symbol's, in order (past the tensor a method
  is called on);
* each of its keyword-only parameters (except ``out``, which the torch language handles) is a
  parameter of the symbol;
* a keyword-only parameter of the symbol is keyword-only, or absent, in every torch overload (a
  keyword-only parameter torch takes positionally rejects an eager call).

Symbols whose decomposition takes ``*args``/``**kwargs`` parse their own arguments and are not
checked here. Mismatches that cannot be fixed, or not yet, are in KNOWN with the reason; a new
mismatch fails ``test_signatures_match_torch``, and a KNOWN entry that no longer mismatches fails
``test_known_mismatches_are_current``.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder.torch as ltorch
from thunder.core.symbol import Symbol

Overload = tuple[tuple[str, ...], frozenset[str]]  # positional names, keyword-only names

_OVERLOADS = "torch has overloads no single Python signature can spell"
_IN_FLUX = "random numbers and dropout are being changed by another engineer; renamed when that lands"
KNOWN: dict[str, str] = {
    # overloads that name the same position differently
    "ltorch.arange": f"{_OVERLOADS}: arange(end) and arange(start, end, step)",
    "ltorch.max": f"{_OVERLOADS}: max(input, other) and max(input, dim, keepdim)",
    "ltorch.min": f"{_OVERLOADS}: min(input, other) and min(input, dim, keepdim)",
    "ltorch.scatter": f"{_OVERLOADS}: scatter(input, dim, index, src) and scatter(input, dim, index, value)",
    "ltorch.dsplit": f"{_OVERLOADS}: dsplit(input, sections) and dsplit(input, indices)",
    "ltorch.hsplit": f"{_OVERLOADS}: hsplit(input, sections) and hsplit(input, indices)",
    "ltorch.vsplit": f"{_OVERLOADS}: vsplit(input, sections) and vsplit(input, indices)",
    "ltorch.tensor_split": f"{_OVERLOADS}: tensor_split(input, sections | indices | tensor_indices_or_sections)",
    "ltorch.split": f"{_OVERLOADS}: torch.split(tensor, split_size_or_sections), Tensor.split(split_size)",
    "ltorch.isin": f"{_OVERLOADS}: isin(elements, test_elements) and isin(elements, test_element) for a scalar",
    "ltorch.transpose": "torch.swapaxes(input, axis0, axis1) is registered to transpose(input, dim0, dim1)",
    "ltorch.swapdims": "Tensor.swapaxes(axis0, axis1) is registered to swapdims(input, dim0, dim1)",
    "ltorch.repeat_interleave": f"{_OVERLOADS}: repeat_interleave(repeats) and repeat_interleave(input, repeats)",
    "ltorch.std": f"{_OVERLOADS}: std(input, dim, unbiased, keepdim) and std(input, dim, *, correction, keepdim)",
    "ltorch.var": f"{_OVERLOADS}: var(input, dim, unbiased, keepdim) and var(input, dim, *, correction, keepdim)",
    "ltorch.std_mean": f"{_OVERLOADS}: as std",
    "ltorch.var_mean": f"{_OVERLOADS}: as var",
    "ltorch.softmax": f"{_OVERLOADS}: F.softmax(input, dim, _stacklevel, dtype), torch.softmax(input, dim, dtype)",
    "ltorch.log_softmax": f"{_OVERLOADS}: as softmax",
    "ltorch.view": f"{_OVERLOADS}: Tensor.view(dtype) and Tensor.view(size), torch.view_copy likewise",
    "ltorch.rrelu": "F.rrelu(..., training, inplace) and torch.rrelu(..., training, generator) share the symbol",
    # torch parameters thunder does not implement
    "ltorch.mm": "mm(input, mat2, out_dtype): out_dtype (new in torch 2.x) is not supported",
    "ltorch.bmm": "bmm(input, mat2, out_dtype): out_dtype is not supported",
    "ltorch.addmm": "addmm(input, mat1, mat2, out_dtype): out_dtype is not supported",
    "ltorch.baddbmm": "baddbmm(input, batch1, batch2, out_dtype): out_dtype is not supported",
    "ltorch.group_norm": "torch.group_norm's trailing cudnn_enabled (an ATen flag) is not a parameter",
    "ltorch.layer_norm": "torch.layer_norm's trailing cudnn_enable (an ATen flag) is not a parameter",
    "ltorch.norm": "torch.norm(input, p, dim, keepdim, out, dtype): out is positional there, handled apart here",
    "ltorch.searchsorted": "ATen names the values `self` (input=), the docs `values`; the symbol takes values",
    # files other engineers are changing right now: renamed when they land
    "ltorch.alpha_dropout": _IN_FLUX,
    "ltorch.feature_alpha_dropout": _IN_FLUX,
    "ltorch.dropout": _IN_FLUX,
    "ltorch.dropout1d": _IN_FLUX,
    "ltorch.dropout2d": _IN_FLUX,
    "ltorch.dropout3d": _IN_FLUX,
    "ltorch.native_dropout": _IN_FLUX,
    "ltorch.bernoulli": _IN_FLUX,
    "ltorch.multinomial": _IN_FLUX,
    "ltorch.tensor": "torch.tensor(data): creation.py is being changed with the random-number work; renamed after",
}


def _is_method_descriptor(fn: Any) -> bool:
    return isinstance(
        fn, (types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType)
    )


def _schema_overloads(fn: Any) -> list[Overload]:
    method = _is_method_descriptor(fn)
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{fn.__name__}")
    # TorchScript's scalar and list overloads (aten::acos.int(int a)) are not Python's
    schemas = [s for s in schemas if s.arguments and str(s.arguments[0].type) == "Tensor"] or schemas
    # Python merges a Scalar overload into its Tensor one (add.Scalar's positional alpha is not Python's)
    if any(s.overload_name == "Tensor" for s in schemas):
        schemas = [s for s in schemas if "Scalar" not in s.overload_name]
    overloads = []
    for schema in schemas:
        arguments = list(schema.arguments)
        if any(a.name == "out" or (a.alias_info is not None and a.alias_info.is_write) for a in arguments):
            continue  # the out= variant
        if any("Dimname" in str(a.type) for a in arguments):
            continue  # named tensors: not supported
        positional = [a.name for a in arguments if not a.kwarg_only]
        keyword_only = frozenset(a.name for a in arguments if a.kwarg_only)
        if method:
            if not positional or positional[0] != "self":
                continue
            positional = positional[1:]
        else:
            positional = ["input" if name == "self" else name for name in positional]
        overloads.append((tuple(positional), keyword_only))
    return overloads


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


def _doc_overloads(fn: Any) -> list[Overload]:
    name = getattr(fn, "__name__", None)
    if not name or not fn.__doc__:
        return []
    overloads = []
    for match in re.finditer(rf"^\s*{re.escape(name)}\((.*)\)\s*->", fn.__doc__, re.MULTILINE):
        positional: list[str] = []
        keyword_only: set[str] = set()
        seen_star = False
        for part in _split_top_level(match.group(1)):
            if part == "*":
                seen_star = True
            elif part:
                param = re.split(r"[=:]", part)[0].strip()
                (keyword_only.add(param) if seen_star else positional.append(param))
        overloads.append((tuple(positional), frozenset(keyword_only)))
    return overloads


def torch_overloads(fn: Any) -> tuple[list[Overload], bool]:
    """torch's signatures of ``fn`` and whether they exclude the tensor a method is called on."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        if _is_method_descriptor(fn):  # method docstrings name parameters loosely: mul(value)
            return _schema_overloads(fn), True
        return _schema_overloads(fn) or _doc_overloads(fn), False
    parameters = list(signature.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return [], False
    positional = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    keyword_only = frozenset(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)
    if positional and positional[0] == "self":  # a Python-level method (Tensor.__rdiv__, Tensor.split)
        return [(positional[1:], keyword_only)], True
    return [(positional, keyword_only)], False


def _symbol_signature(symbol: Symbol) -> inspect.Signature | None:
    signature = inspect.signature(symbol.decomposition)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        return None  # parses its own arguments
    return signature


def mismatches(fn: Any, symbol: Symbol) -> list[str]:
    signature = _symbol_signature(symbol)
    overloads, method = torch_overloads(fn)
    if signature is None or not overloads:
        return []
    parameters = list(signature.parameters.values())
    positional = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD)
    if method:
        positional = positional[1:]
    keyword_only = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    problems = []
    for torch_positional, torch_keyword_only in overloads:
        if positional[: len(torch_positional)] != torch_positional:
            problems.append(f"positional parameters {positional}, torch's {torch_positional}")
        missing = torch_keyword_only - {"out"} - set(signature.parameters)
        if missing:
            problems.append(f"no parameter for torch's keyword-only {sorted(missing)}")
        too_strict = keyword_only & set(torch_positional)
        if too_strict:
            problems.append(f"keyword-only {sorted(too_strict)} where torch takes them positionally")
    name = getattr(fn, "__qualname__", repr(fn))
    return [f"{symbol.id} as {name}: {problem}" for problem in dict.fromkeys(problems)]


def _mismatches_by_symbol() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for fn, symbol in ltorch.torch_callables().items():
        problems = mismatches(fn, symbol)
        if problems:
            found.setdefault(symbol.id, []).extend(problems)
    return found


def test_signatures_match_torch() -> None:
    new = {k: v for k, v in _mismatches_by_symbol().items() if k not in KNOWN}
    assert not new, "symbols whose parameters differ from torch's:\n" + "\n".join(
        line for lines in new.values() for line in lines
    )


def test_known_mismatches_are_current() -> None:
    stale = set(KNOWN) - set(_mismatches_by_symbol())
    assert not stale, f"these now match torch: remove them from KNOWN: {sorted(stale)}"


def test_most_symbols_are_checked() -> None:
    """The checker reads a signature for nearly every torch callable, so passing means something."""
    pairs = ltorch.torch_callables()
    unread = [fn for fn, symbol in pairs.items() if not torch_overloads(fn)[0]]
    assert len(unread) < 0.1 * len(pairs), unread


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (torch.mul, [(("input", "other"), frozenset())]),
        (torch.Tensor.mul, [(("other",), frozenset())]),
        (torch.add, [(("input", "other"), frozenset({"alpha"}))]),
    ],
)
def test_torch_overloads_reader(fn: Callable, expected: list[Overload]) -> None:
    overloads, _ = torch_overloads(fn)
    assert set(expected) <= set(overloads)


def test_registered_tensor_methods_are_proxy_methods() -> None:
    """``x.multiply(other=y)`` traces the symbol registered for ``torch.Tensor.multiply`` (it fell back
    to PyTorch, which cannot bind keyword arguments of a builtin method, before)."""
    from thunder.core.proxies import tensor_method

    missing = []
    for fn, symbol in ltorch.torch_callables().items():
        name = getattr(fn, "__name__", "")
        if (
            _is_method_descriptor(fn)
            and not name.startswith("_")
            and isinstance(fn, types.MethodDescriptorType)
        ):
            try:
                bound = tensor_method(name)
            except NotImplementedError:
                bound = None
            if bound is not symbol and bound is not ltorch.callable_for(fn):  # or the symbol, ints gathered
                missing.append(f"Tensor.{name} -> {symbol.id}")
    assert not missing, missing
