"""RMS norms folded into the Triton GEMV (``rms_norm_gemv`` in ``triton/gemv.py``, the executor's
``rms_norm_linears``, ``core/transforms/fold_rms_norms.py``), against eager PyTorch.

On the CPU the kernel runs in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``). The
interpreter rounds float32 to bfloat16 by truncating, where a GPU rounds to nearest: in bfloat16
the normalized row may be two units in the last place from eager's there (Llama's norm rounds
twice), one on a GPU; float16 (rounded by numpy) and float32 must match eager's rounding exactly
on the CPU.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

import thunder

pytest.importorskip("triton")

from thunder.executors.triton.gemv import rms_norm_gemv  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EXECUTORS = ["triton_gemv", "torch"]


def llama_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``LlamaRMSNorm.forward`` (also Mistral's, Qwen's), as transformers writes it."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(input_dtype)


def gemma_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``GemmaRMSNorm.forward``, as transformers writes it."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + weight.float())).type_as(x)


NORMS = {"llama": llama_norm, "gemma": gemma_norm}


def _within_ulps(actual: torch.Tensor, expected: torch.Tensor, ulps: int = 1) -> bool:
    spacing = torch.finfo(expected.dtype).eps * expected.float().abs()  # at least one unit
    return bool(((actual.float() - expected.float()).abs() <= ulps * spacing + 1e-30).all())


def _inputs(k: int, rows: list[int], dtype: torch.dtype, bias: bool, add: bool) -> tuple:
    torch.manual_seed(k)
    x = 3 * torch.randn(1, 1, k, device=DEVICE, dtype=dtype)
    addend = torch.randn(1, 1, k, device=DEVICE, dtype=dtype) if add else None
    norm_weight = 1 + 0.5 * torch.randn(k, device=DEVICE, dtype=dtype)
    weights = [torch.randn(n, k, device=DEVICE, dtype=dtype) / k**0.5 for n in rows]
    biases = [torch.randn(n, device=DEVICE, dtype=dtype) for n in rows] if bias else None
    return x, addend, norm_weight, weights, biases


@pytest.mark.parametrize("style", ["llama", "gemma"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("add", [False, True])
def test_normalized_row_rounds_as_eager(style: str, dtype: torch.dtype, add: bool) -> None:
    """The normalized row itself, read back through an identity matrix (one product per output, so
    the product adds no rounding); K = 100 in steps of 32: the last step is masked."""
    k = 100
    x, addend, norm_weight, _, _ = _inputs(k, [], dtype, False, add)
    total = x if addend is None else x + addend
    normed = NORMS[style](total, norm_weight, 1e-5)
    eye = torch.eye(k, device=DEVICE, dtype=dtype)
    (row, *rest) = rms_norm_gemv(x, norm_weight, 1e-5, [eye], None, style, addend, config=(2, 32, 4))
    if DEVICE == "cuda":  # rsqrt and the sum's order may differ in the last bit
        assert _within_ulps(row, normed)
    elif dtype == torch.bfloat16:  # the interpreter truncates, up to three times (sum, norm, weight)
        assert _within_ulps(row, normed, 4)
    else:
        assert torch.equal(row, normed)
    if add and dtype != torch.bfloat16:
        assert torch.equal(rest[0], total)


@pytest.mark.parametrize("style", ["llama", "gemma"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "k, rows, bias, add, config",
    [
        (64, [16], False, False, None),
        (100, [5, 7, 3], False, True, (2, 32, 4)),  # K not a multiple of the step: masked steps
        (256, [8, 9], True, False, (4, 64, 4)),  # a block of rows past the end of the second weight
        (96, [33], True, True, (4, 64, 4)),  # K = 1.5 steps
        (160, [40, 8, 8], True, False, None),
    ],
)
def test_kernel_matches_eager(style: str, dtype: torch.dtype, k: int, rows: list[int], bias: bool, add: bool, config) -> None:  # fmt: skip
    x, addend, norm_weight, weights, biases = _inputs(k, rows, dtype, bias, add)
    total = x if addend is None else x + addend
    normed = NORMS[style](total, norm_weight, 1e-5)
    outputs = rms_norm_gemv(x, norm_weight, 1e-5, weights, biases, style, addend, config)
    assert len(outputs) == len(weights) + add
    if add:
        torch.testing.assert_close(outputs[-1], total)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    for index, (out, w) in enumerate(zip(outputs, weights)):
        expected = F.linear(normed.double(), w.double(), None if biases is None else biases[index].double())
        assert out.shape == expected.shape and out.dtype == dtype
        assert ((out.double() - expected).norm() / expected.norm()).item() < tolerance


def test_kernel_refuses_bad_norm_arguments() -> None:
    x = torch.randn(1, 8, device=DEVICE)
    w = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(ValueError, match="style"):
        rms_norm_gemv(x, torch.ones(8, device=DEVICE), 1e-6, [w], style="layer")
    with pytest.raises(ValueError, match="shape"):
        rms_norm_gemv(x, torch.ones(7, device=DEVICE), 1e-6, [w])


_COMPILE_FOR_H100 = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from thunder.executors.triton.gemv import _gemv_kernel

pointers = "x_ptr w0 w1 w2 y0 y1 y2 b0 b1 b2 g_ptr a_ptr sum_ptr".split()
constants = "K GROUP HAS_BIAS NORM ADD BLOCK_N BLOCK_K EVEN_K".split()
for dtype, norm, add, k, block_k, group in [
    ("bf16", 1, True, 2048, 1024, 3), ("bf16", 2, True, 2048, 1024, 2), ("fp16", 1, False, 100, 128, 1),
    ("fp32", 0, False, 2048, 1024, 3), ("bf16", 2, False, 96, 64, 1),
]:
    signature = {p: f"*{dtype}" for p in pointers}
    signature.update({n: "i32" for n in "n0 n1 n2 blocks0 blocks01".split()}, eps="fp32")
    signature.update({c: "constexpr" for c in constants})
    values = [k, group, False, norm, add, 2, block_k, k % block_k == 0]
    order = list(signature)
    source = ASTSource(_gemv_kernel, signature, {(order.index(c),): v for c, v in zip(constants, values)})
    triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print("compiled")
"""


