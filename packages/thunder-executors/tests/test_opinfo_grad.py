"""Gradients of the torch language against eager PyTorch autograd, driven by PyTorch's OpInfos.

For every OpInfo whose operator maps to a thunder symbol and that supports autograd in float64,
each sample is run with ``requires_grad`` inputs through ``thunder.jit``'s pipeline (so thunder's
own autograd splits it into forward and backward traces) and the vector-Jacobian product with a
random cotangent is compared with eager's, in float64. The fast run checks the first samples of
every OpInfo; ``-m slow`` checks all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

import thunder.executors.torchex as tx
import thunder.torch as ltorch
from thunder.core import pipeline
from thunder.core.direct_frontend import direct_frontend
from thunder.core.pytree import tree_flatten
from thunder.core.symbol import Symbol

FAST_SAMPLES = 3
RANDOM_OPS = frozenset(
    {
        "nn.functional.dropout",
        "nn.functional.rrelu",
        "rand_like",
        "randn_like",
        "bernoulli",
        "normal",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.alpha_dropout",
        "nn.functional.feature_alpha_dropout",
    }  # fmt: skip
)

# OpInfos whose gradients differ from eager for a reason outside the gradient rules: the reason.
# They run as strict xfails, so a fix shows up as an unexpected pass.
KNOWN_FAILURES: dict[str, str] = {
    "native_layer_norm": "mean/rstd are detached, but ThunderFunction marks only non-float outputs non-differentiable",
    "index_reduce": "gradient of reduce='prod' raises a clear NotImplementedError",
    "scatter_reduce": "gradient of reduce='prod' raises a clear NotImplementedError",
}


def _symbol_for(opinfo: OpInfo) -> Symbol | None:
    candidates = [opinfo.op, getattr(torch.Tensor, opinfo.name, None)]
    if opinfo.name.startswith("nn.functional."):
        candidates.append(getattr(F, opinfo.name.removeprefix("nn.functional."), None))
    for candidate in candidates:
        symbol = ltorch.symbol_for(candidate) if candidate is not None else None
        if symbol is not None:
            return symbol
    return None


def _differentiable_opinfos() -> list[tuple[OpInfo, Symbol]]:
    result = []
    for opinfo in op_db:
        symbol = _symbol_for(opinfo)
        if symbol is None or not opinfo.supports_autograd or opinfo.name in RANDOM_OPS:
            continue
        if ltorch.symbol_for(opinfo.op) is not symbol:
            continue  # the OpInfo calls the op through a wrapper (reordered arguments): not the symbol's call
        if torch.float64 not in opinfo.supported_dtypes("cpu"):
            continue
        result.append((opinfo, symbol))
    return result


def _params(marks: tuple = ()) -> list:
    params = []
    for opinfo, symbol in _differentiable_opinfos():
        name = f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name
        reason = KNOWN_FAILURES.get(opinfo.name)
        if opinfo.name in ("index_reduce", "scatter_reduce") and opinfo.variant_test_name != "prod":
            reason = None
        extra = (pytest.mark.xfail(reason=reason, strict=True),) if reason else ()
        params.append(pytest.param(opinfo, symbol, id=name, marks=marks + extra))
    return params


def _compile(symbol: Symbol) -> Callable:
    def fn(*args: Any, **kwargs: Any) -> Any:
        return symbol(*args, **kwargs)

    return pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])


def _inputs_requiring_grad(sample: SampleInput) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def _differentiable_outputs(value: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def _vjp(fn: Callable, sample: SampleInput, seed: int) -> tuple[list[torch.Tensor], list[Any]]:
    output = fn(sample.input, *sample.args, **sample.kwargs)
    outputs = _differentiable_outputs(output)
    inputs = _inputs_requiring_grad(sample)
    generator = torch.Generator().manual_seed(seed)
    cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True) if outputs else ()
    return [o.detach() for o in outputs], list(grads)


def _samples(opinfo: OpInfo) -> Iterator[SampleInput]:
    torch.manual_seed(0)
    yield from opinfo.sample_inputs("cpu", torch.float64, requires_grad=True)


def _forward_refused(symbol: Symbol, sample: SampleInput) -> bool:
    detached = sample.transform(lambda x: x.detach() if isinstance(x, torch.Tensor) else x)
    try:
        _compile(symbol)(detached.input, *detached.args, **detached.kwargs)
    except NotImplementedError:
        return True
    except Exception:  # noqa: BLE001 -- other errors are the gradient run's to report
        return False
    return False


def check_gradients(opinfo: OpInfo, symbol: Symbol, limit: int | None) -> None:
    failures = []
    for index, sample in enumerate(_samples(opinfo)):
        if limit is not None and index >= limit:
            break
        if not _inputs_requiring_grad(sample) or sample.kwargs.get("dropout_p", 0.0) > 0:
            continue  # nothing to differentiate, or random (attention dropout) values
        try:
            expected = _vjp(opinfo.op, sample, seed=index)
        except Exception:  # noqa: BLE001 -- samples eager rejects say nothing about gradients
            continue
        if _forward_refused(symbol, sample):
            continue  # a clear refusal of the forward (checked by test_opinfo.py), not a gradient matter
        try:
            actual = _vjp(_compile(symbol), sample, seed=index)
        except Exception as error:  # noqa: BLE001
            failures.append(f"sample {index}: thunder raised {type(error).__name__}: {error}")
            continue
        # eager leaves unused inputs' gradients as None; thunder may too, or give zeros
        expected_grads = [
            torch.zeros_like(x) if g is None else g
            for x, g in zip(_inputs_requiring_grad(sample), expected[1])
        ]
        actual_grads = [
            torch.zeros_like(x) if g is None else g for x, g in zip(_inputs_requiring_grad(sample), actual[1])
        ]
        try:
            torch.testing.assert_close(actual[0], expected[0], equal_nan=True)
            torch.testing.assert_close(actual_grads, expected_grads, equal_nan=True)
        except AssertionError as mismatch:
            failures.append(f"sample {index}: {mismatch}")
    assert not failures, f"{len(failures)} failing samples:\n" + "\n".join(failures)


@pytest.mark.parametrize(("opinfo", "symbol"), _params())
def test_gradients(opinfo: OpInfo, symbol: Symbol) -> None:
    check_gradients(opinfo, symbol, FAST_SAMPLES)


@pytest.mark.parametrize(("opinfo", "symbol"), _params(marks=(pytest.mark.slow,)))
def test_gradients_all_samples(opinfo: OpInfo, symbol: Symbol) -> None:
    check_gradients(opinfo, symbol, None)
