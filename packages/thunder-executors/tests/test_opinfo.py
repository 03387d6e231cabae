"""The torch language against eager PyTorch, driven by PyTorch's OpInfo database.

Every OpInfo whose operator maps to a thunder symbol (``thunder.torch.symbol_for``) is run on its
sample inputs twice: with the torch executor claiming the torch-language symbol directly
("torch"), and with an executor that only knows the prims, which forces the decompositions
("prims"). Each result must match eager exactly in dtype and within ``assert_close``'s tolerances
in value; a sample that raises in eager must raise in thunder too. Ops that the torch language
does not cover are not collected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

import thunder.executors.torchex as tx
import thunder.torch as ltorch
from thunder.core import fallback, pipeline
from thunder.core.direct_frontend import direct_frontend
from thunder.core.symbol import Symbol

# Arguments of OpInfo samples that thunder rejects with a NotImplementedError on purpose, by OpInfo
# name: the reason, and a fragment of the error message. Only these NotImplementedErrors pass.
# None of the current OpInfo samples needs one; an entry looks like
#     "nn.functional.cross_entropy": ("label_smoothing is not supported yet", "label_smoothing"),
NOT_IMPLEMENTED: dict[str, tuple[str, str]] = {
    "nn.functional.rrelu": ("random slopes in training mode are not supported yet", "training=True"),
    "nn.functional.one_hot": ("num_classes=-1 takes the class count from the data", "num_classes=-1"),
    "tensor_split": ("split points in a tensor give data-dependent shapes", "reads its values"),
    "repeat_interleave": ("repeats in a tensor give a data-dependent shape", "data-dependent shape"),
    "__getitem__": ("a boolean mask as an index gives a data-dependent shape", "data-dependent shape"),
    "masked_select": ("the result has a data-dependent shape", "data-dependent shape"),
    "norm": ("the nuclear norm needs an SVD", "singular values"),
    "linalg.norm": ("matrix norms of order 2, -2 and 'nuc' need an SVD", "singular values"),
    "linalg.matrix_norm": ("matrix norms of order 2, -2 and 'nuc' need an SVD", "singular values"),
    "nn.functional.embedding": ("max_norm renormalizes the weight in place", "max_norm"),
    "nn.functional.embedding_bag": ("max_norm renormalizes the weight in place", "max_norm"),
}

# Failures caused outside the torch language and its executor, by OpInfo name: the reason. They
# run as strict xfails, so a fix elsewhere shows up as an unexpected pass.
KNOWN_FAILURES: dict[str, str] = {}

# Random ops: compared by their statistics in the tests at the end of this file, not by value.
# empty* are here too: eager's values are whatever memory held (thunder's are zeros).
RANDOM_SYMBOLS: frozenset[str] = frozenset({
    "ltorch.dropout", "ltorch.rand", "ltorch.bernoulli", "ltorch.empty", "ltorch.empty_like", "ltorch.new_empty",
    "ltorch.dropout1d", "ltorch.dropout2d", "ltorch.dropout3d", "ltorch.alpha_dropout", "ltorch.feature_alpha_dropout",
})  # fmt: skip

EXECUTOR_MODES = ("torch", "prims")
FAST_DTYPES = (torch.float32,)
SLOW_DTYPES = (torch.int64, torch.bool, torch.bfloat16)
# bfloat16 is checked for a subset: elementwise, reductions and normalizations, where decompositions
# upcast to float32 and must round like eager.
BFLOAT16_OPS = frozenset({
    "add", "sub", "mul", "div", "true_divide", "exp", "log", "sin", "tanh", "sqrt", "rsqrt", "sigmoid", "erf",
    "sum", "mean", "var", "prod", "amax", "softmax", "log_softmax", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.relu", "nn.functional.linear", "matmul", "where", "clamp", "pow", "cat",
})  # fmt: skip
# ops B: torch.nn.functional and the matmul family (addbmm, addr and interpolate's bicubic, trilinear
# and area modes round differently from eager in bfloat16 and are left out)
_F = "nn.functional."
BFLOAT16_OPS |= frozenset({
    "addmm", "addmv", "baddbmm", "dot", "vdot", "mv", "outer", "kron", "inner", "tensordot", "linalg.vecdot",
    "linalg.multi_dot",
    *(_F + name for name in (
        "softmin", "cross_entropy", "nll_loss", "normalize", "cosine_similarity", "pairwise_distance",
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
        "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d", "max_pool3d",
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "layer_norm", "rms_norm", "group_norm", "batch_norm", "local_response_norm", "pad", "unfold",
        "upsample_bilinear", "upsample_nearest", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "bilinear",
        "hardswish", "leaky_relu", "glu", "elu", "prelu", "celu", "rrelu", "selu", "hardsigmoid", "logsigmoid",
        "mish", "softsign", "tanhshrink", "threshold", "softshrink", "hardshrink", "hardtanh", "relu6", "softplus",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "soft_margin_loss", "margin_ranking_loss",
        "multilabel_soft_margin_loss", "triplet_margin_loss", "smooth_l1_loss", "l1_loss", "mse_loss",
        "cosine_embedding_loss", "hinge_embedding_loss", "huber_loss", "poisson_nll_loss", "kl_div",
    )),
})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Which OpInfos thunder covers


def _opinfo_id(opinfo: OpInfo) -> str:
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def _same_arguments(call: Callable) -> Callable:
    return call


def _weight_first(call: Callable) -> Callable:
    return lambda weight, indices, **kwargs: call(indices, weight, **kwargs)


# OpInfos whose op is a lambda around a torch callable (reordered arguments, or a seed set first):
# by OpInfo id, the callable, and how the lambda's arguments map onto the callable's.
WRAPPED_OPS: dict[str, tuple[Callable, Callable[[Callable], Callable]]] = {
    "einsum": (torch.einsum, lambda call: lambda tensors, equation: call(equation, tensors)),
    "nn.functional.embedding": (F.embedding, _weight_first),
    "nn.functional.embedding_bag": (F.embedding_bag, _weight_first),
    **{name: (getattr(torch, name), _same_arguments) for name in (
        "randn", "randn_like", "rand_like", "randint", "randint_like", "empty_strided",
    )},
    "normal": (torch.normal, _same_arguments),
    "new_empty_strided": (torch.Tensor.new_empty_strided, _same_arguments),
}  # fmt: skip


def adapter_for(opinfo: OpInfo) -> Callable[[Callable], Callable]:
    return WRAPPED_OPS.get(_opinfo_id(opinfo), (None, _same_arguments))[1]


def _torch_callables_of(opinfo: OpInfo) -> list[Any]:
    """The OpInfo's operator as its function, method or F name, in that order."""
    wrapped = WRAPPED_OPS.get(_opinfo_id(opinfo), (None,))[0]
    candidates = [wrapped, opinfo.op, getattr(torch.Tensor, opinfo.name, None)]
    if opinfo.name.startswith("nn.functional."):
        candidates.append(getattr(F, opinfo.name.removeprefix("nn.functional."), None))
    return [candidate for candidate in candidates if candidate is not None]


