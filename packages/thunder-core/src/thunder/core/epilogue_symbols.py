"""The operations of a computation's epilogue and checks, run by PyTorch: what ``inplace.*`` names in a
printed trace (``thunder.core.inplace`` re-exports them; codegen imports that module as ``inplace``).

- ``copy_(destination, value)``: the write of a mutated input's new value into the real tensor;
- ``snapshot(a)``: an input's value taken before the epilogue writes into it;
- ``unseen_write(old, value)``: a write autograd does not see (under no_grad, through ``detach()``);
- ``overwritten_error(names)``: a backward that would read tensors overwritten after they were saved;
- ``true_count(mask, rows)``: a masked write's count of rows checked against the data;
- ``returned_view(x, steps)``: a view the program returns of an input it updated, taken by PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol, made_on_first_use

__all__ = [
    "copy_symbol",
    "copy_",
    "snapshot_symbol",
    "snapshot",
    "unseen_write_symbol",
    "unseen_write",
    "overwritten_error_symbol",
    "overwritten_error",
    "check_true_count",
    "true_count",
    "returned_view_symbol",
    "returned_view",
    "replay_views",
]


def _copy_into(destination: torch.Tensor, value: torch.Tensor) -> None:
    if not torch.is_grad_enabled():  # a computation without autograd runs under no_grad already
        destination.copy_(value)  # entering no_grad again cost 3.5 of a copy's 5.7 us (a decode step has 66)
        return
    with torch.no_grad():
        destination.copy_(value)


def _copy_meta(destination: TensorProxy, value: TensorProxy) -> None:
    return None


def _torch_executor() -> Any:
    from thunder.core.executor import get_executor

    return get_executor("torch")


def _epilogue_symbol(name: str, meta: Callable, fn: Callable, *, side_effect: bool = False) -> Symbol:
    """``inplace.<name>``, run by PyTorch's ``fn``; each is made on first use (``made_on_first_use``:
    the torch executor must exist first)."""
    return Symbol(
        name=name, id=f"inplace.{name}", meta=meta, module="inplace", fn=fn, executor=_torch_executor(),
        tags=frozenset({"side_effect"}) if side_effect else frozenset(),
    )  # fmt: skip


@made_on_first_use
def copy_symbol() -> Symbol:
    """``inplace.copy_(destination, value)``: the epilogue's write into a real tensor, run by PyTorch."""
    return _epilogue_symbol("copy_", _copy_meta, _copy_into, side_effect=True)


copy_ = _copy_into  # what ``inplace.copy_`` names in a printed trace


def _snapshot_meta(a: TensorProxy) -> TensorProxy:
    return a.replace()


@made_on_first_use
def snapshot_symbol() -> Symbol:
    """``inplace.snapshot(a)``: a copy of an input's value taken before the epilogue writes into it."""
    return _epilogue_symbol("snapshot", _snapshot_meta, torch.clone)


snapshot = torch.clone  # what ``inplace.snapshot`` names in a printed trace


def _unseen_write_meta(old: TensorProxy, value: TensorProxy) -> TensorProxy:
    return old.replace()


def _unseen_write(old: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return value


@made_on_first_use
def unseen_write_symbol() -> Symbol:
    """``inplace.unseen_write(old, value)``: ``value``, which autograd takes for ``old`` (the gradient
    passes to ``old`` unchanged): a tensor that requires grad, written under no_grad or through
    ``detach()``, as eager's autograd sees it (its graph is the old one, its values the new ones)."""
    from thunder.core.gradients import register_vjp

    symbol = _epilogue_symbol("unseen_write", _unseen_write_meta, _unseen_write)
    register_vjp(symbol)(lambda g, old, value, *, out: (g, None))
    return symbol


unseen_write = _unseen_write  # what ``inplace.unseen_write`` names in a printed trace


def _overwritten_error(names: tuple) -> None:
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"{', '.join(names)} (written under torch.no_grad() or through detach() or .data after an op had saved "
        "it for the backward: eager's backward raises the same, or, for .data, computes with the new values)"
    )


def _overwritten_meta(names: tuple) -> None:
    return None


@made_on_first_use
def overwritten_error_symbol() -> Symbol:
    """``inplace.overwritten_error(names)``: a backward that would read tensors overwritten after they
    were saved raises when it runs, as eager's does (``Trace.overwritten``)."""
    return _epilogue_symbol("overwritten_error", _overwritten_meta, _overwritten_error, side_effect=True)


overwritten_error = _overwritten_error  # what ``inplace.overwritten_error`` names in a printed trace


def _true_count(mask: torch.Tensor, rows: int) -> None:
    count = int(mask.sum())  # eager's nonzero synchronizes the same way
    if count != rows:
        raise RuntimeError(
            f"shape mismatch: value tensor of {rows} rows cannot be broadcast to indexing result of {count} rows "
            "(the count of Trues of the mask)"
        )


def _true_count_meta(mask: TensorProxy, rows: int) -> None:
    return None


@made_on_first_use
def _true_count_symbol() -> Symbol:
    return _epilogue_symbol("true_count", _true_count_meta, _true_count, side_effect=True)


def check_true_count(mask: TensorProxy, rows: int) -> None:
    """Record ``inplace.true_count(mask, rows)``: a write of one row per True of ``mask`` raises when
    it runs with another count of Trues, as eager's does (the count is the data's)."""
    _true_count_symbol()(mask, rows)


true_count = _true_count  # what ``inplace.true_count`` names in a printed trace


# view step -> the PyTorch view that replays it on a real tensor, by the step's spelling in
# ``returned_view``'s steps (printable constants: the printed trace stays a program)
_TORCH_VIEW_STEPS: dict[str, Callable[..., torch.Tensor]] = {
    "reshape": torch.reshape,  # a view where eager's was one (the chain is of views)
    "permute": torch.permute,
    "slice": lambda a, start, end, strides: a[tuple(slice(*s) for s in zip(start, end, strides))],
    "broadcast_in_dim": lambda a, shape, dims: a.reshape(
        [a.shape[dims.index(d)] if d in dims else 1 for d in range(len(shape))]
    ).expand(shape),
}


def replay_views(base: torch.Tensor, steps: tuple) -> torch.Tensor:
    """``base`` viewed through ``steps`` (``(name, *args)`` each, see ``torch_step``) by PyTorch."""
    for name, *args in steps:
        if name == "method":
            method, *args = args
            base = getattr(base, method)(*args)
        else:
            base = _TORCH_VIEW_STEPS[name](base, *args)
    return base


def _returned_view_meta(base: TensorProxy, steps: tuple, like: TensorProxy) -> TensorProxy:
    return like.replace()


@made_on_first_use
def returned_view_symbol() -> Symbol:
    """``inplace.returned_view(x, steps)``: a view the program returns of an input it updated in place,
    taken of the caller's tensor by PyTorch, so that it shares the input's memory as eager's does."""
    return _epilogue_symbol("returned_view", _returned_view_meta, replay_views)


returned_view = replay_views  # what ``inplace.returned_view`` names in a printed trace
