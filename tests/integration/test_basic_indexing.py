"""``x[key]`` for every basic key of up to three entries (bools, None, ints, slices, Ellipsis) through
one jitted function, against eager PyTorch: the result, or the type of the error eager raises."""

from __future__ import annotations

import itertools

import torch

import thunder

ENTRIES = [True, False, None, 0, -1, slice(None), slice(1, 3), slice(None, None, 2), Ellipsis]


def _keys() -> list:
    keys: list = list(ENTRIES)
    for length in (2, 3):
        keys += [key for key in itertools.product(ENTRIES, repeat=length) if key.count(Ellipsis) <= 1]
    return keys


def test_basic_keys_match_eager_with_one_jitted_function() -> None:
    x = torch.arange(30.0).reshape(5, 6)
    index = thunder.jit(lambda x, key: x[key])
    mismatches = []
    for key in _keys():
        try:
            expected = x[key]
        except IndexError as error:
            expected = error
        try:
            actual = index(x, key)
        except IndexError as error:
            actual = error
        if isinstance(expected, Exception) or isinstance(actual, Exception):
            if type(expected) is not type(actual):
                mismatches.append((key, expected, actual))
        elif actual.shape != expected.shape or not torch.equal(actual, expected):
            mismatches.append((key, expected.shape, actual.shape))
    assert mismatches == []
