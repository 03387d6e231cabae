"""The trace IR: dtypes, devices, proxies, symbols, printing and compiling."""

from __future__ import annotations

import pytest
import torch

import thunder.torch as ltorch
from thunder.core import devices, dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import RETURN, BoundSymbol
from thunder.core.trace import Trace, tracectx


@pytest.mark.parametrize("dtype", dtypes.all_dtypes, ids=lambda d: d.name)
def test_dtype_round_trips_through_torch(dtype: dtypes.dtype) -> None:
    assert dtypes.to_dtype(dtype.torch_dtype) is dtype
    assert dtypes.to_torch_dtype(dtype) is dtype.torch_dtype
    assert dtype == dtype.torch_dtype and dtype.torch_dtype == dtype  # user code compares with torch's


def test_dtype_categories_match_torch() -> None:
    for dtype in dtypes.all_dtypes:
        assert dtype.is_floating_point == dtype.torch_dtype.is_floating_point
        assert dtype.is_complex == dtype.torch_dtype.is_complex


def test_devices_convert_and_compare() -> None:
    assert devices.Device("cpu") == torch.device("cpu")
    assert str(devices.Device("cuda", 1)) == "cuda:1"
    assert devices.to_torch_device(devices.Device("cpu")) == torch.device("cpu")
    assert repr(devices.Device("cuda:0")) == 'devices.Device("cuda:0")'


def test_tensor_proxy_metadata_and_comment() -> None:
    with tracectx(Trace()):
        t = TensorProxy.from_tensor(torch.zeros(8, 784, dtype=torch.bfloat16))
    assert t.shape == (8, 784) and t.ndim == 2 and t.numel() == 8 * 784
    assert t.dtype == torch.bfloat16 and t.device == "cpu" and t.size(1) == 784
    assert t.type_comment() == '"cpu bf16[8, 784]"'


def test_proxy_refuses_data_dependent_use() -> None:
    with tracectx(Trace()):
        t = TensorProxy(shape=(2,), dtype=dtypes.float32, device="cpu")
        with pytest.raises(NotImplementedError, match="depends on the tensor's data"):
            bool(t)


def _traced_trace() -> Trace:
    trace = Trace()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2, 3), dtype=dtypes.float32, device="cpu")
        b = TensorProxy("b", shape=(3,), dtype=dtypes.float32, device="cpu")
        trace.args = [a, b]
        out = ltorch.relu(a + b) * 2
        trace.record(BoundSymbol(RETURN, (out,)))
    return trace


def test_composite_symbols_record_their_decomposition() -> None:
    trace = _traced_trace()
    names = [b.symbol.id for b in trace.bound_symbols]
    assert names == ["ltorch.add", "ltorch.relu", "ltorch.mul", "thunder.return"]
    add = trace.bound_symbols[0]
    assert [s.symbol for s in add.subsymbols] == [prims.broadcast_in_dim, prims.add]


def test_trace_prints_as_python_with_type_comments() -> None:
    source = str(_traced_trace())
    assert "def computation(a, b):" in source
    assert '# a: "cpu f32[2, 3]"' in source
    assert 't1 = ltorch.add(a, b)  # t1: "cpu f32[2, 3]"' in source
    assert "    # t1 = prims.add(a, t0)" in source  # the decomposition, as comments
    compile(source, "trace", "exec")  # valid Python


def test_proxies_never_shadow_imported_names() -> None:
    trace = Trace()
    with tracectx(trace):
        p = TensorProxy("torch", shape=(1,), dtype=dtypes.float32, device="cpu")
    assert p.name != "torch"


def test_elementwise_prim_meta_checks_shapes() -> None:
    with tracectx(Trace()):
        a = TensorProxy(shape=(2, 3), dtype=dtypes.float32, device="cpu")
        b = TensorProxy(shape=(3,), dtype=dtypes.float32, device="cpu")
        with pytest.raises(RuntimeError, match="shapes"):
            prims.add(a, b)
        assert prims.gt(a, 0.0).dtype is dtypes.bool8


def test_matmul_meta_follows_torch_shapes() -> None:
    cases = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((5, 2, 3), (3, 4)), ((5, 1, 2, 3), (6, 3, 4))]
    with tracectx(Trace()):
        for a_shape, b_shape in cases:
            a = TensorProxy(shape=a_shape, dtype=dtypes.float32, device="cpu")
            b = TensorProxy(shape=b_shape, dtype=dtypes.float32, device="cpu")
            expected = torch.matmul(torch.zeros(a_shape), torch.zeros(b_shape)).shape
            assert prims.matmul(a, b).shape == tuple(expected)