def symbol_for_opinfo(opinfo: OpInfo) -> Symbol | None:
    """The thunder symbol standing for the OpInfo's operator, through its function, method or F name."""
    symbols = (ltorch.symbol_for(candidate) for candidate in _torch_callables_of(opinfo))
    return next((symbol for symbol in symbols if symbol is not None), None)


def callable_for_opinfo(opinfo: OpInfo) -> Callable:
    """What the frontend calls for the OpInfo's operator: its symbol, or, for a method that takes an int
    list as ints one by one (``x.sum_to_size(1, 3)``), the symbol behind the gathering of the ints."""
    callables = (ltorch.callable_for(candidate) for candidate in _torch_callables_of(opinfo))
    found = next((call for call in callables if call is not None), None)
    assert found is not None, f"{opinfo.name} has no thunder symbol"
    return found


def covered_opinfos() -> list[tuple[OpInfo, Symbol]]:
    pairs = [(opinfo, symbol_for_opinfo(opinfo)) for opinfo in op_db]
    return [(opinfo, symbol) for opinfo, symbol in pairs if symbol is not None]


COVERED = covered_opinfos()
VALUE_TESTED = [(o, s) for o, s in COVERED if s.id not in RANDOM_SYMBOLS]


def _known_failure(opinfo: OpInfo) -> tuple:
    reason = KNOWN_FAILURES.get(opinfo.name)
    return (pytest.mark.xfail(reason=reason, strict=True),) if reason else ()


