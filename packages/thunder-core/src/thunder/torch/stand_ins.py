"""Eager's own answer to a traced call, asked of empty CPU tensors standing for the call's tensors.

Some of eager's refusals depend on the arguments' kinds and dtypes, not on their values or sizes:
the argument parser's ``TypeError`` (``inplace._check_eager_parses``, for ``out=`` calls) and a
kernel's refusal of a dtype (``eager_dtypes.py``). The call runs on empty tensors of the same dtypes
and ranks (no data is allocated; C++ kernels only: meta tensors' ``out=`` path imports
``torch._dynamo``, seconds at the first compile) and the caller picks, from what it raised, the
errors that are eager's answer to the call itself (not to the stand-ins' sizes).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map

__all__ = ["error_on_stand_ins"]


class _NoStandIn(Exception):
    """An argument that no concrete value can stand for (a proxy other than a tensor's or a number's)."""


def _stand_in(value: Any) -> Any:
    if isinstance(value, TensorProxy):
        return torch.empty((0,) * len(value.shape), dtype=value.dtype.torch_dtype)
    if isinstance(value, NumberProxy):
        return value.value  # its type is what eager checks; reading it does not specialize
    if isinstance(value, Proxy):
        raise _NoStandIn
    return value


def error_on_stand_ins(torch_fn: Any, args: tuple, kwargs: dict) -> Exception | None:
    """What ``torch_fn(*args, **kwargs)`` raised with stand-ins for the proxies, or None (it ran, or
    could not be asked: no tensor argument, as a factory's sizes would be allocated for real; a
    generator, which the call would draw from; a proxy nothing stands for)."""
    leaves = tree_leaves((args, kwargs))
    if not any(isinstance(leaf, TensorProxy) for leaf in leaves):
        return None
    if any(isinstance(leaf, torch.Generator) for leaf in leaves):
        return None
    try:
        stand_in_args, stand_in_kwargs = tree_map(_stand_in, (args, kwargs))
    except _NoStandIn:
        return None
    try:
        # a random function draws from the default CPU generator: its state is put back after
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")  # a resized out= warns where the call itself runs
            torch_fn(*stand_in_args, **stand_in_kwargs)
    except Exception as error:  # noqa: BLE001 -- the caller picks the errors that are eager's answer
        return error
    return None
