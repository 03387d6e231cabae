"""The torch executor's fused forward/backward kernels (thunder/executors/torch_kernels.py) against
eager, forward and backward, and the traces that show them claimed. CUDA cases skip without a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _cases(device: str) -> list[torch.dtype]:
    return [torch.float32, torch.float64] if device == "cpu" else [torch.bfloat16, torch.float16]


def _tolerance(dtype: torch.dtype) -> dict:
    if dtype in (torch.bfloat16, torch.float16):
        return dict(atol=3e-2, rtol=3e-2)
    return dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-8)


def _check(fn, inputs: list, forward_name: str, backward_name: str) -> None:
    """Values and gradients within the tolerance of each result's dtype."""
    jitted = thunder.jit(fn, executors=["torch"])  # a default fusion executor would take some of them
    expected, actual = fn(*inputs), jitted(*inputs)
    torch.testing.assert_close(actual, expected, **_tolerance(expected.dtype))
    differentiable = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    cotangent = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, differentiable, cotangent)
    actual_grads = torch.autograd.grad(actual, differentiable, cotangent)
    for e, a in zip(expected_grads, actual_grads):
        torch.testing.assert_close(a, e, **_tolerance(e.dtype))
    forward, backward = str(thunder.last_traces(jitted)[-1]), str(thunder.last_backward_traces(jitted)[-1])
    assert f"= {forward_name}(" in forward, forward
    assert f"= {backward_name}(" in backward, backward


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention(device: str, is_causal: bool) -> None:
    for dtype in _cases(device):
        q, k, v = (torch.randn(2, 3, 16, 8, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

        def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

        _check(attention, [q, k, v], "attention_with_lse", "attention_backward")


@pytest.mark.parametrize("device", DEVICES)
def test_attention_non_contiguous_heads(device: str) -> None:
    """q, k, v as transposed views of one projection, as GPT blocks make them."""
    for dtype in _cases(device):
        qkv = torch.randn(2, 16, 3 * 32, device=device, dtype=dtype, requires_grad=True)

        def block(qkv: torch.Tensor) -> torch.Tensor:
            q, k, v = (t.view(2, 16, 4, 8).transpose(1, 2) for t in qkv.split(32, dim=2))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 16, 32)

        _check(block, [qkv], "attention_with_lse", "attention_backward")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: cuDNN and flash attention kernels")
@pytest.mark.parametrize("backend", ["cudnn", "flash"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_kernels_at_model_sizes(backend: str, head_dim: int) -> None:
    """GPT-2's and Llama's head sizes, through cuDNN (the choice on compute capability 9+) and flash."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = SDPBackend.CUDNN_ATTENTION if backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    heads, seq = 4, 256
    qkv = torch.randn(2, seq, 3 * heads * head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def block(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = (
            t.view(2, seq, heads, head_dim).transpose(1, 2) for t in qkv.split(heads * head_dim, dim=2)
        )
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, seq, -1)

    with sdpa_kernel([chosen]):  # thunder's kernel choice follows torch.backends.cuda's switches
        _check(block, [qkv], "attention_with_lse", "attention_backward")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: cuDNN and flash attention kernels")
@pytest.mark.parametrize("backend", ["cudnn", "flash"])
def test_grouped_query_attention_kernels(backend: str) -> None:
    """Llama's grouped heads (8 query heads per key head): the backward repeats the key's heads and sums them back."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = SDPBackend.CUDNN_ATTENTION if backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    q = torch.randn(2, 16, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (
        torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2)
    )

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    with sdpa_kernel([chosen, SDPBackend.MATH]):  # eager's enable_gqa may need the math kernel
        _check(attention, [q, k, v], "attention_with_lse", "attention_backward")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(device: str, affine: bool) -> None:
    for dtype in _cases(device):
        x = torch.randn(4, 6, 32, device=device, dtype=dtype, requires_grad=True)
        w = torch.randn(32, device=device, dtype=dtype, requires_grad=True) if affine else None
        b = torch.randn(32, device=device, dtype=dtype, requires_grad=True) if affine else None

        def norm(x: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
            return F.layer_norm(x, (32,), w, b)

        _check(norm, [x, w, b], "layer_norm_with_statistics", "layer_norm_backward")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(device: str, approximate: str) -> None:
    for dtype in _cases(device):
        x = torch.randn(4, 33, device=device, dtype=dtype, requires_grad=True)
        _check(lambda x: F.gelu(x, approximate=approximate), [x], "torch.nn.functional.gelu", "gelu_backward")


@pytest.mark.parametrize("device", DEVICES)
def test_silu(device: str) -> None:
    # bfloat16 on the CPU too: the backward of a SwiGLU MLP in bf16 was eight float32 kernels
    for dtype in {*_cases(device), torch.bfloat16}:
        x = torch.randn(4, 33, device=device, dtype=dtype, requires_grad=True)
        _check(F.silu, [x], "torch.nn.functional.silu", "silu_backward")


@pytest.mark.parametrize("device", DEVICES)
def test_relu(device: str) -> None:
    for dtype in _cases(device):
        x = torch.randn(4, 33, device=device, dtype=dtype, requires_grad=True)
        _check(F.relu, [x], "torch.nn.functional.relu", "relu_backward")


def test_relu_gradient_at_zero_and_nan_is_eagers() -> None:
    x = torch.tensor([0.0, float("nan"), -0.0, -1.0, 2.0], requires_grad=True)
    jitted = thunder.jit(F.relu, executors=["torch"])
    (actual,) = torch.autograd.grad(jitted(x), x, torch.ones(5))
    (expected,) = torch.autograd.grad(F.relu(x), x, torch.ones(5))
    torch.testing.assert_close(actual, expected, equal_nan=True)  # a NaN output passes its gradient


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_backward_applies_the_forwards_mask(device: str) -> None:
    for dtype in _cases(device):
        x = torch.randn(64, 33, device=device, dtype=dtype, requires_grad=True)
        jitted = thunder.jit(lambda x: F.dropout(x, 0.3, training=True), executors=["torch"])
        torch.manual_seed(7)
        actual = jitted(x)
        torch.manual_seed(7)
        expected = F.dropout(x, 0.3, training=True)  # the same mask: native_dropout draws as eager
        torch.testing.assert_close(actual, expected)
        cotangent = torch.randn_like(expected)
        (actual_grad,) = torch.autograd.grad(actual, x, cotangent)
        (expected_grad,) = torch.autograd.grad(expected, x, cotangent)
        torch.testing.assert_close(actual_grad, expected_grad)
        assert "= dropout_backward(" in str(thunder.last_backward_traces(jitted)[-1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "padding_idx, scale_grad_by_freq", [(None, False), (3, False), (None, True), (2, True)]
)
def test_embedding(device: str, padding_idx: int | None, scale_grad_by_freq: bool) -> None:
    index = torch.tensor([[1, 3, 3, 0], [2, 9, 1, 3]], device=device)  # repeated rows sum
    for dtype in _cases(device):
        weight = torch.randn(10, 8, device=device, dtype=dtype, requires_grad=True)

        def fn(i, w):
            return F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)

        _check(fn, [index, weight], "torch.nn.functional.embedding", "embedding_backward")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(device: str, reduction: str) -> None:
    for dtype in _cases(device):
        logits = torch.randn(10, 37, device=device, dtype=dtype, requires_grad=True)
        target = torch.randint(0, 37, (10,), device=device)
        target[3] = -100  # ignored

        def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            # half-precision logits go to the loss in float32, as language models do
            return F.cross_entropy(
                logits if logits.dtype == torch.float64 else logits.float(), target, reduction=reduction
            )

        # on CUDA the torch executor runs the Triton kernels (executors/triton/cross_entropy.py)
        prefix = "triton_" if device == "cuda" else ""
        _check(loss, [logits, target], f"{prefix}cross_entropy_with_lse", f"{prefix}cross_entropy_backward")


def test_cross_entropy_all_ignored_is_nan_like_eager() -> None:
    logits = torch.randn(3, 5, requires_grad=True)
    target = torch.full((3,), -100)
    expected = F.cross_entropy(logits, target)
    actual = thunder.jit(F.cross_entropy)(logits, target)
    assert expected.isnan() and actual.isnan()