def _params(dtypes: tuple[torch.dtype, ...], marks: tuple = ()) -> list:
    params = []
    for opinfo, symbol in VALUE_TESTED:
        for dtype in dtypes:
            if dtype not in opinfo.supported_dtypes("cpu"):
                continue
            if dtype is torch.bfloat16 and opinfo.name not in BFLOAT16_OPS:
                continue
            for mode in EXECUTOR_MODES:
                name = f"{_opinfo_id(opinfo)}-{str(dtype).removeprefix('torch.')}-{mode}"
                params.append(
                    pytest.param(opinfo, symbol, dtype, mode, id=name, marks=marks + _known_failure(opinfo))
                )
    return params


# ---------------------------------------------------------------------------------------------
# Compiling and comparing


class _PrimsOnlyExecutor(tx.TorchExecutor):
    """The torch executor's prims, and the computation's own checks (``layouts.check`` of an input's
    layout), which are the torch executor's symbols: the program runs them whatever it is compiled to."""

    def _own_check(self, bound_symbol: Any) -> bool:
        symbol = bound_symbol.symbol
        return symbol.executor is tx.executor and symbol.id.startswith("layouts.")

    def can_execute(self, bound_symbol: Any) -> bool:
        return self._own_check(bound_symbol) or super().can_execute(bound_symbol)

    def lower(self, bound_symbol: Any) -> list:
        return [bound_symbol] if self._own_check(bound_symbol) else super().lower(bound_symbol)


def _prims_only_executor() -> tx.TorchExecutor:
    executor = _PrimsOnlyExecutor("prims_only")
    executor.implementations = {
        k: v for k, v in tx.executor.implementations.items() if k.startswith("prims.")
    }
    return executor


PRIMS_ONLY = _prims_only_executor()


def compile_symbol(
    symbol: Callable, mode: str, adapter: Callable[[Callable], Callable] = _same_arguments
) -> Callable:
    call = adapter(symbol)

    def fn(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    jitted = pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])
    if mode == "prims":
        jitted._compile_data.executors = [PRIMS_ONLY]
    return jitted


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


def run(fn: Callable, sample: SampleInput) -> Outcome:
    try:
        return Outcome(value=fn(sample.input, *sample.args, **sample.kwargs))
    except Exception as error:  # noqa: BLE001 -- any exception is an answer to compare
        return Outcome(error=error)


def container_mismatch(actual: Any, expected: Any) -> str | None:
    """How the containers of two results differ (a plain tuple for eager's ``torch.return_types.max``,
    a list for a tuple), or None: ``assert_close`` compares sequences item by item and misses it."""
    from torch.utils._pytree import tree_structure

    actual_spec, expected_spec = tree_structure(actual), tree_structure(expected)
    if actual_spec == expected_spec:
        return None
    return f"containers differ: thunder returned {actual_spec}, eager {expected_spec}"


# Ops whose index is any position holding the value where values tie (eager's selection algorithm
# picks one; which is unspecified, and integer samples tie): by OpInfo name, the position of ``dim``
# in the sample's arguments.
TIED_INDICES: dict[str, int] = {"kthvalue": 1, "median": 0, "nanmedian": 0, "mode": 0}


def with_tied_indices(opinfo: OpInfo, sample: SampleInput, actual: Any, expected: Any) -> Any:
    """``actual`` with eager's indices where its own select its values from the input, else as it is."""
    position = TIED_INDICES.get(opinfo.name)
    if position is None or type(actual) is not type(expected) or not isinstance(actual, tuple):
        return actual  # a tensor (median without dim), or containers that already differ
    a, args, kwargs = sample.input, sample.args, sample.kwargs
    if a.ndim == 0:
        return actual
    dim = args[position] if len(args) > position else kwargs.get("dim", -1)
    keepdim = args[position + 1] if len(args) > position + 1 else kwargs.get("keepdim", False)
    index = actual.indices if keepdim else actual.indices.unsqueeze(dim)
    try:
        selected = torch.take_along_dim(a, index, dim)
    except (RuntimeError, IndexError):
        return actual
    values = actual.values if keepdim else actual.values.unsqueeze(dim)
    if not torch.equal(selected, values) and not torch.allclose(selected, values, equal_nan=True):
        return actual
    return type(actual)((actual.values, expected.indices))


