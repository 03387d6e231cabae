"""ThunderCompiler as a torch.compile backend: the tutorial, training, graph breaks, shapes, fallbacks."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from thunder.core.pipeline import compile_data, compile_stats
from thunder.dynamo import CompilerType, SplitReasonType, ThunderCompiler


@pytest.fixture
def inductor_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace Inductor by eager execution, recording each compile and its options (Inductor is slow on CPU)."""
    calls: list[dict[str, Any]] = []

    def compile_fx(graph_module: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("config_patches", {}))
        return graph_module.forward

    monkeypatch.setattr("torch._inductor.compile_fx.compile_fx", compile_fx)
    return calls


def foo(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.sin(x)
    return a + torch.sinc(a) + torch.cos(y)


def run_tutorial() -> tuple[ThunderCompiler, torch.Tensor, torch.Tensor, torch.Tensor]:
    backend = ThunderCompiler()
    opt_foo1 = torch.compile(foo, backend=backend)
    x = torch.randn(4, 4, requires_grad=True)
    y = torch.randn(4, 4, requires_grad=True)
    out = opt_foo1(x, y)
    print(out)
    subgraph_infos = backend.subgraph_infos
    print(f"TorchDynamo extracts {len(subgraph_infos)} FX graphs")
    for graph_id, subgraph_info in enumerate(subgraph_infos):
        print(f"Graph {graph_id}:\n{subgraph_info.original_graph_module}\n")
    subgraph_info = subgraph_infos[0]
    num_of_submodules = len(subgraph_info.submodule_to_compiled_functions)
    num_of_thunder_modules = len(subgraph_info.thunder_compiled_fns)
    print(
        f"Thunder spliter splits the graph into {num_of_submodules} subgraphs, in which "
        f"{num_of_thunder_modules} subgraphs are run by Thunder"
    )
    print("The structure of the split graph:\n")
    print(subgraph_info.split_graph_module)
    for subgraph_id, (original_graph, _) in enumerate(subgraph_info.submodule_to_compiled_functions.items()):
        print(f"Subgraph {subgraph_id}:\n{original_graph}\n")
    for reason_id, split_reason in enumerate(subgraph_info.split_reasons):
        print(f"Split reason {reason_id}:\n{split_reason}\n")
    return backend, x, y, out


def test_tutorial_with_an_op_thunder_does_not_support(
    needs_executor: None, without_symbol: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    without_symbol(torch.sinc)  # the tutorial's example of an unsupported op (thunder has it by now)
    backend, x, y, out = run_tutorial()
    printed = capsys.readouterr().out
    torch.testing.assert_close(out, foo(x, y))
    assert out.grad_fn is not None
    assert "TorchDynamo extracts 1 FX graphs" in printed
    assert (
        "Thunder spliter splits the graph into 3 subgraphs, in which 2 subgraphs are run by Thunder"
        in printed
    )
    structure = re.sub(r"\s+", " ", printed)
    assert (
        "GraphModule( (thunder_0): ThunderModule( (_model): GraphModule() ) "
        "(inductor_1): OptimizedModule( (_orig_mod): GraphModule() ) "
        "(thunder_2): ThunderModule( (_model): GraphModule() ) )"
    ) in structure
    assert "thunder_0 = self.thunder_0(l_x_)" in printed
    assert "inductor_1 = self.inductor_1(thunder_0)" in printed
    assert "thunder_2 = self.thunder_2(thunder_0, inductor_1, l_y_)" in printed
    assert "sinc = torch.sinc(a);  a = None" in printed  # subgraph 1
    assert re.search(
        r"SplitReason\(reason_type=<SplitReasonType.MISSING_OP_SUPPORT: 2>, info='node with name: sinc and "
        r"target: <built-in method sinc of type object at 0x[0-9a-f]+> only has an automatic torch fallback "
        r"in thunder.', exception=None\)",
        printed,
    )
    compilers = [c.compiler for c in backend.subgraph_infos[0].submodule_to_compiled_functions.values()]
    assert compilers == [CompilerType.THUNDER, CompilerType.TORCH_INDUCTOR, CompilerType.THUNDER]


def test_tutorial_training_matches_eager(
    needs_executor: None, without_symbol: Any, inductor_calls: list
) -> None:
    without_symbol(torch.sinc)
    compiled = torch.compile(foo, backend=ThunderCompiler())
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    grad = torch.randn(4, 4)
    compiled(x, y).backward(grad)
    expected_x, expected_y = torch.autograd.grad(foo(x, y), (x, y), grad)
    torch.testing.assert_close(x.grad, expected_x)
    torch.testing.assert_close(y.grad, expected_y)
    assert len(inductor_calls) == 1


def test_fully_supported_graph_is_one_thunder_piece(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * torch.cos(x) + 1

    backend = ThunderCompiler()
    x = torch.randn(5)
    torch.testing.assert_close(torch.compile(fn, backend=backend)(x), fn(x))
    (info,) = backend.subgraph_infos
    assert [name for name, _ in info.split_graph_module.named_children()] == ["thunder_0"]
    assert info.split_reasons == []
    assert len(info.thunder_compiled_fns) == 1


def test_graph_breaks_give_one_subgraph_info_each(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        a = torch.sin(x)
        torch._dynamo.graph_break()
        return torch.cos(a) * 2

    backend = ThunderCompiler()
    x = torch.randn(3, requires_grad=True)
    out = torch.compile(fn, backend=backend)(x)
    torch.testing.assert_close(out, fn(x))
    out.sum().backward()
    torch.testing.assert_close(x.grad, -torch.sin(torch.sin(x)) * torch.cos(x) * 2)
    assert len(backend.subgraph_infos) == 2
    assert all(len(info.thunder_compiled_fns) == 1 for info in backend.subgraph_infos)


def test_symbolic_shapes_are_specialized_and_recorded(needs_executor: None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * x.shape[0] + x.sum(0)

    backend = ThunderCompiler()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for rows in (3, 5, 7):
        x = torch.randn(rows, 2)
        torch.testing.assert_close(compiled(x), fn(x))
    (info,) = backend.subgraph_infos  # one Dynamo graph for every size
    reasons = [r for r in info.split_reasons if r.reason_type is SplitReasonType.SYMBOLIC_SHAPES_SPECIALIZED]
    assert len(reasons) == 1 and "symbolic sizes" in reasons[0].info
    assert sum(compile_stats(fn).cache_misses for fn in info.thunder_compiled_fns) >= 3


def test_inductor_failure_falls_back_to_eager_and_is_recorded(
    needs_executor: None, without_symbol: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_symbol(torch.sinc)

    def failing_compile_fx(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Inductor is broken today")

    monkeypatch.setattr("torch._inductor.compile_fx.compile_fx", failing_compile_fx)
    backend = ThunderCompiler()
    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    out = torch.compile(foo, backend=backend)(x, y)
    torch.testing.assert_close(out, foo(x, y))
    out.sum().backward()
    (failure,) = [
        r for r in backend.subgraph_infos[0].split_reasons if r.reason_type is SplitReasonType.INDUCTOR_FAILED
    ]
    assert "inductor_1" in failure.info and isinstance(failure.exception, RuntimeError)


def test_every_inductor_piece_is_compiled(
    needs_executor: None, without_symbol: Any, inductor_calls: list
) -> None:
    """More pieces than Dynamo's recompile limit (8) still each reach the Inductor backend."""
    without_symbol(torch.sinc)

    def fn(x: torch.Tensor) -> torch.Tensor:
        for _ in range(10):
            x = torch.sinc(torch.sin(x))
        return x

    backend = ThunderCompiler()
    x = torch.randn(3)
    torch.testing.assert_close(torch.compile(fn, backend=backend)(x), fn(x))
    assert len(inductor_calls) == 10
    assert len(backend.subgraph_infos[0].thunder_compiled_fns) == 10


def test_options_reach_thunder_and_inductor(
    needs_executor: None, without_symbol: Any, inductor_calls: list
) -> None:
    without_symbol(torch.sinc)
    backend = ThunderCompiler(
        executors=["torch"], cache="no caching", torch_inductor_options={"max_autotune": False}
    )
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(torch.compile(foo, backend=backend)(x, y), foo(x, y))
    assert inductor_calls == [{"max_autotune": False}]
    for piece in backend.subgraph_infos[0].thunder_compiled_fns:
        assert [e.name for e in compile_data(piece).executors][0] == "torch"
        assert compile_data(piece).cache_option == "no caching"


def test_module_training_through_split_graph(
    needs_executor: None, without_symbol: Any, inductor_calls: list
) -> None:
    without_symbol(torch.sinc)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 8)
            self.fc2 = torch.nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.sinc(torch.relu(self.fc1(x))))

    torch.manual_seed(0)
    model = Model()
    x = torch.randn(5, 6)
    compiled = torch.compile(model, backend=ThunderCompiler())
    compiled(x).pow(2).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    model(x).pow(2).sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, msg=name)


def test_in_place_update_of_an_input(needs_executor: None) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        y.add_(x)
        return y * 2

    x, y = torch.randn(4), torch.randn(4)
    expected_y = y.clone()
    expected = fn(x, expected_y)
    actual = torch.compile(fn, backend=ThunderCompiler())(x, y)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(y, expected_y)


def test_last_traces_work_on_thunder_pieces(
    needs_executor: None, meta_package: Any, without_symbol: Any
) -> None:
    without_symbol(torch.sinc)
    backend = ThunderCompiler()
    x, y = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    torch.compile(foo, backend=backend)(x, y).sum().backward()
    pieces = backend.subgraph_infos[0].thunder_compiled_fns
    assert len(pieces) == 2
    assert "torch.sin(" in str(meta_package.last_traces(pieces[0])[-1])
    assert "torch.cos(" in str(meta_package.last_traces(pieces[1])[-1])
    for piece in pieces:
        assert isinstance(meta_package.last_backward_traces(piece), list)


def test_thunder_failure_falls_back_to_eager_and_is_recorded(needs_executor: None) -> None:
    def broken_transform(trace: Any) -> Any:
        raise RuntimeError("a transform with a bug")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2

    backend = ThunderCompiler(transforms=[broken_transform])
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="thunder failed on thunder_0"):
        out = torch.compile(fn, backend=backend)(x)
    torch.testing.assert_close(out, fn(x))
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * torch.cos(x))
    (reason,) = backend.subgraph_infos[0].split_reasons
    assert reason.reason_type is SplitReasonType.THUNDER_FAILED
    assert str(backend.subgraph_infos[0].split_graph_module).count("ThunderModule(") == 1


def test_errors_of_the_program_are_raised_not_hidden(needs_executor: None) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, y)

    backend = ThunderCompiler()
    torch.compile(fn, backend=backend)(torch.randn(2, 3), torch.randn(3, 2))
    (info,) = backend.subgraph_infos
    with pytest.raises(
        RuntimeError, match="cannot be multiplied"
    ):  # eager's error, from the fallback's check
        info.split_graph_module(torch.randn(2, 3), torch.randn(4, 2))
    assert info.split_reasons == []
