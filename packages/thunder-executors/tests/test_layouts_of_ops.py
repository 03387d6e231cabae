"""Which ops make a non-contiguous result from contiguous operands in eager, against the table that
``core/layouts.py`` runs meta kernels for (``_MAKES_ITS_OWN_LAYOUT``): an op missing from it would be
taken as contiguous there, and ``op(x).view(-1)`` would work in thunder where eager raises.

Every OpInfo sample whose tensor operands are all contiguous is run in eager; a strided result that
is not contiguous must come from a view (it shares its operand's memory) or from an op in the table.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from test_opinfo import covered_opinfos, samples

from thunder.core import layouts
from thunder.core.inplace import is_view_symbol


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _non_contiguous_results(opinfo, sample) -> bool:
    operands = _tensors([sample.input, *sample.args, *sample.kwargs.values()])
    if not operands or not all(t.is_contiguous() for t in operands):
        return False
    try:
        result = opinfo.op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001 -- a sample eager refuses: nothing to compare
        return False
    memory = {t.untyped_storage().data_ptr() for t in operands if t.layout is torch.strided}
    return any(
        t.layout is torch.strided and not t.is_contiguous() and t.untyped_storage().data_ptr() not in memory
        for t in _tensors(result)
    )


@pytest.mark.slow
def test_every_op_laying_out_its_own_result_is_known_to_layouts() -> None:
    missing = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for opinfo, symbol in covered_opinfos():
            if is_view_symbol(symbol) or symbol.name in layouts._MAKES_ITS_OWN_LAYOUT:
                continue
            if any(_non_contiguous_results(opinfo, sample) for sample in samples(opinfo, torch.float32)):
                missing.add(symbol.name)
    assert not missing, f"ops making non-contiguous results from contiguous operands: {sorted(missing)}"