def is_accepted_not_implemented(opinfo: OpInfo, error: BaseException | None) -> bool:
    if not isinstance(error, NotImplementedError) or opinfo.name not in NOT_IMPLEMENTED:
        return False
    return NOT_IMPLEMENTED[opinfo.name][1] in str(error)


def check_sample(
    opinfo: OpInfo, symbol: Symbol, sample: SampleInput, mode: str, dtype: torch.dtype
) -> str | None:
    """None when thunder agrees with eager on ``sample``, else a description of the disagreement."""
    expected = run(opinfo.op, sample)
    actual = run(compile_symbol(callable_for_opinfo(opinfo), mode, adapter_for(opinfo)), sample)
    return compare_outcomes(opinfo, sample, actual, expected, dtype)


def compare_outcomes(
    opinfo: OpInfo, sample: SampleInput, actual: Outcome, expected: Outcome, dtype: torch.dtype
) -> str | None:
    """None when thunder's outcome on ``sample`` agrees with eager's, else a description of the disagreement."""
    if is_accepted_not_implemented(opinfo, actual.error):
        return None
    if expected.error is not None:
        if actual.error is None:
            return f"eager raised {type(expected.error).__name__}: {expected.error} but thunder did not"
        return None
    if actual.error is not None:
        return f"thunder raised {type(actual.error).__name__}: {actual.error}"
    if (difference := container_mismatch(actual.value, expected.value)) is not None:
        return difference
    if is_random_sample(opinfo, sample):  # thunder's RNG draws other numbers: the metadata must agree
        same = _metadata(actual.value) == _metadata(expected.value)
        return None if same else "shapes, dtypes or devices differ"
    value = with_tied_indices(opinfo, sample, actual.value, expected.value)
    try:
        torch.testing.assert_close(value, expected.value, equal_nan=True, **opinfo_tolerances(opinfo, dtype))
    except AssertionError as mismatch:
        return f"mismatch: {mismatch}"
    return None


def samples(opinfo: OpInfo, dtype: torch.dtype) -> Iterator[SampleInput]:
    torch.manual_seed(0)
    yield from opinfo.sample_inputs("cpu", dtype, requires_grad=False)


def assert_samples_agree(
    opinfo: OpInfo, dtype: torch.dtype, problem_for: Callable[[SampleInput], str | None], failing: str
) -> None:
    """Runs ``problem_for`` on every sample in turn; fails listing each sample it described a problem for."""
    failures = []
    for index, sample in enumerate(samples(opinfo, dtype)):
        problem = problem_for(sample)
        if problem is not None:
            failures.append(
                f"sample {index} {sample.summary() if hasattr(sample, 'summary') else sample}:\n  {problem}"
            )
    assert not failures, f"{len(failures)} {failing}:\n" + "\n".join(failures)


def check_opinfo(opinfo: OpInfo, symbol: Symbol, dtype: torch.dtype, mode: str) -> None:
    def problem_for(sample: SampleInput) -> str | None:
        return check_sample(opinfo, symbol, sample, mode, dtype)

    assert_samples_agree(opinfo, dtype, problem_for, "failing samples")


@pytest.mark.parametrize(("opinfo", "symbol", "dtype", "mode"), _params(FAST_DTYPES))
def test_opinfo(opinfo: OpInfo, symbol: Symbol, dtype: torch.dtype, mode: str) -> None:
    check_opinfo(opinfo, symbol, dtype, mode)


@pytest.mark.parametrize(
    ("opinfo", "symbol", "dtype", "mode"), _params(SLOW_DTYPES, marks=(pytest.mark.slow,))
)
def test_opinfo_other_dtypes(opinfo: OpInfo, symbol: Symbol, dtype: torch.dtype, mode: str) -> None:
    check_opinfo(opinfo, symbol, dtype, mode)


# ---------------------------------------------------------------------------------------------
# One jitted function per op, called over all its samples in turn
#
# User code compiles a function once and calls it with changing arguments; the tests above compile
# a fresh function per sample, so a cache entry answering a sample it was not built for (a missing
# guard) goes unseen there. Here ``thunder.jit`` (the interpreter frontend, as users call it) compiles
# one function per OpInfo, and every sample, in order, must still give eager's answer.

