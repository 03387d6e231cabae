"""The torch language: thunder symbols for PyTorch's operators, printed as ``ltorch.<name>``.

Each symbol is written in terms of other symbols and, at the bottom, prims; the frontend calls
them in place of the torch callables they are registered for (``callable_for``), and proxies call
them for their methods and operators.
"""

# The import order is deliberate, not alphabetical (isort is off for this file): importing the submodule
# thunder.torch.dropout rebinds the name `dropout`, which the import from thunder.torch.nn below it takes
# back, and inplace and elementwise_vjp register after every symbol.
# isort: skip_file
from thunder.torch.nn import (
    bmm,
    cross_entropy,
    cross_entropy_backward,
    cross_entropy_with_lse,
    dropout,
    gelu,
    gelu_backward,
    linear,
    log_softmax,
    matmul,
    mm,
    nll_loss,
    relu,
    relu_backward,
    sigmoid,
    softmax,
)  # fmt: skip
from thunder.torch.linalg import (
    addbmm, addmm, addmv, addr, baddbmm, bilinear, dot, einsum, inner, kron, multi_dot, mv, outer, tensordot, vdot,
    vecdot,
)  # fmt: skip
from thunder.torch.normalization import (
    batch_norm, batch_norm_running_stats, cdist, cosine_similarity, group_norm, instance_norm, layer_norm,
    layer_norm_backward, layer_norm_with_statistics, local_response_norm, native_group_norm, native_layer_norm, normalize, pairwise_distance, pdist, rms_norm,
    rms_norm_backward, rms_norm_with_rstd,
)  # fmt: skip
from thunder.torch.convolution import (
    conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
)  # fmt: skip
from thunder.torch.pooling import (
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d,
    adaptive_max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool2d, max_pool3d, max_unpool1d,
    max_unpool2d, max_unpool3d,
)  # fmt: skip
from thunder.torch.losses import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss, hinge_embedding_loss, huber_loss,
    kl_div, l1_loss, linear_cross_entropy, margin_ranking_loss, mse_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, poisson_nll_loss, smooth_l1_loss,
    soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
)  # fmt: skip
from thunder.torch.padding import pad
from thunder.torch.resampling import (
    channel_shuffle, col2im, grid_sample, grid_sampler_2d, grid_sampler_3d, im2col, interpolate, pixel_shuffle, pixel_unshuffle, upsample_bilinear, upsample_nearest,
)  # fmt: skip
from thunder.torch.embedding import embedding, embedding_backward, embedding_bag, one_hot
from thunder.torch.attention import (
    attention,
    attention_backward,
    attention_with_lse,
    scaled_dot_product_attention,
)
from thunder.torch.fused_losses import linear_cross_entropy_loss, linear_cross_entropy_with_grads
from thunder.torch.grouped_linear import linears
from thunder.torch.norm_linears import rms_norm_linears
from thunder.torch.gated_linears import gated_linears
from thunder.torch.dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from thunder.torch.nn import dropout  # noqa: E402,F811 -- importing the submodule thunder.torch.dropout rebinds the name
from thunder.torch.activations import (
    celu, elu, glu, hardshrink, hardsigmoid, hardswish, hardtanh, leaky_relu, logsigmoid, mish, prelu, relu6,
    rrelu, selu, silu, silu_backward, softmin, softplus, softshrink, softsign, tanhshrink, threshold,
)  # fmt: skip

