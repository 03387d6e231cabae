"""Eager's device rule for elementwise ops: a CPU tensor with no dims may join tensors on another
device (it acts as a scalar: Adam's step count beside CUDA parameters); other mixes raise eager's
error. Traced on proxies, so it runs without a GPU; ``test_cpu_scalar_tensor_with_cuda`` runs it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import thunder
import thunder.torch as ttorch
from thunder.core import devices
from thunder.core.proxies import TensorProxy
from thunder.core.trace import Trace, tracectx

CUDA = devices.Device("cuda", 0)


def _proxy(shape: tuple[int, ...], device: devices.Device | str) -> TensorProxy:
    return TensorProxy(shape=shape, dtype=torch.float32, device=device)


def _mask() -> TensorProxy:
    return TensorProxy(shape=(3,), dtype=torch.bool, device=CUDA)


# elementwise ops of every family (binary, ternary, composed, indexing fills), each with the CPU
# scalar tensor in a tensor argument's place
OPS = {
    "mul": lambda g, s: ttorch.mul(g, s),
    "mul, scalar first": lambda g, s: ttorch.mul(s, g),
    "where": lambda g, s: ttorch.where(_mask(), g, s),
    "clamp": lambda g, s: ttorch.clamp(g, min=s),
    "lerp": lambda g, s: ttorch.lerp(g, g, s),
    "addcmul": lambda g, s: ttorch.addcmul(g, g, s),
    "addcdiv": lambda g, s: ttorch.addcdiv(g, g, s),
    "masked_fill": lambda g, s: ttorch.masked_fill(g, _mask(), s),
    "xlogy": lambda g, s: ttorch.xlogy(g, s),
    "logaddexp": lambda g, s: ttorch.logaddexp(g, s),
    "pow": lambda g, s: ttorch.pow(s, g),
}


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_a_cpu_tensor_without_dims_moves_to_the_other_device(op: Any) -> None:
    trace = Trace()
    with tracectx(trace):
        result = op(_proxy((3,), CUDA), _proxy((), "cpu"))
    assert result.device == CUDA and result.shape == (3,)
    assert "device_put" in str(trace), trace


@pytest.mark.parametrize(
    ("shapes", "devices_"),
    [(((3,), (3,)), (CUDA, "cpu")), (((), ()), (CUDA, devices.Device("cuda", 1)))],
)
def test_other_mixes_of_devices_raise_eagers_error(shapes: tuple, devices_: tuple) -> None:
    with tracectx(Trace()):
        a, b = (_proxy(s, d) for s, d in zip(shapes, devices_))
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            ttorch.add(a, b)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cpu_scalar_tensor_with_cuda() -> None:
    def f(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return x * (1 - 0.9**count) / count.sqrt()

    x, count = torch.randn(5, device="cuda", requires_grad=True), torch.tensor(3.0)
    expected = f(x, count)
    actual = thunder.jit(f)(x, count)
    torch.testing.assert_close(actual, expected)
    (grad,) = torch.autograd.grad(actual.sum(), x)
    torch.testing.assert_close(grad, torch.autograd.grad(expected.sum(), x)[0])