# OpInfos whose reused function gives another answer than eager for a reason outside the guards
# (by OpInfo id): the reason. Strict xfails: a fix shows up as an unexpected pass.
REUSED_KNOWN_FAILURES: dict[str, str] = {}
# OpInfos too slow for the default run (over 10 s each on a 2-core machine: hundreds of samples, each
# a new compile): with -m slow only.
REUSED_SLOW: frozenset[str] = frozenset({
    "nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d",
})  # fmt: skip


def jit_reused(opinfo: OpInfo) -> Callable:
    """One ``thunder.jit``-ted function calling the OpInfo's operator, for all its samples."""
    import thunder

    op = opinfo.op

    def call(*args: Any, **kwargs: Any) -> Any:
        return op(*args, **kwargs)

    return thunder.jit(call)


# Added to a reused function's failure where a fresh function gets the sample right.
STALE_ENTRY_NOTE = (
    "\n  (a fresh function agrees with eager: the reused one answered from a stale cache entry)"
)


def check_opinfo_reused(opinfo: OpInfo, dtype: torch.dtype) -> None:
    jitted = jit_reused(opinfo)

    def problem_for(sample: SampleInput) -> str | None:
        expected = run(opinfo.op, sample)
        problem = compare_outcomes(opinfo, sample, run(jitted, sample), expected, dtype)
        if problem is not None:
            if compare_outcomes(opinfo, sample, run(jit_reused(opinfo), sample), expected, dtype) is None:
                problem += STALE_ENTRY_NOTE
        return problem

    assert_samples_agree(opinfo, dtype, problem_for, "failing samples of one reused function")


def reused_params(
    opinfos: Iterable[OpInfo], known_failures: dict[str, str], slow_ids: frozenset[str], slow: bool
) -> list:
    """A ``pytest.param`` per OpInfo (by id) for a reused-function test: those in ``slow_ids`` only if
    ``slow`` (then marked slow), the others only if not; ``known_failures`` are strict xfails."""
    params = []
    for opinfo in opinfos:
        name = _opinfo_id(opinfo)
        if (name in slow_ids) != slow:
            continue
        reason = known_failures.get(name)
        marks = (pytest.mark.xfail(reason=reason, strict=True),) if reason else ()
        params.append(pytest.param(opinfo, id=name, marks=marks + ((pytest.mark.slow,) if slow else ())))
    return params


def _reused_params(dtype: torch.dtype, slow: bool) -> list:
    opinfos = [opinfo for opinfo, _ in VALUE_TESTED if dtype in opinfo.supported_dtypes("cpu")]
    return reused_params(opinfos, REUSED_KNOWN_FAILURES, REUSED_SLOW, slow)


@pytest.mark.parametrize("opinfo", _reused_params(torch.float32, slow=False))
def test_opinfo_one_function_all_samples(opinfo: OpInfo) -> None:
    check_opinfo_reused(opinfo, torch.float32)


@pytest.mark.parametrize("opinfo", _reused_params(torch.float32, slow=True))
def test_opinfo_one_function_all_samples_slow(opinfo: OpInfo) -> None:
    check_opinfo_reused(opinfo, torch.float32)


def test_container_mismatch_catches_plain_tuples_and_lists() -> None:
    values = (torch.tensor([1.0]), torch.tensor([0]))
    named = torch.return_types.max(values)
    assert container_mismatch(values, named) is not None  # assert_close alone accepts this
    assert container_mismatch(torch.return_types.min(values), named) is not None
    assert container_mismatch(list(values), values) is not None
    assert container_mismatch(torch.return_types.max(values), named) is None


def test_tied_indices_must_select_the_values() -> None:
    opinfo = next(o for o in op_db if o.name == "kthvalue")
    sample = SampleInput(torch.tensor([[1, 1, 2]]), args=(1, 1))
    expected = torch.return_types.kthvalue((torch.tensor([1]), torch.tensor([0])))
    other_tie = torch.return_types.kthvalue((torch.tensor([1]), torch.tensor([1])))
    wrong = torch.return_types.kthvalue((torch.tensor([1]), torch.tensor([2])))
    assert with_tied_indices(opinfo, sample, other_tie, expected).indices.tolist() == [0]
    assert with_tied_indices(opinfo, sample, wrong, expected).indices.tolist() == [2]  # left to mismatch


