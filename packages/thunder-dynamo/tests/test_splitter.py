"""The support check per FX node and the split into thunder_N / inductor_N pieces, on hand-made graphs."""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch

from thunder.core.executor import get_default_executors
from thunder.core.symbol import make_prim
from thunder.dynamo import SplitReasonType, check_node, split_graph
from thunder.torch import registry


def traced(fn: Any, *inputs: Any) -> torch.fx.GraphModule:
    """``fn`` traced by torch.fx, each node carrying its value as Dynamo's ``example_value``."""
    graph_module = torch.fx.symbolic_trace(fn)

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            node.meta["example_value"] = result
            return result

    Recorder(graph_module).run(*inputs)
    return graph_module


def node_named(graph_module: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in graph_module.graph.nodes if n.name == name)


def reason_of(fn: Any, name: str, *inputs: Any) -> Any:
    graph_module = traced(fn, *inputs)
    return check_node(node_named(graph_module, name), get_default_executors())


X = torch.randn(3, 4)


def test_supported_function_method_and_operator(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> Any:
        return torch.sin(x).exp() + x.shape[0]

    graph_module = traced(fn, X)
    for node in graph_module.graph.nodes:
        assert check_node(node, get_default_executors()) is None, node.name


def test_missing_symbol_is_missing_op_support(without_symbol: Any) -> None:
    without_symbol(torch.sinc)
    reason = reason_of(lambda x: torch.sinc(x), "sinc", X)
    assert reason.reason_type is SplitReasonType.MISSING_OP_SUPPORT
    assert reason.info.startswith("node with name: sinc and target: <built-in method sinc")
    assert "only has an automatic torch fallback in thunder" in reason.info
    assert reason.exception is None


def test_unknown_tensor_method_is_missing_op_support() -> None:
    reason = reason_of(lambda x: x.not_a_method_of_thunder(), "not_a_method_of_thunder", _FakeMethod())
    assert reason.reason_type is SplitReasonType.MISSING_OP_SUPPORT


class _FakeMethod(torch.Tensor):
    """A tensor with one method more than torch has (so that fx tracing can record the call)."""

    @staticmethod
    def __new__(cls) -> Any:
        return torch.Tensor._make_subclass(cls, torch.randn(2))

    def not_a_method_of_thunder(self) -> torch.Tensor:
        return torch.Tensor(self) * 2


def test_call_module_is_unsupported_node() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    graph_module = traced(model, X)
    reason = check_node(node_named(graph_module, "_0"), get_default_executors())
    assert reason is not None and reason.reason_type is SplitReasonType.UNSUPPORTED_NODE


def test_symbol_that_raises_is_exception_in_meta(monkeypatch: pytest.MonkeyPatch) -> None:
    def meta(a: Any) -> Any:
        raise ValueError("this meta refuses")

    monkeypatch.setitem(registry._torch_to_symbol, torch.sin, make_prim("refusing_sin", meta))
    reason = reason_of(lambda x: torch.sin(x), "sin", X)
    assert reason.reason_type is SplitReasonType.EXCEPTION_META_THUNDER_OP
    assert isinstance(reason.exception, ValueError)


def test_meta_disagreeing_with_pytorch_is_exception_in_meta(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong_shape(a: Any) -> Any:
        return a.replace(shape=(1,))

    monkeypatch.setitem(registry._torch_to_symbol, torch.sin, make_prim("wrong_sin", wrong_shape))
    reason = reason_of(lambda x: torch.sin(x), "sin", X)
    assert reason.reason_type is SplitReasonType.EXCEPTION_META_THUNDER_OP
    assert "thunder computes shape [1]" in reason.info and "PyTorch shape [3, 4]" in reason.info


def test_inputs_thunder_cannot_proxy_are_exception_in_proxy() -> None:
    sparse = torch.eye(3).to_sparse()
    graph_module = traced(lambda x: torch.sin(x), torch.eye(3))
    node_named(graph_module, "x").meta["example_value"] = sparse
    reason = check_node(node_named(graph_module, "sin"), get_default_executors())
    assert reason is not None and reason.reason_type is SplitReasonType.EXCEPTION_PROXY_THUNDER_OP
    assert reason.exception is not None


def test_no_executor_for_the_op_is_missing_op_support() -> None:
    graph_module = traced(lambda x: torch.sin(x), X)
    reason = check_node(node_named(graph_module, "sin"), [])  # no executors at all
    assert reason is not None and reason.reason_type is SplitReasonType.MISSING_OP_SUPPORT
    assert "no executor runs it" in reason.info


def test_split_names_pieces_by_who_runs_them(needs_executor: None, without_symbol: Any) -> None:
    without_symbol(torch.sinc)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.sin(x)
        return a + torch.sinc(a) + torch.cos(y)

    x, y = torch.randn(4, 4), torch.randn(4, 4)
    result = split_graph(traced(fn, x, y), get_default_executors())
    assert result.is_thunder == {"thunder_0": True, "inductor_1": False, "thunder_2": True}
    assert [name for name, _ in result.split_graph_module.named_children()] == list(result.is_thunder)
    assert "thunder_0 = self.thunder_0(x)" in result.split_graph_module.code
    assert [r.reason_type for r in result.reasons] == [SplitReasonType.MISSING_OP_SUPPORT]
    torch.testing.assert_close(result.split_graph_module(x, y), fn(x, y))


def dynamo_graph(fn: Any, *inputs: Any) -> torch.fx.GraphModule:
    graphs = []

    def capture(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch.compile(fn, backend=capture)(*inputs)
    (graph,) = graphs
    return graph


def test_grad_mode_regions_go_to_the_other_piece(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        a = torch.sin(x)
        with torch.no_grad():
            b = torch.cos(a)
        return a + b

    x = torch.randn(3, requires_grad=True)
    result = split_graph(dynamo_graph(fn, x), get_default_executors())
    assert list(result.is_thunder.values()) == [True, False, True]
    assert {r.reason_type for r in result.reasons} == {SplitReasonType.UNSUPPORTED_NODE}
    out = result.split_graph_module(x)[0]
    torch.testing.assert_close(out, fn(x))
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.cos(x))  # b is a constant for autograd


def test_python_operators_on_values_are_supported(needs_executor: None) -> None:
    graph_module = traced(lambda x: operator.getitem(x.shape, 1) * x, X)
    assert all(check_node(n, get_default_executors()) is None for n in graph_module.graph.nodes)


def test_enable_grad_inside_no_grad(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            a = torch.sin(x)
            with torch.enable_grad():
                b = torch.cos(x)
            c = torch.exp(x)
        return torch.tanh(x) * (a + b + c)

    x = torch.randn(3, requires_grad=True)
    result = split_graph(dynamo_graph(fn, x), get_default_executors())
    assert list(result.is_thunder.values()) == [False, True, False, True]  # cos runs with grad, in thunder
    out = result.split_graph_module(x)[0]
    torch.testing.assert_close(out, fn(x))
    (actual,) = torch.autograd.grad(out.sum(), x)
    (expected,) = torch.autograd.grad(fn(x).sum(), x)
    torch.testing.assert_close(actual, expected)
