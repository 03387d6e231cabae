"""Sizes and dims in every form eager takes them, and only those, through ``thunder.jit``.

Eager's argument parser reads an int list given as ints one by one (``x.view(2, 3)``, ``x.view(4)``,
``torch.zeros(2, 3)``) where the list is the first argument after the tensor a method is called on,
or the first argument of a function; elsewhere (``torch.reshape(x, 4)``, ``torch.flip(x, 0, 1)``) it
refuses with a TypeError. A symbol takes the function's signature, and the frontend gathers the ints
of the method forms (``thunder.torch.registry.int_list_call``), so the torch executor runs a call
that every torch callable of the symbol accepts, and the function forms refuse what eager refuses.

Each case runs one jitted function twice, with different inputs, against eager: same values, dtype
and shape; for a view, a write through the result reaches the input as in eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import thunder
from thunder.core.proxies import DataDependentError

VECTOR = (4,)
MATRIX = (2, 3)
ROW = (1, 4)

# name: (function, shape of its one input, the result is a view of the input)
CASES: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...], bool]] = {
    # broadcast_to: Tensor.broadcast_to takes ints one by one, torch.broadcast_to a sequence
    "broadcast_to_int": (lambda x: x.broadcast_to(4), VECTOR, True),
    "broadcast_to_ints": (lambda x: x.broadcast_to(2, 4), VECTOR, True),
    "broadcast_to_minus_one": (lambda x: x.broadcast_to(-1), VECTOR, True),
    "broadcast_to_tuple": (lambda x: x.broadcast_to((2, 4)), VECTOR, True),
    "broadcast_to_keyword": (lambda x: x.broadcast_to(size=(2, 4)), VECTOR, True),
    "broadcast_to_class_method": (lambda x: torch.Tensor.broadcast_to(x, 4), VECTOR, True),
    "broadcast_to_function": (lambda x: torch.broadcast_to(x, torch.Size([2, 4])), VECTOR, True),
    "broadcast_to_function_keyword": (lambda x: torch.broadcast_to(x, size=(2, 4)), VECTOR, True),
    # expand
    "expand_int": (lambda x: x.expand(4), VECTOR, True),
    "expand_ints": (lambda x: x.expand(2, 4), VECTOR, True),
    "expand_minus_one": (lambda x: x.expand(2, -1), VECTOR, True),
    "expand_tuple": (lambda x: x.expand((2, 4)), VECTOR, True),
    "expand_list": (lambda x: x.expand([2, 4]), VECTOR, True),
    "expand_size": (lambda x: x.expand(torch.Size([2, 4])), VECTOR, True),
    "expand_keyword": (lambda x: x.expand(size=(2, 4)), VECTOR, True),
    "expand_class_method": (lambda x: torch.Tensor.expand(x, 2, 4), VECTOR, True),
    "expand_shape_unpacked": (lambda x: x.expand(2, *x.shape), VECTOR, True),
    # view and reshape
    "view_int": (lambda x: x.view(4), VECTOR, True),
    "view_minus_one": (lambda x: x.view(-1), MATRIX, True),
    "view_ints": (lambda x: x.view(3, 2), MATRIX, True),
    "view_tuple": (lambda x: x.view((3, 2)), MATRIX, True),
    "view_size": (lambda x: x.view(torch.Size([6])), MATRIX, True),
    "view_keyword": (lambda x: x.view(size=(6,)), MATRIX, True),
    "view_numpy_int": (lambda x: x.view(np.int64(4)), VECTOR, True),
    "view_shape_of_input": (lambda x: x.view(x.shape[0]), VECTOR, True),
    "reshape_int": (lambda x: x.reshape(4), VECTOR, True),
    "reshape_minus_one": (lambda x: x.reshape(-1), MATRIX, True),
    "reshape_ints": (lambda x: x.reshape(3, 2), MATRIX, True),
    "reshape_size": (lambda x: x.reshape(torch.Size([3, 2])), MATRIX, True),
    "reshape_keyword": (lambda x: x.reshape(shape=(6,)), MATRIX, True),
    "reshape_shape_unpacked": (lambda x: x.reshape(*x.shape), MATRIX, True),
    "reshape_function": (lambda x: torch.reshape(x, (3, 2)), MATRIX, True),
    "reshape_function_keyword": (lambda x: torch.reshape(x, shape=(6,)), MATRIX, True),
    # permute, flip
    "permute_int": (lambda x: x.permute(0), VECTOR, True),
    "permute_ints": (lambda x: x.permute(1, 0), MATRIX, True),
    "permute_tuple": (lambda x: x.permute((1, 0)), MATRIX, True),
    "permute_keyword": (lambda x: x.permute(dims=(1, 0)), MATRIX, True),
    "permute_function": (lambda x: torch.permute(x, (1, 0)), MATRIX, True),
    "flip_int": (lambda x: x.flip(0), VECTOR, False),
    "flip_ints": (lambda x: x.flip(0, 1), MATRIX, False),
    "flip_tuple": (lambda x: x.flip((0, 1)), MATRIX, False),
    "flip_keyword": (lambda x: x.flip(dims=(0,)), MATRIX, False),
    "flip_function": (lambda x: torch.flip(x, (1,)), MATRIX, False),
    "flip_class_method": (lambda x: torch.Tensor.flip(x, 0), VECTOR, False),
    # repeat, tile
    "repeat_int": (lambda x: x.repeat(2), VECTOR, False),
    "repeat_ints": (lambda x: x.repeat(2, 1), VECTOR, False),
    "repeat_tuple": (lambda x: x.repeat((2, 1)), VECTOR, False),
    "repeat_size": (lambda x: x.repeat(torch.Size([2, 1])), VECTOR, False),
    "repeat_keyword": (lambda x: x.repeat(repeats=(2,)), VECTOR, False),
    "tile_int": (lambda x: x.tile(2), VECTOR, False),
    "tile_ints": (lambda x: x.tile(2, 1), VECTOR, False),
    "tile_tuple": (lambda x: x.tile((2,)), VECTOR, False),
    "tile_keyword": (lambda x: x.tile(dims=(2,)), VECTOR, False),
    "tile_function": (lambda x: torch.tile(x, (2,)), VECTOR, False),
    "tile_function_keyword": (lambda x: torch.tile(x, dims=(2,)), VECTOR, False),
    # squeeze takes dims one by one too; unsqueeze, movedim, unflatten, flatten take what they take
    "squeeze_int": (lambda x: x.squeeze(0), ROW, True),
    "squeeze_ints": (lambda x: x.reshape(1, 1, 4).squeeze(0, 1), ROW, True),
    "squeeze_tuple": (lambda x: x.squeeze((0,)), ROW, True),
    "squeeze_function_tuple": (lambda x: torch.squeeze(x, (0,)), ROW, True),
    "unsqueeze": (lambda x: x.unsqueeze(0), VECTOR, True),
    "movedim": (lambda x: x.movedim(0, 1), MATRIX, True),
    "movedim_tuples": (lambda x: x.movedim((0,), (1,)), MATRIX, True),
    "unflatten": (lambda x: x.unflatten(0, (2, 2)), VECTOR, True),
    "unflatten_size": (lambda x: x.unflatten(0, torch.Size([2, -1])), VECTOR, True),
    "flatten": (lambda x: x.flatten(0), MATRIX, True),
    "sum_to_size_ints": (lambda x: x.sum_to_size(1, 3), MATRIX, False),
    "sum_to_size_int": (lambda x: x.sum_to_size(3), MATRIX, False),
    "sum_to_size_tuple": (lambda x: x.sum_to_size((1, 3)), MATRIX, False),
    # roll and reductions: an int is a dim, as in eager
    "roll_int": (lambda x: x.roll(1), MATRIX, False),
    "roll_int_dim": (lambda x: x.roll(1, 0), MATRIX, False),
    "sum_int": (lambda x: x.sum(0), MATRIX, False),
    "sum_tuple": (lambda x: x.sum((0, 1)), MATRIX, False),
    "std_int": (lambda x: x.std(0), MATRIX, False),
    "amax_int": (lambda x: x.amax(0), MATRIX, False),
    # factories: new_* methods and torch.zeros/ones/empty take ints one by one; full does not
    "new_zeros_int": (lambda x: x.new_zeros(4), VECTOR, False),
    "new_zeros_ints": (lambda x: x.new_zeros(2, 3), VECTOR, False),
    "new_zeros_size": (lambda x: x.new_zeros(torch.Size([2, 3])), VECTOR, False),
    "new_zeros_keyword": (lambda x: x.new_zeros(size=(2,)), VECTOR, False),
    "new_zeros_ints_dtype": (lambda x: x.new_zeros(2, 3, dtype=torch.int64), VECTOR, False),
    "new_zeros_class_method": (lambda x: torch.Tensor.new_zeros(x, 2, 3), VECTOR, False),
    "new_ones_ints": (lambda x: x.new_ones(2, 3), VECTOR, False),
    "new_ones_keyword": (lambda x: x.new_ones(size=(2,)), VECTOR, False),
    "new_full": (lambda x: x.new_full((2,), 1.0), VECTOR, False),
    "new_full_int_fill": (lambda x: x.new_full((2,), 1), VECTOR, False),
    "new_full_keywords": (lambda x: x.new_full(size=(2,), fill_value=1), VECTOR, False),
    "zeros_int": (lambda x: torch.zeros(4) + x, VECTOR, False),
    "zeros_ints": (lambda x: torch.zeros(2, 4) + x, VECTOR, False),
    "zeros_tuple": (lambda x: torch.zeros((2, 4)) + x, VECTOR, False),
    "zeros_keyword": (lambda x: torch.zeros(size=(4,)) + x, VECTOR, False),
    "zeros_shape_of_input": (lambda x: torch.zeros(x.shape), VECTOR, False),
    "zeros_empty_tuple": (lambda x: torch.zeros(()) + x.sum(), VECTOR, False),
    "zeros_ints_dtype": (lambda x: torch.zeros(2, 3, dtype=torch.int64), VECTOR, False),
    "ones_ints": (lambda x: torch.ones(2, 3), VECTOR, False),
    "ones_keyword": (lambda x: torch.ones(size=(4,)) + x, VECTOR, False),
    "full_int_fill": (lambda x: torch.full((2,), 1), VECTOR, False),  # int64, as eager
    "full_bool_fill": (lambda x: torch.full((2,), True), VECTOR, False),
    "full_size": (lambda x: torch.full(torch.Size([2]), 1.0), VECTOR, False),
    "full_keywords": (lambda x: torch.full(size=(2,), fill_value=1), VECTOR, False),
    # random factories: only the shape and dtype are compared
    "randn_int_shape": (lambda x: torch.randn(4).shape, VECTOR, False),
    "randn_ints_shape": (lambda x: torch.randn(2, 3).shape, VECTOR, False),
    "randn_keyword_shape": (lambda x: torch.randn(size=(2, 3)).shape, VECTOR, False),
    "rand_keyword_shape": (lambda x: torch.rand(size=(4,)).shape, VECTOR, False),
    "randint_keyword_shape": (lambda x: torch.randint(5, size=(4,)).shape, VECTOR, False),
    "randint_low_keyword_shape": (lambda x: torch.randint(0, 5, size=(4,)).shape, VECTOR, False),
    "randint_keywords_shape": (lambda x: torch.randint(low=1, high=5, size=(3,)).shape, VECTOR, False),
}

# eager's results without defined values: compared by shape and dtype
UNINITIALIZED: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...]]] = {
    "new_empty_int": (lambda x: x.new_empty(4), VECTOR),
    "new_empty_ints": (lambda x: x.new_empty(2, 3), VECTOR),
    "new_empty_keyword": (lambda x: x.new_empty(size=(2,)), VECTOR),
    "empty_int": (lambda x: torch.empty(4), VECTOR),
    "empty_ints": (lambda x: torch.empty(2, 3), VECTOR),
    "empty_keyword": (lambda x: torch.empty(size=(4,)), VECTOR),
    "randint_shape": (lambda x: torch.randint(0, 5, (2, 3)), VECTOR),
    "randn_ints": (lambda x: torch.randn(2, 3, dtype=torch.float64), VECTOR),
}

# forms eager refuses with a TypeError: thunder refuses them too
REFUSED: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...]]] = {
    "broadcast_to_function_int": (lambda x: torch.broadcast_to(x, 4), VECTOR),
    "broadcast_to_function_ints": (lambda x: torch.broadcast_to(x, 2, 4), VECTOR),
    "reshape_function_int": (lambda x: torch.reshape(x, 4), VECTOR),
    "reshape_function_minus_one": (lambda x: torch.reshape(x, -1), VECTOR),
    "reshape_function_ints": (lambda x: torch.reshape(x, 2, 2), VECTOR),
    "reshape_keyword_int": (lambda x: x.reshape(shape=4), VECTOR),
    "reshape_float": (lambda x: x.reshape((4.0,)), VECTOR),
    "reshape_function_float": (lambda x: torch.reshape(x, (4.0,)), VECTOR),
    "permute_function_int": (lambda x: torch.permute(x, 0), VECTOR),
    "permute_function_ints": (lambda x: torch.permute(x, 1, 0), MATRIX),
    "permute_keyword_int": (lambda x: x.permute(dims=0), VECTOR),
    "flip_function_int": (lambda x: torch.flip(x, 0), VECTOR),
    "flip_function_ints": (lambda x: torch.flip(x, 0, 1), MATRIX),
    "flip_keyword_int": (lambda x: x.flip(dims=0), VECTOR),
    "tile_function_int": (lambda x: torch.tile(x, 2), VECTOR),
    "tile_function_ints": (lambda x: torch.tile(x, 2, 1), VECTOR),
    "tile_keyword_int": (lambda x: x.tile(dims=2), VECTOR),
    "view_keyword_int": (lambda x: x.view(size=4), VECTOR),
    "view_float": (lambda x: x.view(4.0), VECTOR),
    "view_int_then_tuple": (lambda x: x.view(2, (2,)), VECTOR),
    "expand_keyword_int": (lambda x: x.expand(size=4), VECTOR),
    "expand_tuple_then_int": (lambda x: x.expand((2,), 4), VECTOR),
    "expand_int_then_tuple": (lambda x: x.expand(2, (4,)), VECTOR),
    "expand_bool": (lambda x: x.expand(True, 4), VECTOR),
    "repeat_keyword_int": (lambda x: x.repeat(repeats=2), VECTOR),
    "repeat_int_then_tuple": (lambda x: x.repeat(2, (1,)), VECTOR),
    "new_zeros_keyword_int": (lambda x: x.new_zeros(size=2), VECTOR),
    "new_zeros_tuple_then_int": (lambda x: x.new_zeros((2,), 3), VECTOR),
    "new_full_int": (lambda x: x.new_full(2, 1.0), VECTOR),
    "zeros_keyword_int": (lambda x: torch.zeros(size=4), VECTOR),
    "zeros_float": (lambda x: torch.zeros(2.0), VECTOR),
    "zeros_tuple_then_int": (lambda x: torch.zeros((2,), 3), VECTOR),
    "full_int": (lambda x: torch.full(2, 1.0), VECTOR),
    "randint_int_size": (lambda x: torch.randint(5, 4), VECTOR),
    "unflatten_int": (lambda x: x.unflatten(0, 4), VECTOR),
    "flatten_tuple": (lambda x: x.flatten((0,)), MATRIX),
    "sum_keepdim_int": (lambda x: x.sum(0, 1), MATRIX),
}

# eager reads a size or dim from a tensor's data: thunder refuses with its data-dependent error
FROM_DATA: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "view": lambda x, n: x.view(n),
    "reshape": lambda x, n: x.reshape(n),
    "reshape_function": lambda x, n: torch.reshape(x, (n,)),
    "expand": lambda x, n: x.expand(n, 4),
    "repeat": lambda x, n: x.repeat(n),
    "zeros": lambda x, n: torch.zeros(n),
    "new_zeros": lambda x, n: x.new_zeros(n),
    "sum_dim": lambda x, n: x.sum(n - 4),
    "amax_dim": lambda x, n: x.amax(n - 4),
    "squeeze_dim": lambda x, n: torch.squeeze(x, n - 4),
    "flip_dim": lambda x, n: x.flip(n - 4),
}


def _inputs(shape: tuple[int, ...], call: int) -> torch.Tensor:
    return torch.arange(float(np.prod(shape))).reshape(shape) + 10 * call


def _same(ours: Any, theirs: Any, *, values: bool = True) -> None:
    if not isinstance(theirs, torch.Tensor):
        assert ours == theirs
        return
    assert isinstance(ours, torch.Tensor)
    assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)
    if values:
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_size_forms_match_eager(name: str) -> None:
    fn, shape, is_view = CASES[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        x, y = _inputs(shape, call), _inputs(shape, call)
        ours, theirs = jfn(x), fn(y)
        _same(ours, theirs)
        if is_view:  # a write through the result reaches the input, as in eager
            ours[(0,) * ours.ndim] = -1.0
            theirs[(0,) * theirs.ndim] = -1.0
            torch.testing.assert_close(x, y, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(UNINITIALIZED))
def test_size_forms_of_uninitialized_results_match_eager(name: str) -> None:
    fn, shape = UNINITIALIZED[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        _same(jfn(_inputs(shape, call)), fn(_inputs(shape, call)), values=False)


@pytest.mark.parametrize("name", list(REFUSED))
def test_forms_eager_refuses_stay_refused(name: str) -> None:
    fn, shape = REFUSED[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        with pytest.raises(TypeError):
            fn(_inputs(shape, call))
        with pytest.raises(TypeError):
            jfn(_inputs(shape, call))


@pytest.mark.parametrize("name", list(FROM_DATA))
def test_sizes_read_from_tensors_are_refused_by_name(name: str) -> None:
    fn = FROM_DATA[name]
    jfn = thunder.jit(fn)
    for call in range(2):
        x, n = _inputs(VECTOR, call), torch.tensor(4)
        fn(x, n)  # eager reads the tensor's value
        with pytest.raises(DataDependentError, match="tensor"):
            jfn(x, n)
