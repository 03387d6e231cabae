"""Gradients of torch.nn.functional ops and the matmul family through ``thunder.jit``, against eager.

Each case builds float64 inputs that require grad, runs the function jitted and eagerly, and
compares the outputs and the gradients of every input for a random output cotangent. The cases
exercise the gradient rules of the prims and symbols of this family (convolution, the
normalizations, attention, embedding) as well as decompositions differentiated step by step.
Also here: the forward checks the OpInfo suite cannot do (F.embedding's argument order, attention
against the math reference, the statistics of the dropout variants).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

torch.manual_seed(0)


def _t(*shape: int, requires_grad: bool = True, low: float | None = None) -> torch.Tensor:
    t = torch.randn(*shape, dtype=torch.float64)
    if low is not None:
        t = t.abs() + low
    return t.requires_grad_(requires_grad)


def _idx(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape)


# name: (function, arguments factory)
CASES: dict[str, tuple[Callable, Callable[[], tuple]]] = {
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2), lambda: (_t(2, 4, 9), _t(6, 4, 3), _t(6))),
    "conv2d_groups": (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2), lambda: (_t(2, 4, 7, 6), _t(6, 2, 3, 3), _t(6))),
    "conv2d_same": (lambda x, w: F.conv2d(x, w, padding="same", dilation=2), lambda: (_t(1, 3, 6, 7), _t(2, 3, 2, 3))),
    "conv3d": (lambda x, w: F.conv3d(x, w, stride=2, padding=(1, 0, 1)), lambda: (_t(1, 2, 5, 6, 5), _t(3, 2, 3, 2, 3))),
    "conv2d_unbatched": (lambda x, w: F.conv2d(x, w), lambda: (_t(3, 5, 5), _t(2, 3, 2, 2))),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2), lambda: (_t(2, 4, 5), _t(4, 3, 4), _t(3))),
    "conv_transpose2d_groups": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
                                lambda: (_t(2, 4, 4, 5), _t(4, 3, 3, 3))),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2), lambda: (_t(1, 2, 3, 3, 2), _t(2, 2, 2, 2, 2))),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4, 5), w, b), lambda: (_t(3, 4, 5), _t(4, 5), _t(4, 5))),
    "layer_norm_no_affine": (lambda x: F.layer_norm(x, (5,)), lambda: (_t(3, 4, 5),)),
    "rms_norm": (lambda x, w: F.rms_norm(x, (5,), w, eps=1e-6), lambda: (_t(3, 4, 5), _t(5))),
    "rms_norm_default_eps": (lambda x: F.rms_norm(x, (4, 5)), lambda: (_t(3, 4, 5),)),
    "group_norm": (lambda x, w, b: F.group_norm(x, 3, w, b), lambda: (_t(2, 6, 4, 3), _t(6), _t(6))),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), lambda: (_t(4, 3, 5), _t(3), _t(3))),
    "batch_norm_eval": (lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
                        lambda: (_t(4, 3, 2, 2), _t(3, requires_grad=False), _t(3, requires_grad=False, low=0.5), _t(3), _t(3))),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), lambda: (_t(2, 3, 6), _t(3), _t(3))),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3), lambda: (_t(2, 5, 4),)),
    "normalize": (lambda x: F.normalize(x, p=3.0, dim=-1), lambda: (_t(3, 4),)),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b, dim=-1), lambda: (_t(3, 4), _t(1, 4))),
    "embedding": (lambda w, i: F.embedding(i, w, padding_idx=1), lambda: (_t(6, 4), _idx(6, 3, 5))),
    "embedding_freq": (lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), lambda: (_t(6, 4), _idx(6, 12))),
    "embedding_bag_mean": (lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"),
                           lambda: (_t(7, 3), _idx(7, 9), torch.tensor([0, 2, 2, 6]))),
    "embedding_bag_max": (lambda w, i: F.embedding_bag(i, w, mode="max"), lambda: (_t(7, 3), _idx(7, 4, 3))),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda: (_t(2, 3, 4, 8), _t(2, 3, 6, 8), _t(2, 3, 6, 5))),
    "sdpa_causal_scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
                          lambda: (_t(2, 5, 4), _t(2, 5, 4), _t(2, 5, 4))),
    "sdpa_float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                        lambda: (_t(2, 2, 3, 4), _t(2, 2, 5, 4), _t(2, 2, 5, 4), _t(3, 5))),
    "sdpa_bool_mask_broadcast": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor([True, False, True, True, False])),
                                 lambda: (_t(3, 4), _t(2, 5, 4), _t(2, 5, 6))),
    "sdpa_fully_masked_row": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor([[True, False], [False, False], [True, True]])),
                              lambda: (_t(2, 3, 4), _t(2, 2, 4), _t(2, 2, 3))),
    "sdpa_gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), lambda: (_t(1, 4, 3, 8), _t(1, 2, 5, 8), _t(1, 2, 5, 8))),
    "sdpa_gqa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                        lambda: (_t(2, 6, 5, 8), _t(2, 2, 5, 8), _t(2, 2, 5, 8))),  # flash's pair, heads repeated
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], lambda: (_t(2, 3, 7, 6),)),
    "max_pool1d_dilated": (lambda x: F.max_pool1d(x, 2, 1, dilation=2, ceil_mode=True), lambda: (_t(2, 3, 8),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 1, 1, count_include_pad=False), lambda: (_t(1, 2, 4, 3, 5),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), lambda: (_t(2, 3, 7, 6),)),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 3), lambda: (_t(2, 3, 7),)),
    "interpolate_bilinear": (lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear"), lambda: (_t(1, 2, 4, 5),)),
    "interpolate_bicubic": (lambda x: F.interpolate(x, size=(6, 3), mode="bicubic", align_corners=True), lambda: (_t(1, 2, 4, 5),)),
    "interpolate_nearest": (lambda x: F.interpolate(x, size=(7,)), lambda: (_t(1, 2, 4),)),
    "pad_reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), lambda: (_t(2, 3, 4, 5),)),
    "pad_circular": (lambda x: F.pad(x, (2, -1), mode="circular"), lambda: (_t(2, 3, 4),)),
    "pad_constant": (lambda x: F.pad(x, (2, -1, 0, 1), value=3.0), lambda: (_t(2, 3, 4),)),
    "unfold": (lambda x: F.unfold(x, (2, 3), padding=1, stride=2), lambda: (_t(2, 3, 5, 6),)),
    "fold": (lambda x: F.fold(x, (5, 7), (2, 3), dilation=2, padding=1, stride=(1, 2)), lambda: (_t(2, 18, 15),)),
    "lp_pool2d": (lambda x: F.lp_pool2d(x, 2.0, 3, 2), lambda: (_t(2, 3, 7, 8, low=0.1),)),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), lambda: (_t(2, 8, 3, 3),)),
    "cross_entropy_smoothing": (lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=2, label_smoothing=0.2),
                                lambda: (_t(5, 4, 3), _idx(4, 5, 3), _t(4, low=0.1, requires_grad=False))),
    "cross_entropy_probabilities": (lambda x, t: F.cross_entropy(x, t.softmax(1), label_smoothing=0.1), lambda: (_t(5, 4), _t(5, 4))),
    "nll_loss_nd": (lambda x, t: F.nll_loss(x, t, reduction="sum"), lambda: (_t(2, 4, 3, 3), _idx(4, 2, 3, 3))),
    "bce_with_logits": (lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw), lambda: (_t(4, 3), torch.rand(4, 3, dtype=torch.float64), _t(3, low=0.5, requires_grad=False))),
    "bce": (lambda x, t: F.binary_cross_entropy(x.sigmoid(), t), lambda: (_t(4, 3), torch.rand(4, 3, dtype=torch.float64))),
    "kl_div": (lambda x, t: F.kl_div(x.log_softmax(-1), t, reduction="batchmean"), lambda: (_t(4, 3), torch.rand(4, 3, dtype=torch.float64))),
    "huber_smooth_l1": (lambda x, t: F.huber_loss(x, t, delta=0.5) + F.smooth_l1_loss(x, t, beta=0.7), lambda: (_t(4, 3), _t(4, 3))),
    "triplet_margin": (lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True), lambda: (_t(4, 3), _t(4, 3), _t(4, 3))),
    "activations": (lambda x: F.mish(x) + F.elu(x, 0.5) + F.selu(x) + F.hardswish(x) + F.softplus(x, 2.0, 1.0) + F.logsigmoid(x)
                    + F.glu(x, 0).sum() + F.leaky_relu(x, 0.2) + F.softsign(x) + F.celu(x, 1.5), lambda: (_t(4, 5),)),
    "prelu": (lambda x, w: F.prelu(x, w), lambda: (_t(2, 3, 4), _t(3))),
    "addmm_baddbmm": (lambda a, b, c, d: torch.addmm(a, b, c, beta=0.5, alpha=2.0).sum() + torch.baddbmm(a, d, d.mT, alpha=0.3).sum(),
                      lambda: (_t(3, 3), _t(3, 4), _t(4, 3), _t(2, 3, 3))),
    "einsum_diagonal_ellipsis": (lambda a, b: torch.einsum("...ii,...ij->...j", a, b), lambda: (_t(2, 3, 3), _t(3, 4))),
    "tensordot_kron": (lambda a, b: torch.tensordot(a, b, ([1, 0], [0, 2])).sum() + torch.kron(a, b[0]).sum(), lambda: (_t(3, 2), _t(2, 4, 3))),
    "grid_sample_bilinear_border": (lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=False),
                                    lambda: (_t(2, 3, 4, 5), (torch.rand(2, 3, 6, 2, dtype=torch.float64) * 2.4 - 1.2).requires_grad_())),
    "grid_sample_bicubic_reflection": (lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="reflection"),
                                       lambda: (_t(1, 2, 4, 4), (torch.rand(1, 3, 2, 2, dtype=torch.float64) * 2.4 - 1.2).requires_grad_())),
    "pdist_cdist": (lambda x, y: F.pdist(x, 1.5).sum() + torch.cdist(x, y).sum(), lambda: (_t(5, 3), _t(4, 3))),
    "native_layer_norm": (lambda x, w: torch.native_layer_norm(x, (3,), w, None, 1e-5)[0], lambda: (_t(4, 3), _t(3))),
    "max_unpool2d": (lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), lambda: (_t(1, 2, 4, 6),)),
    "multi_margin_losses": (lambda x, t: F.multi_margin_loss(x, t, p=2) + F.multilabel_margin_loss(x, torch.tensor([[1, 0, -1, 2], [3, -1, 0, 0]])),
                            lambda: (_t(2, 4), _idx(4, 2))),
    "linear_cross_entropy": (lambda x, w, t: F.linear_cross_entropy(x, w, t, label_smoothing=0.1), lambda: (_t(5, 3), _t(4, 3), _idx(4, 5))),
    "bilinear": (lambda x, y, w, b: F.bilinear(x, y, w, b), lambda: (_t(4, 3), _t(4, 2), _t(5, 3, 2), _t(5))),
}  # fmt: skip


def _compare(fn: Callable, args: tuple) -> None:
    expected = fn(*args)
    actual = thunder.jit(fn)(*args)
    torch.testing.assert_close(actual, expected)
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    cotangent = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, inputs, cotangent, allow_unused=True)
    actual_grads = torch.autograd.grad(actual, inputs, cotangent, allow_unused=True)
    for index, (a, e) in enumerate(zip(actual_grads, expected_grads)):
        torch.testing.assert_close(a, e, msg=lambda m: f"gradient of input {index}: {m}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_eager(name: str) -> None:
    fn, make_args = CASES[name]
    torch.manual_seed(1)
    _compare(fn, make_args())


def test_batch_norm_running_stats_match_eager() -> None:
    import thunder.torch as ltorch
    from thunder.core import pipeline
    from thunder.core.direct_frontend import direct_frontend

    x = torch.randn(6, 3, 4)
    mean, var = torch.randn(3), torch.rand(3) + 0.5
    expected_mean, expected_var = mean.clone(), var.clone()
    F.batch_norm(x, expected_mean, expected_var, training=True, momentum=0.3)
    jitted = pipeline.jit(
        lambda *a: ltorch.batch_norm_running_stats(*a, momentum=0.3), frontend=direct_frontend
    )
    new_mean, new_var = jitted(x, mean, var)
    torch.testing.assert_close(new_mean, expected_mean)
    torch.testing.assert_close(new_var, expected_var)


@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}, {"sparse": True}])
def test_embedding_forward(kwargs: dict) -> None:
    weight, indices = torch.randn(5, 3), torch.randint(0, 5, (4, 2))
    torch.testing.assert_close(
        thunder.jit(F.embedding)(indices, weight, **kwargs), F.embedding(indices, weight, **kwargs)
    )


def test_embedding_refuses_max_norm() -> None:
    with pytest.raises(NotImplementedError, match="max_norm"):
        thunder.jit(lambda i, w: F.embedding(i, w, max_norm=1.0))(torch.tensor([0, 1]), torch.randn(3, 2))


def test_sdpa_forward_matches_math_reference() -> None:
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    mask = torch.rand(5, 7) > 0.3
    mask[:, 0] = True
    expected = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True
    )
    actual = thunder.jit(lambda *a: F.scaled_dot_product_attention(*a, attn_mask=mask, enable_gqa=True))(
        q, k, v
    )
    torch.testing.assert_close(actual, expected.float(), atol=1e-4, rtol=1e-4)


def test_sdpa_dropout_statistics() -> None:
    q = k = torch.zeros(1, 1, 200, 4)
    v = torch.ones(1, 1, 200, 300)
    out = thunder.jit(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.25))(q, k, v)
    # uniform attention over 200 keys, each kept with probability 0.75 and rescaled: mean 1
    assert math.isclose(out.mean().item(), 1.0, abs_tol=0.02)
    assert out.std().item() > 0.01


@pytest.mark.parametrize(
    ("fn", "shape", "mask_dims"),
    [
        (F.dropout1d, (40, 50, 7), 2),
        (F.dropout2d, (40, 50, 3, 3), 2),
        (F.dropout3d, (40, 50, 2, 2, 2), 2),
        (F.dropout2d, (50, 30, 3), 2),  # a 3-d input is (N, C, L), as eager assumes
    ],
)
def test_channel_dropout_statistics(fn: Callable, shape: tuple, mask_dims: int) -> None:
    x = torch.rand(shape) + 0.5
    out = thunder.jit(lambda x: fn(x, 0.3, True))(x)
    zero_channels = (out == 0).flatten(mask_dims).all(-1)
    kept = ~zero_channels
    assert math.isclose(zero_channels.float().mean().item(), 0.3, abs_tol=0.08)
    torch.testing.assert_close(out[kept], x[kept] / 0.7)


@pytest.mark.parametrize("fn", [F.alpha_dropout, F.feature_alpha_dropout])
def test_alpha_dropout_keeps_mean_and_variance(fn: Callable) -> None:
    x = torch.randn(400, 300, 1)
    out = thunder.jit(lambda x: fn(x, 0.2, True))(x)
    assert math.isclose(out.mean().item(), 0.0, abs_tol=0.05)
    assert math.isclose(out.std().item(), 1.0, abs_tol=0.05)
    torch.testing.assert_close(thunder.jit(lambda x: fn(x, 0.2, False))(x), x)


def test_small_cnn_training_step_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.GroupNorm(2, 8),
        torch.nn.SiLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
        torch.nn.LayerNorm([8, 3, 3]),
        torch.nn.Hardswish(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Dropout(0.0),
        torch.nn.Linear(8, 5),
    ).double()
    x, target = torch.randn(4, 3, 12, 12, dtype=torch.float64), torch.randint(0, 5, (4,))

    def step(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(x), target, label_smoothing=0.1)

    expected = step(model, x)
    expected_grads = torch.autograd.grad(expected, list(model.parameters()))
    jitted = thunder.jit(model)
    actual = F.cross_entropy(jitted(x), target, label_smoothing=0.1)
    actual_grads = torch.autograd.grad(actual, list(model.parameters()))
    torch.testing.assert_close(actual, expected)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e)


MODULES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], tuple]]] = {
    "conv1d_bn_eval": (lambda: torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3, padding="same"), torch.nn.BatchNorm1d(4)).eval(),
                       lambda: (_t(2, 3, 7),)),
    "conv_transpose2d": (lambda: torch.nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1), lambda: (_t(2, 3, 4, 4),)),
    "instance_norm": (lambda: torch.nn.InstanceNorm1d(3, affine=True), lambda: (_t(2, 3, 6),)),
    "rms_norm": (lambda: torch.nn.RMSNorm(5), lambda: (_t(2, 3, 5),)),
    "embedding": (lambda: torch.nn.Embedding(7, 3, padding_idx=0), lambda: (_idx(7, 2, 5),)),
    "embedding_bag": (lambda: torch.nn.EmbeddingBag(7, 3, mode="sum"), lambda: (_idx(7, 2, 5),)),
    "pooling": (lambda: torch.nn.Sequential(torch.nn.MaxPool2d(2, ceil_mode=True), torch.nn.AdaptiveMaxPool2d((2, 3)),
                                            torch.nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.AvgPool2d(2)),
                lambda: (_t(2, 3, 9, 8),)),
    "pixel_shuffle": (lambda: torch.nn.Sequential(torch.nn.PixelShuffle(2), torch.nn.PixelUnshuffle(2)), lambda: (_t(1, 8, 3, 3),)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_matches_eager(name: str) -> None:
    make_module, make_args = MODULES[name]
    torch.manual_seed(2)
    module = make_module().double()
    args = make_args()
    expected = module(*args)
    actual = thunder.jit(module)(*args)
    expected, actual = (out[0] if isinstance(out, tuple) else out for out in (expected, actual))
    torch.testing.assert_close(actual, expected)
    inputs = [a for a in args if a.requires_grad] + [p for p in module.parameters() if p.requires_grad]
    cotangent = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, inputs, cotangent, allow_unused=True)
    actual_grads = torch.autograd.grad(actual, inputs, cotangent, allow_unused=True)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e)
