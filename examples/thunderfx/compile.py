"""thunder as a torch.compile backend: ``torch.compile(fn, backend=ThunderCompiler())``.

    python examples/thunderfx/compile.py
    python examples/thunderfx/compile.py --size 8 --print-traces

TorchDynamo captures FX graphs; ThunderCompiler splits each into pieces that thunder runs and pieces
left to Inductor (here ``torch.matrix_exp``, an operator thunder only runs through its PyTorch
fallback), then the script trains a small model through the same backend.
"""

from __future__ import annotations

import argparse
import sys

import torch

import thunder
from thunder.dynamo import ThunderCompiler


def foo(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.sin(x)
    return torch.matrix_exp(a) + a + torch.cos(y)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4, help="side of the square inputs")
    parser.add_argument("--steps", type=int, default=3, help="training steps of the small model")
    parser.add_argument("--print-traces", action="store_true")
    args = parser.parse_args(argv)
    torch.manual_seed(0)

    backend = ThunderCompiler()
    compiled_foo = torch.compile(foo, backend=backend)
    x = torch.randn(args.size, args.size, requires_grad=True)
    y = torch.randn(args.size, args.size, requires_grad=True)
    out = compiled_foo(x, y)
    torch.testing.assert_close(out, foo(x, y))
    out.sum().backward()
    print(f"result matches eager; grad_fn: {type(out.grad_fn).__name__}")

    info = backend.subgraph_infos[0]
    print(f"Dynamo captured {len(backend.subgraph_infos)} FX graph(s); the first is split into:")
    for piece in info.split_graph_module.named_children():
        print(f"  {piece[0]}: {type(piece[1]).__name__}")
    for reason in info.split_reasons:
        print(f"  split reason: {reason.reason_type.name}: {reason.info}")
    if args.print_traces:
        for thunder_module in info.thunder_compiled_fns:
            print(thunder.last_traces(thunder_module)[-1])

    model = torch.nn.Sequential(torch.nn.Linear(args.size, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
    compiled_model = torch.compile(model, backend=ThunderCompiler())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data, target = torch.randn(64, args.size), torch.randn(64, 1)
    for step in range(args.steps):
        loss = torch.nn.functional.mse_loss(compiled_model(data), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step + 1}: loss {loss.item():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