def test_coverage_is_not_empty() -> None:
    assert len(COVERED) > 50, "the OpInfo database maps to surprisingly few thunder symbols"


# ---------------------------------------------------------------------------------------------
# Random ops: shape, dtype and statistics


@pytest.mark.parametrize("mode", EXECUTOR_MODES)
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics(mode: str, p: float) -> None:
    a = torch.rand(200, 500) + 0.5  # no zeros of its own
    out = compile_symbol(ltorch.dropout, mode)(a, p, True)
    assert out.shape == a.shape and out.dtype == a.dtype
    zero_fraction = (out == 0).float().mean().item()
    assert math.isclose(zero_fraction, p, abs_tol=0.02), f"{zero_fraction=} for {p=}"
    kept = out != 0
    torch.testing.assert_close(out[kept], a[kept] / (1 - p))


@pytest.mark.parametrize("mode", EXECUTOR_MODES)
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_dropout_edge_cases(mode: str, p: float) -> None:
    a = torch.randn(8, 9)
    torch.testing.assert_close(compile_symbol(ltorch.dropout, mode)(a, p, False), a)
    out = compile_symbol(ltorch.dropout, mode)(a, p, True)
    expected = a if p == 0.0 else torch.zeros_like(a) if p == 1.0 else None
    if expected is not None:
        torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("mode", EXECUTOR_MODES)
def test_dropout_rejects_bad_probability(mode: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 -- eager raises ValueError; any exception is fine
        compile_symbol(ltorch.dropout, mode)(torch.randn(3), 1.5, True)


@pytest.mark.parametrize("mode", EXECUTOR_MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rand(mode: str, dtype: torch.dtype) -> None:
    def fn(x: Any) -> Any:
        return ltorch.rand((1000, 30), dtype=dtype) + x * 0

    jitted = pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])
    if mode == "prims":
        jitted._compile_data.executors = [PRIMS_ONLY]
    result = jitted(torch.zeros((), dtype=dtype))
    assert result.shape == (1000, 30) and result.dtype == dtype
    assert result.min() >= 0 and result.max() <= 1
    assert math.isclose(result.float().mean().item(), 0.5, abs_tol=0.02)


RANDOM_FACTORIES: dict[str, tuple[Callable, float, float, float, float]] = {
    # name: (call, expected mean, expected std, low, high) -- bounds of the values
    "randn": (lambda x: ltorch.randn((400, 500)) + x, 0.0, 1.0, -math.inf, math.inf),
    "randn_like": (lambda x: ltorch.randn_like(ltorch.expand(x, (400, 500))), 0.0, 1.0, -math.inf, math.inf),
    "rand_like": (lambda x: ltorch.rand_like(ltorch.expand(x, (400, 500))), 0.5, (1 / 12) ** 0.5, 0.0, 1.0),
    "normal": (
        lambda x: ltorch.normal(ltorch.expand(x + 3.0, (400, 500)), 2.0),
        3.0,
        2.0,
        -math.inf,
        math.inf,
    ),
    "randint": (
        lambda x: ltorch.randint(2, 7, (400, 500)) + x,
        4.0,
        2.0**0.5,
        2.0,
        6.0,
    ),  # 5 values: var 24/12
}


@pytest.mark.parametrize("mode", EXECUTOR_MODES)
@pytest.mark.parametrize("name", list(RANDOM_FACTORIES))
def test_random_factory_statistics(mode: str, name: str) -> None:
    """The native random factories the OpInfo table checks by metadata only: their distributions here."""
    call, mean, std, low, high = RANDOM_FACTORIES[name]
    jitted = pipeline.jit(call, frontend=direct_frontend, executors=[tx.executor])
    if mode == "prims":
        jitted._compile_data.executors = [PRIMS_ONLY]
    result = jitted(torch.zeros(()))
    assert result.shape == (400, 500)
    values = result.double()
    assert low <= values.min() and values.max() <= high
    assert math.isclose(values.mean().item(), mean, abs_tol=0.02 * max(std, 1.0))
    assert math.isclose(values.std().item(), std, rel_tol=0.02)


