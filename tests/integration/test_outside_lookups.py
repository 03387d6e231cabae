"""A dict or set from outside the jitted call, keyed by real tensors, looked up by a traced tensor.

Inside thunder.jit a tensor is a stand-in (a proxy) that hashes as itself, not as the tensor it stands
for: ``names[p]`` would raise a KeyError, ``p in seen`` would be False, and a ``defaultdict`` would make a
new entry, each silently unlike eager. Such lookups raise an error naming the container and the line;
dicts the program builds itself, and lookups by name, work.
"""

from __future__ import annotations

import collections

import pytest
import torch

import thunder

_MODEL = torch.nn.Linear(2, 1)
_NAMES = {p: name for name, p in _MODEL.named_parameters()}
_SCALES: collections.defaultdict = collections.defaultdict(lambda: 1.0)
_SEEN = set(_MODEL.parameters())


def _membership(x: torch.Tensor) -> torch.Tensor:
    return _MODEL(x).sum() * (2.0 if _MODEL.weight in _NAMES else 1.0)  # eager: True


def _item(x: torch.Tensor) -> torch.Tensor:
    return _MODEL(x).sum() * _SCALES[_MODEL.weight]


def _get(x: torch.Tensor) -> torch.Tensor:
    return _MODEL(x).sum() * (3.0 if _NAMES.get(_MODEL.bias) == "bias" else 1.0)


def _set_membership(x: torch.Tensor) -> torch.Tensor:
    return _MODEL(x).sum() * (2.0 if _MODEL.bias in _SEEN else 1.0)


@pytest.mark.parametrize("fn", [_membership, _item, _get, _set_membership], ids=lambda f: f.__name__)
def test_a_lookup_by_a_traced_tensor_in_an_outside_container_raises(fn) -> None:
    before = dict(_SCALES)
    with pytest.raises(NotImplementedError, match="looked up by a tensor") as info:
        thunder.jit(fn)(torch.ones(3, 2))
    assert "test_outside_lookups.py" in str(info.value)
    assert dict(_SCALES) == before  # the defaultdict made no entry


def test_dicts_the_program_builds_and_lookups_by_name_work() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        by_tensor = {p: 2.0 for p in _MODEL.parameters()}  # the program's own dict: keyed by its proxies
        by_name = dict(_MODEL.named_parameters())
        return _MODEL(x).sum() * by_tensor[_MODEL.weight] + by_name["bias"].sum()

    x = torch.ones(3, 2)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(x))
