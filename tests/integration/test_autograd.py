"""thunder's autograd through the public API: gradients, grad modes, caching and RNG, against eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


def _grads(fn, *inputs: torch.Tensor) -> tuple:
    out = fn(*inputs)
    loss = sum(o.sum() for o in out) if isinstance(out, tuple) else out.sum()
    return torch.autograd.grad(loss, [x for x in inputs if x.requires_grad], allow_unused=True)


def test_outputs_carry_thunder_grad_fn_and_traces_are_kept() -> None:
    def fn(a, b):
        return torch.tanh(a @ b).sum(-1)

    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, 5, requires_grad=True)
    jfn = thunder.jit(fn)
    out = jfn(a, b)
    assert type(out.grad_fn).__name__ == "ThunderFunctionBackward"
    for ours, eager in zip(_grads(jfn, a, b), _grads(fn, a, b)):
        torch.testing.assert_close(ours, eager)
    forward, backward = thunder.last_traces(jfn)[-1], thunder.last_backward_traces(jfn)[-1]
    assert "def forward(" in str(forward) and "def backward(" in str(backward)
    assert thunder.compile_stats(jfn).last_saved_for_backward_bytes > 0
    assert any("bytes" in trace.header for trace in thunder.last_traces(jfn))


def test_no_grad_block_inside_the_function_stops_gradients() -> None:
    def fn(x):
        with torch.no_grad():
            scale = x * 2
        return (scale * x).sum()

    x = torch.randn(5, requires_grad=True)
    (ours,) = torch.autograd.grad(thunder.jit(fn)(x), x)
    (eager,) = torch.autograd.grad(fn(x), x)
    torch.testing.assert_close(ours, eager)


def test_detach_stops_gradients() -> None:
    def fn(x):
        return (x.detach() * x + torch.sin(x)).sum()

    x = torch.randn(5, requires_grad=True)
    (ours,) = torch.autograd.grad(thunder.jit(fn)(x), x)
    (eager,) = torch.autograd.grad(fn(x), x)
    torch.testing.assert_close(ours, eager)


def test_requires_grad_and_grad_mode_changes_give_the_right_program() -> None:
    jfn = thunder.jit(lambda x: torch.exp(x) * 3)
    x = torch.randn(4)
    assert not jfn(x).requires_grad
    x.requires_grad_(True)
    assert jfn(x).requires_grad
    with torch.no_grad():
        assert not jfn(x).requires_grad
    with torch.inference_mode():
        assert not jfn(torch.randn(4)).requires_grad
    y = jfn(x)
    assert y.requires_grad
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, torch.exp(x.detach()) * 3)


def test_module_parameters_accumulate_gradients_and_optimizer_steps_match_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    )
    reference = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)])
    jmodel = thunder.jit(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        x, target = torch.randn(8, 6), torch.randint(0, 3, (8,))
        for net, opt in ((jmodel, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            F.cross_entropy(net(x), target).backward()
            # accumulation: a second backward adds to .grad as in eager
            if step == 1:
                F.cross_entropy(net(x), target).backward()
            opt.step()
    for ours, eager in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, eager)


def test_train_eval_switch_recompiles() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    jmodel = thunder.jit(model)
    x = torch.randn(2, 4)
    model.eval()
    torch.testing.assert_close(jmodel(x), model(x))
    model.train()
    jmodel(x)
    assert thunder.cache_misses(jmodel) == 2
    assert "native_dropout" in str(thunder.last_traces(jmodel)[-1])


def test_autograd_grad_without_create_graph_and_second_order_raises() -> None:
    jfn = thunder.jit(lambda x: (x**3).sum())
    x = torch.randn(3, requires_grad=True)
    (grad,) = torch.autograd.grad(jfn(x), x)
    torch.testing.assert_close(grad, 3 * x.detach() ** 2)
    (first,) = torch.autograd.grad(jfn(x), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad|differentiable"):
        torch.autograd.grad(first.sum(), x)


def test_dropout_mask_is_shared_by_forward_and_backward_and_seeded() -> None:
    jfn = thunder.jit(lambda x: F.dropout(x, 0.5, training=True))
    x = torch.ones(1000, requires_grad=True)
    torch.manual_seed(7)
    y = jfn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, (y != 0).float() * 2.0)
    assert 300 < int((y == 0).sum()) < 700
    torch.manual_seed(7)
    torch.testing.assert_close(jfn(x), y)


def test_missing_gradient_rule_is_a_clear_error() -> None:
    from thunder.core.proxies import TensorProxy
    from thunder.core.symbol import RETURN, BoundSymbol, make_prim
    from thunder.core.trace import Trace, tracectx
    from thunder.core.transforms.autograd import NoGradientRuleError, split_forward_backward

    opaque = make_prim("no_rule_op", lambda a: a.replace())
    trace = Trace()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2,), dtype=torch.float32, device="cpu", requires_grad=True)
        trace.args = [a]
        out = opaque(a)
        trace.record(BoundSymbol(RETURN, (out,)))
    with pytest.raises(NoGradientRuleError, match="prims.no_rule_op"):
        split_forward_backward(trace)


def test_outputs_eager_returns_without_requires_grad_are_so_here_too() -> None:
    x, y = torch.randn(3, requires_grad=True), torch.randn(3)

    def fn(x: torch.Tensor, y: torch.Tensor) -> list:
        mean_and_rstd = torch.native_layer_norm(x.reshape(1, 3), (3,), None, None, 1e-5)
        factories = [torch.zeros_like(x), torch.full_like(x, 2.0), x.new_ones(2), torch.rand_like(x)]
        return [x * 2, y * 2, *mean_and_rstd, x.detach() * 3, x.argmax(), torch.fill(x, 1.0), *factories]

    expected, actual = fn(x, y), thunder.jit(fn)(x, y)
    assert [t.requires_grad for t in actual] == [t.requires_grad for t in expected]


def test_backward_drops_views_that_change_nothing_and_computes_repeated_values_once() -> None:
    """A linear's weight gradient of a 2-D input reshaped both operands to the shape they had, and
    the q, k, v projections of one input each reshaped it again: one Python-level op per call."""

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            return self.q(x) * self.k(x) + self.v(x)

    model = Attention()
    x = torch.randn(2, 3, 4)
    jitted = thunder.jit(model)
    ours = [torch.autograd.grad(jitted(x).sum(), model.parameters())]
    eager = [torch.autograd.grad(model(x).sum(), model.parameters())]
    torch.testing.assert_close(ours, eager)
    backward = thunder.last_backward_traces(jitted)[0]
    reshaped_x = [b for b in backward.bound_symbols if b.symbol.name == "reshape" and b.args[0].name == "x"]
    assert len(reshaped_x) == 1, str(backward)
    assert all(
        tuple(b.args[1]) != tuple(b.args[0].shape)
        for b in backward.bound_symbols
        if b.symbol.name == "reshape"
    )

    linear = torch.nn.Linear(4, 4)
    jitted = thunder.jit(linear)
    x = torch.randn(2, 4)
    torch.testing.assert_close(
        torch.autograd.grad(jitted(x).sum(), linear.parameters()),
        torch.autograd.grad(linear(x).sum(), linear.parameters()),
    )
    names = [b.symbol.name for b in thunder.last_backward_traces(jitted)[0].bound_symbols]
    assert "reshape" not in names, names


def test_backward_folds_a_view_of_a_view() -> None:
    """The gradient of two reshapes is two reshapes back, one of the other: folded into one, which
    here reshapes to the shape the gradient has, so none is left."""

    def fn(x, w):
        return (x @ w).reshape(2, 3, 4).reshape(6, 4) * 2.0

    x = torch.randn(6, 5)
    w = torch.randn(5, 4, requires_grad=True)
    jitted = thunder.jit(fn)
    torch.testing.assert_close(
        torch.autograd.grad(jitted(x, w).sum(), w), torch.autograd.grad(fn(x, w).sum(), w)
    )
    names = [b.symbol.name for b in thunder.last_backward_traces(jitted)[0].bound_symbols]
    assert "reshape" not in names, names


def test_structured_outputs_come_back_whole_with_gradients() -> None:
    """The forward's own output structure is returned when autograd hands back its tensors; an input
    returned as an output comes back as autograd's view of it, and the structure is rebuilt."""

    def fn(x, w):
        return {"y": x @ w, "pair": (torch.tanh(w), 2)}

    def returns_input(x, w):
        return x, x @ w

    x = torch.randn(2, 3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    for f in (fn, returns_input):
        jitted = thunder.jit(f)
        for _ in range(2):  # compile, then a cache hit
            ours, eager = jitted(x, w), f(x, w)
            assert type(ours) is type(eager)
            torch.testing.assert_close(ours, eager)
            loss = lambda out: sum(
                t.sum() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)
            )  # noqa: E731
            torch.testing.assert_close(
                torch.autograd.grad(loss(ours), (x, w)), torch.autograd.grad(loss(eager), (x, w))
            )
