"""PyTorch's multi-tensor helpers as loops over thunder's per-tensor ops.

``torch._foreach_mul_(grads, coef)`` and its kin (what ``clip_grad_norm_`` and the optimizers'
``foreach`` paths call) become one call of the per-tensor op per list element: in-place forms call
the proxy's in-place method (``t.mul_(coef)``, a write the trace records), out-of-place forms the
torch language's symbol. List arguments are indexed, others (a scalar, one tensor) are passed to
every call. A fusion executor then fuses the per-tensor ops as it fuses any others.

``torch._C._group_tensors_by_device_and_dtype``, which those paths call first, groups proxies by
their device and dtype as PyTorch's C++ does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import TensorProxy

__all__ = ["foreach_lookaside"]

_PREFIX = "_foreach_"


def _item(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, (list, tuple)) else value


def _per_tensor(name: str) -> Callable:
    in_place = name.endswith("_")
    base = name[:-1] if in_place else name

    def run(*args: Any, **kwargs: Any) -> list[Any] | None:
        from thunder.torch.inplace import torch_lookaside

        length = next(len(a) for a in args if isinstance(a, (list, tuple)))
        results = []
        for index in range(length):
            item_args = [_item(a, index) for a in args]
            item_kwargs = {k: _item(v, index) for k, v in kwargs.items()}
            if in_place:
                first, *rest = item_args
                getattr(first, name)(*rest, **item_kwargs)
            else:
                torch_fn = getattr(torch, base, None) or getattr(torch.Tensor, base)
                lookaside = torch_lookaside(torch_fn)
                if lookaside is None:
                    raise NotImplementedError(
                        f"torch.{_PREFIX}{name}: thunder has no counterpart of torch.{base}, which it applies per tensor"
                    )
                results.append(lookaside(*item_args, **item_kwargs))
        return None if in_place else results

    run.__name__ = f"{_PREFIX}{name}"
    return run


def _group_tensors_by_device_and_dtype(
    tensorlistlist: list[list[Any]], with_indices: bool = False
) -> dict[tuple[torch.device, torch.dtype], tuple[list[list[Any]], list[int]]]:
    groups: dict[tuple[torch.device, torch.dtype], tuple[list[list[Any]], list[int]]] = {}
    for index, first in enumerate(tensorlistlist[0]):
        if not isinstance(first, TensorProxy):
            raise NotImplementedError("grouping tensors by device and dtype needs tensors in the first list")
        key = (devices.to_torch_device(first.device), dtypes.to_torch_dtype(first.dtype))
        lists, indices = groups.setdefault(key, ([[] for _ in tensorlistlist], []))
        for column, tensors in zip(lists, tensorlistlist):
            column.append(tensors[index])
        if with_indices:
            indices.append(index)
    return groups


def foreach_lookaside(torch_fn: Any) -> Callable | None:
    """The replacement of a ``torch._foreach_*`` function or of the grouping helper; None for others."""
    if torch_fn is torch._C._group_tensors_by_device_and_dtype:
        return _group_tensors_by_device_and_dtype
    name = getattr(torch_fn, "__name__", "")
    if (
        not isinstance(name, str)
        or not name.startswith(_PREFIX)
        or getattr(torch, name, None) is not torch_fn
    ):
        return None
    return _per_tensor(name[len(_PREFIX) :])