def test_kernel_compiles_for_an_h100_without_a_gpu() -> None:
    """Triton's interpreter runs Python, not Triton's compiler: a kernel it runs may still not compile.
    Compile the variants (norm styles, the add, masked steps, dtypes) for sm_90 here, in a process
    without the interpreter; needs Triton's CUDA backend and its bundled ptxas, else skipped."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_FOR_H100], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0 and "CompilationError" not in done.stderr and "ptxas" in done.stderr:
        pytest.skip(f"Triton cannot compile for CUDA here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]


# --- the transform and the executor ---------------------------------------------------------------


class _Block(torch.nn.Module):
    """A Llama layer's linears around its two norms, with HF's norm code, and a final norm."""

    def __init__(self, d: int = 40, norm=llama_norm, bias: bool = False) -> None:
        super().__init__()
        self.norm_fn = norm
        self.norms = torch.nn.ParameterList([torch.nn.Parameter(1 + 0.1 * torch.randn(d)) for _ in range(3)])
        self.qkv = torch.nn.ModuleList([torch.nn.Linear(d, n, bias=bias) for n in (16, 8, 8)])
        self.o = torch.nn.Linear(8, d, bias=False)
        self.gate_up = torch.nn.ModuleList([torch.nn.Linear(d, 24, bias=False) for _ in range(2)])
        self.down = torch.nn.Linear(24, d, bias=False)
        self.head = torch.nn.Linear(d, 16, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        normed = self.norm_fn(h, self.norms[0], 1e-6)
        q, k, v = (linear(normed) for linear in self.qkv)
        h = h + self.o(k * v * q[..., :8])
        normed = self.norm_fn(h, self.norms[1], 1e-6)
        h = h + self.down(F.silu(self.gate_up[0](normed)) * self.gate_up[1](normed))
        return self.head(self.norm_fn(h, self.norms[2], 1e-6))


def _lines(jitted) -> list[str]:
    return str(thunder.last_traces(jitted)[-1]).splitlines()


def _folded(lines: list[str]) -> list[str]:
    return [line for line in lines if "gemv_rms_norm_linears(" in line]


@pytest.mark.parametrize("style", ["llama", "gemma"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_folds_every_norm_and_matches_eager(style: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = _Block(norm=NORMS[style], bias=True).to(DEVICE, dtype)
    jitted = thunder.jit(model, executors=EXECUTORS, fold_rms_norms=True)
    with torch.no_grad():
        for _ in range(2 if dtype == torch.float32 else 1):
            h = torch.randn(1, 1, 40, device=DEVICE, dtype=dtype)
            tolerances = {} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
            torch.testing.assert_close(jitted(h), model(h), **tolerances)
    lines = _lines(jitted)
    folded = _folded(lines)
    assert len(folded) == 3, lines
    assert all(f"'{style}'" in line for line in folded)
    # the input norm reads h itself; the others a residual connection's sum, which they compute
    assert folded[0].endswith("None)") or ", None)  #" in folded[0]
    assert not any(word in line for line in lines for word in ("rsqrt", "torch.pow(")), lines
    assert not any("torch.add(" in line for line in lines), lines  # both residual adds are folded


def test_norm_read_elsewhere_is_not_folded() -> None:
    """The normalized row is also returned: it must still be computed, so nothing is folded."""

    def fn(x, g, w0, w1):
        normed = llama_norm(x, g, 1e-6)
        return F.linear(normed, w0), F.linear(normed, w1), normed * 2

    args = (torch.randn(1, 32), torch.randn(32), torch.randn(8, 32), torch.randn(8, 32))
    args = tuple(a.to(DEVICE) for a in args)
    jitted = thunder.jit(fn, executors=EXECUTORS, fold_rms_norms=True)
    for actual, expected in zip(jitted(*args), fn(*args)):
        torch.testing.assert_close(actual, expected)
    lines = _lines(jitted)
    assert not _folded(lines) and any("gemv_linears(" in line for line in lines), lines


def test_residual_read_before_the_linears_keeps_its_add() -> None:
    """The sum is read between the norm and its linears: the norm is folded, the add stays."""

    def fn(x, a, g, w):
        h = x + a
        normed = llama_norm(h, g, 1e-6)
        side = h.sum()
        return F.linear(normed, w) + side, h

    args = tuple(torch.randn(*s, device=DEVICE) for s in [(1, 32), (1, 32), (32,), (8, 32)])
    jitted = thunder.jit(fn, executors=EXECUTORS, fold_rms_norms=True)
    for actual, expected in zip(jitted(*args), fn(*args)):
        torch.testing.assert_close(actual, expected)
    folded = _folded(_lines(jitted))
    assert len(folded) == 1 and folded[0].rstrip().split("#")[0].rstrip().endswith("None)"), folded


def test_input_written_in_place_between_the_add_and_the_linears() -> None:
    """``a`` is updated in place after the residual add: an add moved to the linears would read the
    new ``a``, so nothing between them may write memory for the fold."""

    def fn(x, a, g, w):
        h = x + a
        normed = llama_norm(h, g, 1e-6)
        a.mul_(3)
        return F.linear(normed, w), h

    args = [torch.randn(*s, device=DEVICE) for s in [(1, 32), (1, 32), (32,), (8, 32)]]
    copies = [t.clone() for t in args]
    jitted = thunder.jit(fn, executors=EXECUTORS, fold_rms_norms=True)
    for actual, expected in zip(jitted(*args), fn(*copies)):
        torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(args[1], copies[1])
    assert not any("'llama', a)" in line for line in _lines(jitted))


def test_several_rows_and_torch_executor_are_not_folded() -> None:
    torch.manual_seed(0)
    model = _Block().to(DEVICE)
    with torch.no_grad():
        jitted = thunder.jit(model, executors=EXECUTORS, fold_rms_norms=True)
        h = torch.randn(1, 3, 40, device=DEVICE)  # three rows: cuBLAS's matmuls, eager's norms
        torch.testing.assert_close(jitted(h), model(h))
        assert not _folded(_lines(jitted))
        jitted = thunder.jit(model, executors=["torch"])
        h = torch.randn(1, 1, 40, device=DEVICE)
        torch.testing.assert_close(jitted(h), model(h))
        assert not any("rms_norm_linears" in line for line in _lines(jitted))


def test_decomposition_is_eagers_ops() -> None:
    """An executor list without the kernel runs ``rms_norm_linears``' decomposition: eager's ops."""
    from thunder.core.transforms.fold_rms_norms import fold_rms_norms
    from thunder.executors.gemv import executor

    torch.manual_seed(0)
    for style, dtype in [("llama", torch.float32), ("llama", torch.bfloat16), ("gemma", torch.bfloat16)]:
        model = _Block(norm=NORMS[style]).to(DEVICE, dtype)
        fold = functools.partial(fold_rms_norms, executors=[executor])
        jitted = thunder.jit(model, executors=["torch"], transforms=[fold])
        h = torch.randn(1, 1, 40, device=DEVICE, dtype=dtype)
        # on the CPU the torch executor runs each op as eager does; on a GPU a fusion executor joins
        # (its reductions sum in another order)
        exact = {"rtol": 0, "atol": 0} if DEVICE == "cpu" else {"rtol": 2e-2, "atol": 2e-2}
        with torch.no_grad():
            torch.testing.assert_close(jitted(h), model(h), **exact)
        traces = [str(t) for t in thunder.last_traces(jitted)]
        assert any("ltorch.rms_norm_linears(" in t for t in traces)


def test_non_contiguous_norm_weight_runs_eagers_ops() -> None:
    def fn(x, a, g, w0, w1):
        return F.linear(llama_norm(x + a, g, 1e-6), w0), F.linear(llama_norm(x + a, g, 1e-6), w1)

    g = torch.randn(64, device=DEVICE)[::2]  # (32,), stride 2
    args = (torch.randn(1, 32), torch.randn(1, 32))
    args = (
        *(a.to(DEVICE) for a in args),
        g,
        torch.randn(8, 32, device=DEVICE),
        torch.randn(8, 32, device=DEVICE),
    )
    jitted = thunder.jit(fn, executors=EXECUTORS, fold_rms_norms=True)
    for actual, expected in zip(jitted(*args), fn(*args)):
        torch.testing.assert_close(actual, expected)
    assert _folded(_lines(jitted))


def _tiny_llama(dtype: torch.dtype):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(DEVICE, dtype).eval()


def test_llama_decode_step_has_folded_norms_and_no_norm_of_its_own() -> None:
    model = _tiny_llama(torch.float32)
    jitted = thunder.jit(model, executors=EXECUTORS, fold_rms_norms=True)
    prompt = torch.tensor([[1, 17, 42, 9, 7]], device=DEVICE)
    options = dict(max_new_tokens=3, do_sample=False, cache_implementation="static", disable_compile=True)
    with torch.no_grad():
        assert torch.equal(jitted.generate(prompt, **options), model.generate(prompt, **options))
    lines = _lines(jitted)
    folded = _folded(lines)
    # per layer: the input norm into q/k/v, the post-attention norm (and its residual add) into
    # gate/up; then the final norm (and the last residual add) into the head
    assert len(folded) == 2 * 2 + 1, lines
    assert sum(", (None, None, None), 'llama'" in line for line in folded) == 2
    # every residual add is folded into the norm after it: only layer 0's input norm has no addend
    assert sum("'llama', None)" in line for line in folded) == 1, folded
    residual_adds = [line for line in lines if "torch.add(" in line and 'f32[1, 1, 32]"' in line]
    assert not residual_adds, residual_adds
    assert not any(word in line for line in lines for word in ("rsqrt", "torch.pow(", "torch.mean("))


def test_llama_bfloat16_decode_logits_match_eager() -> None:
    model = _tiny_llama(torch.bfloat16)
    jitted = thunder.jit(model, executors=EXECUTORS, fold_rms_norms=True)
    ids = torch.tensor([[5]], device=DEVICE)
    with torch.no_grad():
        expected = model(ids).logits
        actual = jitted(ids).logits
    torch.testing.assert_close(actual, expected, rtol=3e-2, atol=3e-2)
    assert len(_folded(_lines(jitted))) == 5


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device: compiled kernels, launched directly"
)
@pytest.mark.parametrize("style", ["llama", "gemma"])
def test_cuda_llama_widths_match_eager_and_relaunch(style: str) -> None:
    """TinyLlama's and Llama-3-8B's widths in bfloat16: the normalized row within one unit in the last
    place of eager's (rounded to nearest here), products as close as eager's own, and a second call
    (the compiled kernel launched directly) agreeing with the first."""
    torch.manual_seed(0)
    for k, rows in [
        (2048, [2048, 256, 256]),
        (2048, [5632, 5632]),
        (4096, [4096, 1024, 1024]),
        (2048, [32000]),
    ]:
        x, addend = (torch.randn(1, 1, k, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        g = 1 + 0.1 * torch.randn(k, device="cuda", dtype=torch.bfloat16)
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5 for n in rows]
        normed = NORMS[style](x + addend, g, 1e-5)
        (row, total) = rms_norm_gemv(x, g, 1e-5, [torch.eye(k, device="cuda", dtype=torch.bfloat16)], None, style, addend)  # fmt: skip
        assert torch.equal(total, x + addend) and _within_ulps(row, normed)
        assert (row != normed).float().mean().item() < 0.01  # rarely even one unit apart
        first = rms_norm_gemv(x, g, 1e-5, weights, None, style, addend)
        second = rms_norm_gemv(x, g, 1e-5, weights, None, style, addend)
        for out, again, w in zip(first, second, weights):
            assert torch.equal(out, again)
            torch.testing.assert_close(out, F.linear(normed, w), rtol=2e-2, atol=2e-2)
