"""A Hugging Face Llama model through thunder.jit: forward, a training step, and what thunder ran.

    python examples/huggingface/tiny_llama.py
    python examples/huggingface/tiny_llama.py --layers 1 --hidden 32 --steps 2 --print-trace

The model is built from a tiny ``LlamaConfig`` with random weights, so nothing is downloaded. The
script checks that thunder's logits match eager PyTorch's, trains a few steps with thunder, and
prints ``thunder.examine``'s report of which operators thunder runs natively.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch

import thunder


def build_model(layers: int, hidden: int, vocab: int) -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attn_implementation="sdpa",
    )
    return transformers.LlamaForCausalLM(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="training steps")
    parser.add_argument("--print-trace", action="store_true", help="print the forward execution trace")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = build_model(args.layers, args.hidden, args.vocab).eval()  # eval: dropout off, same as eager
    eager_model = copy.deepcopy(model)
    jitted = thunder.jit(model)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))

    with torch.no_grad():
        logits = jitted(input_ids=ids, use_cache=False).logits
        torch.testing.assert_close(logits, eager_model(input_ids=ids, use_cache=False).logits)
    print(f"logits {tuple(logits.shape)} match eager PyTorch")

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        loss = jitted(input_ids=ids, labels=ids, use_cache=False).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step + 1}: loss {loss.item():.4f}")
    print(f"compiles: {thunder.cache_misses(jitted)}, cache hits: {thunder.cache_hits(jitted)}")

    report = thunder.examine(eager_model, ids, use_cache=False, show=False)
    print(
        f"thunder.examine: {len(report.native)} native, {len(report.fallback)} fallback, "
        f"{len(report.unsupported)} unsupported operators; matches eager: {report.matches_eager}"
    )
    if args.print_trace:
        print(thunder.last_traces(jitted)[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
