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
from test_opinfo import STALE_ENTRY_NOTE, _opinfo_id, jit_reused, reused_params
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
        name = _opinfo_id(opinfo)
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


def _forward_refused(compiled: Callable, sample: SampleInput) -> bool:
    """Whether ``compiled`` clearly refuses the sample's forward (checked by test_opinfo.py): not a gradient matter."""
    detached = sample.transform(lambda x: x.detach() if isinstance(x, torch.Tensor) else x)
    try:
        compiled(detached.input, *detached.args, **detached.kwargs)
    except NotImplementedError:
        return True
    except Exception:  # noqa: BLE001 -- other errors are the gradient run's to report
        return False
    return False


def _assert_vjps_agree(
    opinfo: OpInfo,
    limit: int | None,
    problem_for: Callable[[int, SampleInput, tuple], str | None],
    failing: str,
) -> None:
    """Runs ``problem_for(index, sample, expected)`` on the samples with inputs to differentiate, ``expected``
    being eager's outputs and vector-Jacobian product; fails listing each problem it describes."""
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
        problem = problem_for(index, sample, expected)
        if problem is not None:
            failures.append(f"sample {index}: {problem}")
    assert not failures, f"{len(failures)} {failing}:\n" + "\n".join(failures)


def check_gradients(opinfo: OpInfo, symbol: Symbol, limit: int | None) -> None:
    def problem_for(index: int, sample: SampleInput, expected: tuple) -> str | None:
        if _forward_refused(_compile(symbol), sample):
            return None
        try:
            actual = _vjp(_compile(symbol), sample, seed=index)
        except Exception as error:  # noqa: BLE001
            return f"thunder raised {type(error).__name__}: {error}"
        return _vjp_mismatch(sample, actual, expected)

    _assert_vjps_agree(opinfo, limit, problem_for, "failing samples")


def _vjp_mismatch(sample: SampleInput, actual: tuple, expected: tuple) -> str | None:
    # eager leaves unused inputs' gradients as None; thunder may too, or give zeros
    inputs = _inputs_requiring_grad(sample)
    expected_grads = [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, expected[1])]
    actual_grads = [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, actual[1])]
    try:
        torch.testing.assert_close(actual[0], expected[0], equal_nan=True)
        torch.testing.assert_close(actual_grads, expected_grads, equal_nan=True)
    except AssertionError as mismatch:
        return str(mismatch)
    return None


@pytest.mark.parametrize(("opinfo", "symbol"), _params())
def test_gradients(opinfo: OpInfo, symbol: Symbol) -> None:
    check_gradients(opinfo, symbol, FAST_SAMPLES)


@pytest.mark.parametrize(("opinfo", "symbol"), _params(marks=(pytest.mark.slow,)))
def test_gradients_all_samples(opinfo: OpInfo, symbol: Symbol) -> None:
    check_gradients(opinfo, symbol, None)


# ---------------------------------------------------------------------------------------------
# One jitted function per op, over all its samples in turn
#
# As user code does: ``thunder.jit`` (the interpreter frontend) compiles one function per OpInfo and
# every sample, in order, goes through it; each forward value and vector-Jacobian product must be
# eager's. A cache entry answering a sample it was not built for (a missing guard) fails here.

# OpInfos (by id) whose reused function differs from eager for a reason outside the guards: the
# reason. Strict xfails.
REUSED_KNOWN_FAILURES: dict[str, str] = {
    "index_reduce.prod": KNOWN_FAILURES["index_reduce"],
    "scatter_reduce.prod": KNOWN_FAILURES["scatter_reduce"],
}
# OpInfos too slow for the default run (by id; over 10 s each on this 2-core machine: hundreds of
# samples, each a compile of a forward and a backward): with -m slow only.
REUSED_SLOW: frozenset[str] = frozenset({
    "grid_sampler_3d", "grid_sampler_2d", "nn.functional.grid_sample", "nn.functional.max_pool1d",
    "nn.functional.max_pool2d", "nn.functional.max_pool3d", "masked.norm",
})  # fmt: skip


def _fresh_verdict(opinfo: OpInfo, sample: SampleInput, index: int, expected: tuple) -> str:
    """Whether a freshly compiled function gets ``sample`` right (then the reused one's cache is stale)."""
    try:
        fresh = _vjp(jit_reused(opinfo), sample, seed=index)
    except Exception:  # noqa: BLE001
        return ""
    return STALE_ENTRY_NOTE if _vjp_mismatch(sample, fresh, expected) is None else ""


def check_gradients_reused(opinfo: OpInfo) -> None:
    jitted = jit_reused(opinfo)

    def problem_for(index: int, sample: SampleInput, expected: tuple) -> str | None:
        try:
            actual = _vjp(jitted, sample, seed=index)
        except NotImplementedError as error:
            # a clear refusal of the forward is test_opinfo.py's matter
            return (
                None if _forward_refused(jitted, sample) else f"thunder raised NotImplementedError: {error}"
            )
        except Exception as error:  # noqa: BLE001
            return f"thunder raised {type(error).__name__}: {error}"
        problem = _vjp_mismatch(sample, actual, expected)
        return None if problem is None else problem + _fresh_verdict(opinfo, sample, index, expected)

    _assert_vjps_agree(opinfo, None, problem_for, "failing samples of one reused function")


def _reused_params(slow: bool) -> list:
    opinfos = [opinfo for opinfo, _ in _differentiable_opinfos()]
    return reused_params(opinfos, REUSED_KNOWN_FAILURES, REUSED_SLOW, slow)


@pytest.mark.parametrize("opinfo", _reused_params(slow=False))
def test_gradients_one_function_all_samples(opinfo: OpInfo) -> None:
    check_gradients_reused(opinfo)


@pytest.mark.parametrize("opinfo", _reused_params(slow=True))
def test_gradients_one_function_all_samples_slow(opinfo: OpInfo) -> None:
    check_gradients_reused(opinfo)