# ops A modules: begin
from thunder.torch.elementwise import (  # noqa: A004
    abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_left_shift, bitwise_not,
    bitwise_or, bitwise_right_shift, bitwise_xor, ceil, clamp, clamp_max, clamp_min, copysign, cos, cosh, div,
    eq, erf, erfc, exp, exp2, expm1, floor, floor_divide, fmax, fmin, fmod, gcd, ge, gt, hypot, isfinite,
    isnan, lcm, le, log, log10, log1p, log2, lt, maximum, minimum, mul, ne, neg, nextafter, positive, pow,
    reciprocal, remainder, round, rsqrt, sign, signbit, sin, sinh, sqrt, sub, tan, tanh, tensor_where,
    true_divide, trunc, where,
)  # fmt: skip
from thunder.torch.pointwise import (  # noqa: A004
    addcdiv, addcmul, angle, conj, conj_physical, deg2rad, float_power, frac, heaviside, isclose, isinf,
    isneginf, isposinf, isreal, ldexp, lerp, logaddexp, logaddexp2, logical_and, logical_not, logical_or,
    logical_xor, imag, nan_to_num, rad2deg, real, resolve_conj, resolve_neg, rsub, sgn, square,
)  # fmt: skip
from thunder.torch.special import (  # noqa: A004
    airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, chebyshev_polynomial_t, chebyshev_polynomial_u,
    chebyshev_polynomial_v, chebyshev_polynomial_w, digamma, entr, erfcx, erfinv, hermite_polynomial_h,
    hermite_polynomial_he, i0, i0e, i1, i1e, igamma, igammac, laguerre_polynomial_l, legendre_polynomial_p,
    lgamma, log_ndtr, logit, modified_bessel_i0, modified_bessel_i1, modified_bessel_k0, modified_bessel_k1,
    mvlgamma, ndtr, ndtri, polygamma, scaled_modified_bessel_k0, scaled_modified_bessel_k1,
    shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w, sinc, spherical_bessel_j0, tensor_polygamma, xlog1py, xlogy, zeta,
)  # fmt: skip
from thunder.torch.reductions import (  # noqa: A004
    all, amax, amin, aminmax, any, argmax, argmin, count_nonzero, logsumexp, max, mean, min, nanmean, nansum,
    prod, std, std_mean, sum, var, var_mean,
)  # fmt: skip
from thunder.torch.sorting import (  # noqa: A004
    argsort, cumprod, cumsum, kthvalue, median, msort, nanmedian, sort, topk,
)  # fmt: skip
from thunder.torch.norms import (  # noqa: A004
    dist, linalg_norm, matrix_norm, norm, renorm, vector_norm,
)  # fmt: skip
from thunder.torch.shape import (  # noqa: A004
    T, cat, contiguous, expand, flatten, getitem, mT, permute, reshape, squeeze, stack, t, transpose, unbind,
    unsqueeze, view,
)  # fmt: skip
from thunder.torch.views import (  # noqa: A004
    alias_copy, atleast_1d, atleast_2d, atleast_3d, broadcast_tensors, broadcast_to, chunk, diagonal, dsplit,
    expand_as, expand_copy, hsplit, linalg_diagonal, movedim, narrow, ravel, reshape_as, select, split,
    split_with_sizes, sum_to_size, swapdims, tensor_split, unflatten, unfold, view_as, vsplit,
)  # fmt: skip
from thunder.torch.arrange import (  # noqa: A004
    block_diag, cartesian_prod, column_stack, diag, diag_embed, diagflat, dstack, flip, fliplr, flipud,
    hstack, meshgrid, repeat, repeat_interleave, roll, rot90, tile, tril, triu, vstack,
)  # fmt: skip
from thunder.torch.indexing import (  # noqa: A004
    diagonal_scatter, gather, index_add, index_copy, index_fill, index_put, index_select, masked_fill,
    masked_scatter, masked_select, put, scatter, scatter_add, scatter_reduce, select_scatter, setitem,
    slice_scatter, take, take_along_dim,
)  # fmt: skip
from thunder.torch.misc import (  # noqa: A004
    H, clone, cummax, cummin, cumulative_trapezoid, diff, fill, index_reduce, isin, mH, narrow_copy, trace,
    trapezoid, trapz,
)  # fmt: skip
from thunder.torch.creation import (  # noqa: A004
    arange, as_tensor, empty, empty_like, empty_permuted, empty_strided, eye, full, full_like, linspace, logspace, new_empty,
    new_empty_strided, new_full, new_ones, new_zeros, ones, ones_like, scalar_tensor, tensor, zeros, zeros_like,
)  # fmt: skip
from thunder.torch.randomness import (
    bernoulli, dropout_backward, multinomial, native_dropout, normal, rand, rand_like, randint, randint_like, randn, randn_like, randperm,
)  # fmt: skip
from thunder.torch.conversions import (  # noqa: A004
    bfloat16, bool, byte, cdouble, cfloat, char, double, float, half, int, long, short, to, type, type_as,
)  # fmt: skip

# ops A modules: end
from thunder.torch.reflected import (
    radd, rbitwise_and, rbitwise_or, rbitwise_xor, rdiv, rfloordiv, rmatmul, rmod, rmul, rpow,
)  # fmt: skip
from thunder.torch.linalg import cross, linalg_cross, vander
from thunder.torch.arrange import combinations
from thunder.torch.padding import constant_pad_nd
from thunder.torch.activations import safe_softmax, softmax_backward_data
from thunder.torch.losses import gaussian_nll_loss
from thunder.torch.views import aten_slice
from thunder.torch.indexing import unsafe_masked_index, unsafe_masked_index_put_accumulate
from thunder.torch.arrange import chunk_cat
from thunder.torch.masked import (
    masked_amax, masked_amin, masked_argmax, masked_argmin, masked_cumprod, masked_cumsum, masked_log_softmax,
    masked_logaddexp, masked_logsumexp, masked_mean, masked_median, masked_norm, masked_normalize, masked_prod,
    masked_softmax, masked_softmin, masked_std, masked_sum, masked_var,
)  # fmt: skip
from thunder.torch.windows import (
    window_bartlett, window_blackman, window_cosine, window_exponential, window_gaussian, window_general_cosine,
    window_general_hamming, window_hamming, window_hann, window_kaiser, window_nuttall,
)  # fmt: skip
from thunder.torch.statistics import (
    bucketize, corrcoef, cov, histc, logcumsumexp, mode, nanquantile, quantile, searchsorted,
)  # fmt: skip
from thunder.torch.grad import detach
from thunder.torch.registry import callable_for, symbol_for, torch_callables, torchsymbol

__all__ = [name for name in dir() if not name.startswith("_")]

# In-place methods (x.add_), x[key] = v and the out=/inplace= forms: registered after every symbol.
from thunder.torch import inplace as _inplace  # noqa: E402,F401

# Gradient rules that keep arithmetic on floating-point tensors as single calls in training traces.
from thunder.torch import elementwise_vjp as _elementwise_vjp  # noqa: E402,F401
