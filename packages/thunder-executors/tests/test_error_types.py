"""Invalid inputs raise eager's exception types under ``thunder.jit``, driven by PyTorch's OpInfo database.

Each OpInfo thunder covers (``test_opinfo.COVERED``) may list error inputs: arguments eager rejects,
with the exception type it raises. Every one runs through eager and through a ``thunder.jit``-ted
function calling the same operator; thunder's exception must be an instance of eager's type, so that
``except RuntimeError`` written against eager catches thunder's error too. Messages need not match,
but they must name dtypes as torch does (``torch.float64``, never thunder's ``dtypes.float64``).
Where eager accepts an input its OpInfo lists as an error (this PyTorch version answers it),
thunder must accept it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from test_opinfo import COVERED, _opinfo_id
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

import thunder

# Known differences, by (OpInfo id, index of the error input): the reason. Strict xfails: a fix shows
# up as an unexpected pass.
# An out= over another input's memory is refused by the prologue's write-overlap check
# (core/prologue_write_overlaps.py; take's error input 2 passes since), an out= that is one of the
# operands by torch/inplace.py's _check_out_apart (cat's error input 7).
_NOT_IMPLEMENTED = "eager's Tensor.{} on two numbers returns NotImplemented; thunder's symbol needs a tensor"
KNOWN_DIFFERENCES: dict[tuple[str, int], str] = {
    ("arange", 6): "a float step that an integer out= truncates to 0: thunder refuses the out= shape first",
    ("__rdiv__", 0): "eager's Tensor.__rdiv__ on a number fails in its Python body (AttributeError)",
    ("__rdiv__", 1): "eager's Tensor.__rdiv__ on a number fails in its Python body (AttributeError)",
    ("__rmod__", 0): _NOT_IMPLEMENTED.format("__rmod__"),
    ("__rpow__", 0): _NOT_IMPLEMENTED.format("__rpow__"),
    ("__rsub__", 0): _NOT_IMPLEMENTED.format("__rsub__"),
}


def _error_inputs(opinfo: OpInfo) -> list[Any]:
    torch.manual_seed(0)
    return list(opinfo.error_inputs("cpu"))


def _params() -> list:
    params = []
    for opinfo, _ in COVERED:
        if opinfo.error_inputs_func is None:
            continue
        name = _opinfo_id(opinfo)
        for index in range(len(_error_inputs(opinfo))):
            reason = KNOWN_DIFFERENCES.get((name, index))
            marks = (pytest.mark.xfail(reason=reason, strict=True),) if reason else ()
            params.append(pytest.param(opinfo, index, id=f"{name}-{index}", marks=marks))
    return params


def _raised(fn: Callable, sample: SampleInput) -> BaseException | None:
    try:
        fn(sample.input, *sample.args, **sample.kwargs)
    except Exception as error:  # noqa: BLE001 -- any exception is an answer to compare
        return error
    return None


def _jitted(op: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        return op(*args, **kwargs)

    return thunder.jit(call)


PARAMS = _params()


def test_error_inputs_are_collected() -> None:
    assert len(PARAMS) > 300, "the OpInfo database lists surprisingly few error inputs for thunder's ops"


@pytest.mark.parametrize(("opinfo", "index"), PARAMS)
def test_error_type_matches_eager(opinfo: OpInfo, index: int) -> None:
    # each run gets inputs of its own: eager may resize an out= tensor before it raises
    expected = _raised(opinfo.op, _error_inputs(opinfo)[index].sample_input)
    actual = _raised(_jitted(opinfo.op), _error_inputs(opinfo)[index].sample_input)
    if expected is None:
        assert actual is None, f"eager accepts this input, thunder raised {type(actual).__name__}: {actual}"
        return
    assert actual is not None, f"eager raised {type(expected).__name__}: {expected}, thunder did not"
    assert isinstance(actual, type(expected)), (
        f"eager raised {type(expected).__name__}: {expected}\nthunder raised {type(actual).__name__}: {actual}"
    )
    assert "dtypes." not in str(actual), f"a thunder dtype name in the message: {actual}"