# ---------------------------------------------------------------------------------------------
# Conformance: every OpInfo through thunder, natively or through the fallback to PyTorch
#
# ``classify`` runs one OpInfo on one dtype and says how thunder handled it: "native" (a thunder
# symbol, every sample matches eager), "fallback" (no symbol: the op ran as a visible fallback symbol
# and every sample matches), "error" (thunder raised a clear NotImplementedError where eager did not),
# "crash" (thunder raised something else), or "mismatch" (a value differs from eager, or thunder
# accepted what eager rejects). ``scripts/opinfo_coverage.py`` prints the table over all of op_db.

CONFORMANCE_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool)
STATUSES = ("native", "fallback", "mismatch", "error", "crash")
SEVERITY = ("ok", "error", "crash", "mismatch")  # the worst sample decides an OpInfo's status
# The fast slice CI runs through the fallback: ops without a thunder symbol, of different kinds.
# (Ops gain symbols over time: test_fallback_slice_is_not_empty says when to pick others.)
FALLBACK_SLICE = ("frexp", "matrix_exp", "gradient", "logdet", "linalg.det", "linalg.solve", "linalg.pinv",
                  "fft.rfft", "fft.fftshift", "histogram", "polar", "svd", "special.polygamma")  # fmt: skip


# Ops returning uninitialized memory.
UNINITIALIZED = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)


# Random ops: thunder's own RNG draws other numbers than eager (their statistics are tested above);
# through the fallback they are PyTorch's op on the same seed, and compared by value.
RANDOM_OPINFOS = frozenset({
    "bernoulli", "randn", "normal", "rand_like", "randn_like", "randint_like", "randint", "multinomial", "uniform",
    "cauchy", "exponential", "geometric", "log_normal", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
})  # fmt: skip


def is_random_sample(opinfo: OpInfo, sample: SampleInput) -> bool:
    """A random op, a sample that asks for dropout (scaled_dot_product_attention's dropout_p), or
    uninitialized memory: thunder's values are not eager's, only the metadata can agree."""
    dropout = sample.kwargs.get("dropout_p", 0.0)
    random = opinfo.name in RANDOM_OPINFOS or (isinstance(dropout, float) and dropout > 0.0)
    return random or opinfo.name in UNINITIALIZED


def _falls_back(compiled: Callable) -> bool:
    return bool(getattr(compiled, "_falls_back", False))


def _metadata(value: Any) -> Any:
    from torch.utils._pytree import tree_map as torch_tree_map

    return torch_tree_map(
        lambda t: (tuple(t.shape), t.dtype, t.device) if isinstance(t, torch.Tensor) else t, value
    )


def compile_fallback(op: Callable) -> Callable:
    """``op`` recorded as a fallback symbol (as the interpreter does for a torch op with no symbol)."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        return fallback.call(op, args, kwargs)

    jitted = pipeline.jit(fn, frontend=direct_frontend, executors=[tx.executor])
    jitted._falls_back = True  # type: ignore[attr-defined]
    return jitted


def opinfo_tolerances(opinfo: OpInfo, dtype: torch.dtype) -> dict[str, float]:
    """The loosest tolerance the OpInfo's own decorators declare for ``dtype``, else ours."""
    atol, rtol = {torch.bfloat16: (1e-2, 1.6e-2), torch.float16: (1e-3, 1e-3)}.get(dtype, (0.0, 0.0))
    for info in opinfo.decorators or ():
        for decorator in getattr(info, "decorators", (info,)):
            table = getattr(decorator, "d", None)
            tolerance = table.get(dtype) if isinstance(table, dict) else None
            if hasattr(tolerance, "atol") and hasattr(tolerance, "rtol"):
                atol, rtol = max(atol, tolerance.atol), max(rtol, tolerance.rtol)
    return {"atol": atol, "rtol": rtol} if atol or rtol else {}


def _seeded(fn: Callable, sample: SampleInput) -> Outcome:
    torch.manual_seed(1234)  # random ops that fall back consume the generator as eager does
    return run(fn, sample)


