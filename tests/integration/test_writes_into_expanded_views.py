"""Writes into a view that goes through ``expand``, against eager PyTorch: where the view holds one
copy of each element (``x.unsqueeze(1).expand(2, 2, 3)[:, 0]``) eager writes into ``x``, and so does
thunder; where it holds two copies of one (a dim of stride 0 and size > 1), both raise eager's overlap
error. Values, the tensors written and gradients, over several calls with new values."""

from __future__ import annotations

import pytest
import torch

import thunder

WRITES = {
    "unsqueeze-expand-select": lambda x, v: x.unsqueeze(1).expand(2, 2, 3)[:, 0].add_(v),
    "expand-of-a-row-select": lambda x, v: x[0].expand(4, 3)[1].mul_(v[0]),
    "expand-transpose-select": lambda x, v: x[:, None].expand(2, 4, 3).transpose(0, 1)[2].copy_(v),
    "expand-slice-of-size-1": lambda x, v: x.unsqueeze(1).expand(2, 2, 3)[:, 1:].sub_(v[:, None]),
    "setitem-through-expand": lambda x, v: (
        x.unsqueeze(0).expand(5, 2, 3)[3].__setitem__((slice(None), 0), v[:, 0])
    ),
}
OVERLAPS = {
    "expand-then-slice-of-two": lambda x, v: x[0].expand(2, 3)[:, :2].add_(1),
    "the-whole-expand": lambda x, v: x.expand(2, 2, 3).add_(1),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_through_one_copy_of_an_expand_reaches_the_base(name: str) -> None:
    write = WRITES[name]

    def on_input(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        write(x, v)
        return x.unsqueeze(1).expand(2, 2, 3) * 1

    def with_grads(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = x * 2
        expanded = y.unsqueeze(1).expand(2, 2, 3)
        write(y, v)
        return (expanded * expanded.detach().sin()).sum()  # reads the written base through the expand

    jitted, jitted_grads = thunder.jit(on_input), thunder.jit(with_grads)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        x, v = torch.randn(2, 3, generator=generator), torch.randn(2, 3, generator=generator)
        expected_x, actual_x = x.clone(), x.clone()
        torch.testing.assert_close(jitted(actual_x, v), on_input(expected_x, v))
        torch.testing.assert_close(actual_x, expected_x)
        grads = []
        for fn in (with_grads, jitted_grads):
            xs, vs = x.clone().requires_grad_(), v.clone().requires_grad_()
            out = fn(xs, vs)
            out.backward()
            grads.append((out.detach(), xs.grad, vs.grad))
        torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("name", list(OVERLAPS))
def test_a_write_into_two_copies_raises_like_eager(name: str) -> None:
    write = OVERLAPS[name]

    def f(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        write(x, v)
        return x

    x, v = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        f(x.clone(), v)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        thunder.jit(f)(x.clone(), v)
