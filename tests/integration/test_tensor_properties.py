"""torch.Tensor's properties through ``thunder.jit`` (issue 21): ``x.H`` is a tensor, as in eager, not a
method bound to ``x``. Every property torch.Tensor has is listed here in one table, so a property a
new torch adds fails ``test_every_property_is_classified`` until someone decides what it does."""

from __future__ import annotations

import inspect

import pytest
import torch

import thunder

# properties whose value is a tensor computed from x: forward and backward compare with eager
TENSOR_VALUED = ("T", "mT", "H", "mH", "real")
# properties answered from the proxy's metadata (the prologue checks device, dtype, shape)
METADATA = (
    "device", "dtype", "shape", "ndim", "requires_grad", "is_cpu", "is_cuda", "is_meta", "is_ipu", "is_maia",
    "is_mkldnn", "is_mps", "is_mtia", "is_nested", "is_quantized", "is_sparse", "is_sparse_csr", "is_vulkan",
    "is_xla", "is_xpu", "itemsize", "layout", "nbytes",
)  # fmt: skip
# autograd's state of the actual tensor, which a trace does not see: a clear error
# ``grad`` is supported for the program's inputs (test_backward_inside_jit.py)
UNSUPPORTED = ("grad_dtype", "grad_fn", "is_leaf", "output_nr", "retains_grad", "volatile")
# eager raises for real tensors, so does thunder (complex tensors are not supported yet)
RAISES_LIKE_EAGER = ("imag",)
# ``name`` is a named-tensor dimension name in torch but every proxy's own name in thunder
KNOWN = {
    "data": "x.data reads as x.detach() (07aa7c0): tests/integration/test_unseen_writes.py checks it against eager",
    "name": "TensorProxy.name is the proxy's name in the trace; named tensors are not supported",
    "grad": "an input's .grad as the call found it, plus what a backward in the program added",
}


def _torch_properties() -> set[str]:
    # inspect.getmembers_static is 3.11+: the class attributes along the MRO, descriptors unrun
    attributes: dict = {}
    for klass in reversed(torch.Tensor.__mro__):
        attributes.update(vars(klass))
    return {
        name
        for name, value in attributes.items()
        if not name.startswith("_") and inspect.isdatadescriptor(value)
    }


def test_every_property_is_classified() -> None:
    classified = {*TENSOR_VALUED, *METADATA, *UNSUPPORTED, *RAISES_LIKE_EAGER, *KNOWN}
    assert _torch_properties() - classified == set(), "a torch.Tensor property this test does not know"


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("name", TENSOR_VALUED)
def test_tensor_valued_property(name: str, shape: tuple[int, ...]) -> None:
    if name == "H" and len(shape) != 2:
        pytest.skip("x.H is for matrices only (eager raises too)")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return getattr(x, name) * 2

    x = torch.randn(shape, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    actual, expected = thunder.jit(fn)(x), fn(x_ref)
    assert isinstance(actual, torch.Tensor)
    torch.testing.assert_close(actual, expected)
    grad = torch.randn_like(expected)
    actual.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("name", METADATA)
def test_metadata_property(name: str) -> None:
    x = torch.randn(3, 4)
    actual = thunder.jit(lambda x: getattr(x, name))(x)
    assert actual == getattr(x, name)


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_autograd_state_property_raises(name: str) -> None:
    with pytest.raises(NotImplementedError, match=f"tensor attribute '{name}'"):
        thunder.jit(lambda x: getattr(x, name))(torch.randn(3))


def test_grad_of_an_input_is_read_and_of_a_computed_tensor_raises() -> None:
    x = torch.randn(3)
    assert thunder.jit(lambda x: x.grad)(x) is None
    with pytest.raises(NotImplementedError, match="grad of a tensor the program computed"):
        thunder.jit(lambda x: (x * 2).grad)(x)


def test_imag_of_real_tensor_raises_like_eager() -> None:
    with pytest.raises(RuntimeError, match="imag is not implemented") as eager:
        torch.randn(3).imag
    with pytest.raises(RuntimeError, match="imag is not implemented") as traced:
        thunder.jit(lambda x: x.imag)(torch.randn(3))
    assert str(eager.value) in str(traced.value)


def test_property_of_a_computed_tensor() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x + 1
        return y.mH @ y.mT.real

    x = torch.randn(2, 3, 3)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(x))