def classify_sample(
    opinfo: OpInfo, compiled: Callable, sample: SampleInput, dtype: torch.dtype
) -> tuple[str, str]:
    expected, actual = _seeded(opinfo.op, sample), _seeded(compiled, sample)
    if expected.error is not None:
        if actual.error is None:
            return "mismatch", f"eager raised {type(expected.error).__name__} but thunder did not"
        return "ok", ""
    if actual.error is not None:
        status = "error" if isinstance(actual.error, NotImplementedError) else "crash"
        return status, f"{type(actual.error).__name__}: {actual.error}".splitlines()[0][:300]
    if (difference := container_mismatch(actual.value, expected.value)) is not None:
        return "mismatch", difference[:300]
    # through the fallback, random ops are eager's op on the same seed; uninitialized memory never compares
    arbitrary = is_random_sample(opinfo, sample) and not _falls_back(compiled)
    if arbitrary or opinfo.name in UNINITIALIZED:  # no values to compare: the metadata must agree
        same = _metadata(actual.value) == _metadata(expected.value)
        return ("ok", "") if same else ("mismatch", "shapes, dtypes or devices differ")
    try:
        torch.testing.assert_close(
            with_tied_indices(opinfo, sample, actual.value, expected.value),
            expected.value,
            equal_nan=True,
            **opinfo_tolerances(opinfo, dtype),
        )
    except (AssertionError, TypeError, ValueError, RuntimeError) as mismatch:
        return "mismatch", " ".join(str(mismatch).split())[:300]
    return "ok", ""


def classify(opinfo: OpInfo, dtype: torch.dtype) -> tuple[str, str]:
    """How thunder handles ``opinfo`` on ``dtype``: one of ``STATUSES``, and the first problem's description."""
    symbol = symbol_for_opinfo(opinfo)
    worst, detail = "ok", ""
    for sample in samples(opinfo, dtype):
        if symbol is not None:
            compiled = compile_symbol(callable_for_opinfo(opinfo), "torch", adapter_for(opinfo))
        else:
            compiled = compile_fallback(opinfo.op)
        status, problem = classify_sample(opinfo, compiled, sample, dtype)
        if SEVERITY.index(status) > SEVERITY.index(worst):
            worst, detail = status, problem
        if worst == "mismatch":
            break
    if worst != "ok":
        return worst, detail
    return ("native" if symbol is not None else "fallback"), ""


def _fallback_params(
    names: tuple[str, ...] | None, dtypes: tuple[torch.dtype, ...], marks: tuple = ()
) -> list:
    params = []
    for opinfo in op_db:
        if symbol_for_opinfo(opinfo) is not None or (names is not None and opinfo.name not in names):
            continue
        for dtype in dtypes:
            if dtype in opinfo.supported_dtypes("cpu"):
                params.append(
                    pytest.param(opinfo, dtype, id=f"{_opinfo_id(opinfo)}-{str(dtype)[6:]}", marks=marks)
                )
    return params


def check_conformance(opinfo: OpInfo, dtype: torch.dtype) -> None:
    status, detail = classify(opinfo, dtype)
    assert status in ("native", "fallback", "error"), f"{status}: {detail}"


def test_fallback_slice_is_not_empty() -> None:
    falling_back = {o.name for o in op_db if o.name in FALLBACK_SLICE and symbol_for_opinfo(o) is None}
    assert len(falling_back) >= 8, f"most of FALLBACK_SLICE has thunder symbols now (left: {falling_back})"


@pytest.mark.parametrize(("opinfo", "dtype"), _fallback_params(FALLBACK_SLICE, (torch.float32,)))
def test_fallback_conformance(opinfo: OpInfo, dtype: torch.dtype) -> None:
    check_conformance(opinfo, dtype)


@pytest.mark.parametrize(
    ("opinfo", "dtype"), _fallback_params(None, CONFORMANCE_DTYPES, marks=(pytest.mark.slow,))
)
def test_fallback_conformance_all(opinfo: OpInfo, dtype: torch.dtype) -> None:
    check_conformance(opinfo, dtype)


def test_fallback_is_visible_in_the_trace() -> None:
    compiled = compile_fallback(torch.cummax)
    values, indices = compiled(torch.tensor([1.0, 3.0, 2.0]), 0)
    assert values.tolist() == [1.0, 3.0, 3.0] and indices.tolist() == [0, 1, 1]
    source = str(pipeline.compile_stats(compiled).last_traces[-1])
    assert "fallback.torch_cummax(" in source and "from thunder.core import fallback" in source
