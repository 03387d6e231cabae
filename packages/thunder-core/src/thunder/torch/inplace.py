"""In-place and ``out=`` forms of the torch language, functionalized (see ``thunder.core.inplace``).

Every in-place form maps to an out-of-place one, from tables:

- tensor methods ``x.foo_(...)`` (and ``x += y`` through ``__iadd__``): the method ``foo``, then the
  result is written into ``x``; ``IN_PLACE_METHODS`` lists the exceptions (``copy_``, ``zero_``,
  ``fill_``, the random fills) and ``SHAPE_CHANGING`` the ones that cannot be functionalized;
- functions ``torch.foo_``, ``F.foo_``: the function ``foo``;
- ``out=`` and ``inplace=True`` arguments: the call without them, written into ``out`` / the input;
- ``x[key] = v``: the view ``x[key]`` of the key's basic part written with ``v``, through
  ``index_put`` for the key's tensors, as eager does (``thunder.torch.index_keys``);
- ``F.batch_norm`` in training mode with running statistics: the normalization without them, plus
  the running-statistics update written into the buffers (under no_grad, as eager does).

An out-of-place form thunder has no symbol for runs as a fallback (``thunder.core.fallback``).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from thunder.core import dtypes, fallback
from thunder.core.inplace import current, mutate, resize
from thunder.core.proxies import NumberProxy, TensorProxy, register_tensor_method, tensor_method
from thunder.core.pytree import tree_leaves
from thunder.core.write_overlap import OVERLAP_MESSAGE, SameView, check_write_overlap
from thunder.torch.eager_dtypes import check_eager_dtypes
from thunder.torch.foreach import foreach_lookaside
from thunder.torch.index_keys import parse_key, put, value_of_write
from thunder.torch.randomness import random_lookaside
from thunder.torch.registry import callable_for, symbol_for
from thunder.torch.stand_ins import error_on_stand_ins

__all__ = ["torch_lookaside", "setitem", "IN_PLACE_METHODS", "SHAPE_CHANGING"]


def _functional(torch_fn: Any) -> Callable:
    """The thunder symbol of ``torch_fn``, or its fallback."""
    symbol = callable_for(torch_fn)
    if symbol is not None:
        return symbol
    return lambda *args, **kwargs: fallback.call(torch_fn, args, kwargs)


def _method(name: str) -> Callable:
    """The proxy method ``name`` (from the torch language), else the fallback of ``torch.Tensor.name``."""
    try:
        return tensor_method(name)
    except NotImplementedError:
        torch_fn = getattr(torch.Tensor, name, None)
        if torch_fn is None:
            raise
        return _functional(torch_fn)


# ---------------------------------------------------------------------------------------------
# Tensor methods


def _fill(a: TensorProxy, value: Any) -> Any:
    if isinstance(value, TensorProxy) and value.ndim != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
        )
    return value


def _random_fill(name: str) -> Callable:
    """``x.uniform_(...)`` as a fallback of ``torch.empty_like(x).uniform_(...)``: reads no input."""

    def fresh(a: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return getattr(torch.empty_like(a), name)(*args, **kwargs)

    fresh.__name__ = fresh.__qualname__ = f"random_{name.rstrip('_')}"
    fresh.__module__ = __name__
    globals()[fresh.__name__] = fresh
    return lambda a, *args, **kwargs: fallback.call(fresh, (a, *args), kwargs)


def _copied(a: TensorProxy, src: Any) -> Any:
    """``a.copy_(src)`` converts any dtype, as eager's does (a float into an integer tensor truncates),
    where an in-place op's result must be castable to ``a``'s dtype."""
    if isinstance(src, TensorProxy) and isinstance(a, TensorProxy) and src.dtype != a.dtype:
        return tensor_method("to")(src, a.dtype)
    return src


# in-place method -> the value it writes, when that is not ``x.<name without _>(...)``
IN_PLACE_METHODS: dict[str, Callable[..., Any]] = {
    "copy_": lambda a, src, non_blocking=False: _copied(a, src),
    "zero_": lambda a: 0,
    "fill_": _fill,
    **{name: _random_fill(name) for name in (
        "uniform_", "normal_", "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_", "random_"
    )},
}  # fmt: skip
# In-place methods that change a tensor's shape or its autograd state, not its values.
SHAPE_CHANGING = frozenset({
    "unsqueeze_", "squeeze_", "transpose_", "t_", "swapaxes_", "swapdims_", "resize_", "resize_as_",
    "as_strided_", "set_", "detach_", "requires_grad_", "share_memory_", "retain_grad",
})  # fmt: skip


def _in_place_method(name: str) -> Callable:
    special = IN_PLACE_METHODS.get(name)

    def method(a: TensorProxy, *args: Any, **kwargs: Any) -> TensorProxy:
        if name in SHAPE_CHANGING:
            raise NotImplementedError(
                f"Tensor.{name} changes the tensor's shape or autograd state in place, which thunder's "
                f"functional traces cannot express; use the out-of-place {name.rstrip('_')}() instead"
            )
        for operand in tree_leaves((args, kwargs)):  # eager refuses (or reads half-written) an overlap
            if isinstance(operand, TensorProxy) and isinstance(a, TensorProxy):
                check_write_overlap(a, operand, f"x.{name}(v)")
        value = special(a, *args, **kwargs) if special is not None else _method(name[:-1])(a, *args, **kwargs)
        return mutate(a, value)

    method.__name__ = name
    return method


def _in_place_method_names() -> list[str]:
    names = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")]
    return sorted(set(names) | set(IN_PLACE_METHODS) | SHAPE_CHANGING)


for _name in _in_place_method_names():
    register_tensor_method(_name, _in_place_method(_name))


# ---------------------------------------------------------------------------------------------
# x[key] = value


def _specialized_numbers(key: Any) -> Any:
    """``key`` with its number inputs of the trace (``cache="symbolic values"``) specialized to their
    values, as any index is: ``y[i] = v`` of an int ``i`` is a basic write, not an index tensor's."""
    if isinstance(key, NumberProxy):
        return key.specialize()
    if isinstance(key, tuple) and any(isinstance(k, NumberProxy) for k in key):
        return tuple(k.specialize() if isinstance(k, NumberProxy) else k for k in key)
    return key


def _is_basic_key(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return all(
        k is None or k is Ellipsis or (isinstance(k, (int, slice)) and not isinstance(k, bool)) for k in keys
    )


def setitem(a: TensorProxy, key: Any, value: Any) -> None:
    """``a[key] = value`` as eager writes it: into the view ``a[basic part of key]``, with ``index_put``
    for the key's tensors (``thunder.torch.index_keys``); the in-place machinery writes the view back."""
    if key is False:  # eager writes nothing and checks nothing
        return
    key = _specialized_numbers(key)
    if _is_basic_key(key):
        view = tensor_method("getitem")(a, key)
        check_write_overlap(view, value)
        mutate(view, value_of_write(value))
        return
    if (
        isinstance(key, TensorProxy)
        and key.dtype is dtypes.bool8
        and key.shape == a.shape
        and not _is_tensor(value)
    ):
        mutate(a, tensor_method("masked_fill")(a, key, value))
        return
    parsed = parse_key(a, key)
    if not parsed.selects and not parsed.indices:  # basic after all: an int that is a symbolic size
        view = tensor_method("getitem")(a, parsed.basic)
        check_write_overlap(view, value)
        mutate(view, value_of_write(value))
        return
    if all(isinstance(k, slice) and k == slice(None) for k in parsed.basic):
        view = a
    else:
        view = tensor_method("getitem")(a, parsed.basic)
    check_write_overlap(view, value)
    mutate(view, put(current(view), parsed, value))


def _is_tensor(x: Any) -> bool:
    return isinstance(x, TensorProxy) and x.ndim > 0


register_tensor_method("setitem", setitem)


# ---------------------------------------------------------------------------------------------
# torch callables: in-place functions, out= and inplace= arguments, side effects


# Ops whose out= must have exactly the result's dtype in eager (elsewhere eager casts into out).
_EXACT_OUT_DTYPE = frozenset({torch.aminmax, torch.gather, torch.multinomial})


def _check_out_dtypes(torch_fn: Any, destination: Any, result: Any) -> None:
    if torch_fn not in _EXACT_OUT_DTYPE:
        return
    for target, value in zip(tree_leaves(destination), tree_leaves(result)):
        if isinstance(value, TensorProxy) and target.dtype is not value.dtype:
            raise RuntimeError(
                f"Expected out tensor to have dtype {value.dtype}, but got {target.dtype} instead"
            )


# out= over the memory of an operand. thunder computes the result, then writes it into out; eager's
# kernels read the operands while they write out. Elementwise kernels (TensorIterator) read each element
# before they write it: out= may be the very same view as an operand, and a partial overlap is eager's
# error where both are dense, else refused (check_write_overlap). Reductions and the kernels below read
# what they already wrote even in the very same view (eager's mm(x, x, out=x) and
# sum(x[..., None], -1, out=x) give zeros): any overlap is refused, and so it is for kernels not known to
# read their operands in one way (linalg.cross(a, b, out=a): eager's answer follows its order of writes).
_OUT_READ_WHILE_WRITTEN = frozenset(
    {torch.mm, torch.matmul, torch.bmm, torch.addmm, torch.baddbmm, torch.mv, torch.kron}
)
# These refuse any overlap with eager's error (ATen's assert_no_overlap) ...
_OUT_APART_FROM_OPERANDS = frozenset({
    torch.cat, torch.concat, torch.concatenate, torch.stack, torch.hstack, torch.vstack, torch.dstack,
    torch.column_stack, torch.row_stack, torch.index_select, torch.take, torch.take_along_dim, torch.gather,
    torch.outer, torch.ger, torch.addr, torch.index_add, torch.index_copy, torch.scatter_add,
})  # fmt: skip
# ... but for their input, which out= may be: the tensor added to (``torch.addr(x, v, w, out=x)``)
_OUT_MAY_BE_INPUT = frozenset({torch.addr, torch.index_add, torch.index_copy, torch.scatter_add})


def _same_view_policy(torch_fn: Any) -> SameView:
    """``check_write_overlap``'s ``same_view`` for out= of ``torch_fn``. Kernels not known to read their
    operands in one way (``torch.linalg.cross(a, b, out=a)``: eager's answer depends on its order of
    writes) are refused any overlap, as reductions are."""
    if torch_fn in _OUT_APART_FROM_OPERANDS:
        return "overlap"
    tags: frozenset[str] = getattr(symbol_for(torch_fn), "tags", frozenset())
    return "allowed" if torch_fn not in _OUT_READ_WHILE_WRITTEN and "elementwise" in tags else "refused"


def _check_out_apart(torch_fn: Any, destination: Any, operands: tuple[tuple, dict]) -> None:
    same_view = _same_view_policy(torch_fn)
    args, kwargs = operands
    if torch_fn in _OUT_MAY_BE_INPUT:
        args, kwargs = args[1:], {k: v for k, v in kwargs.items() if k != "input"}
    construct = f"{getattr(torch_fn, '__name__', 'the function')}(v, out=x)"
    for target in tree_leaves(destination):
        for operand in tree_leaves((args, kwargs)):
            if not (isinstance(target, TensorProxy) and isinstance(operand, TensorProxy)):
                continue
            # one tensor: eager refuses even an empty one (but cat skips 1-d empty ones, and so does this)
            if same_view == "overlap" and target is operand and target.numel() == 0 and target.shape != (0,):
                raise RuntimeError(OVERLAP_MESSAGE)
            check_write_overlap(target, operand, construct, same_view=same_view)


# how torch's argument parser words a call it refuses
_PARSER_MESSAGES = ("must be Tensor", "must be tuple of Tensors", "invalid combination of arguments")


def _check_eager_parses(torch_fn: Any, args: tuple, kwargs: dict, out: Any) -> None:
    """Eager's argument parsing of the call, on empty tensors standing for the tensors: its
    ``TypeError`` is raised here. Some ``out=`` overloads take fewer kinds of arguments than the
    function's others: ``torch.where(c, x, 0.0, out=y)`` is refused ('other' must be a Tensor), where
    ``torch.where(c, x, 0.0)`` takes the number. Errors of the kernels on the stand-ins (shapes) are not
    eager's answer to the call and are left to it."""
    if not any(isinstance(leaf, TensorProxy) for leaf in tree_leaves((args, kwargs))):
        return  # a factory (torch.zeros(n, m, out=y)): its sizes would be allocated for real
    error = error_on_stand_ins(torch_fn, args, {**kwargs, "out": out})
    if isinstance(error, TypeError) and any(words in str(error) for words in _PARSER_MESSAGES):
        raise TypeError(str(error)) from None


def _check_out_differentiable(torch_fn: Any, arguments: Any) -> None:
    """Eager refuses ``out=`` with gradients on where a tensor involved requires grad."""
    if torch.is_grad_enabled() and any(
        isinstance(t, TensorProxy) and t.requires_grad for t in tree_leaves(arguments)
    ):
        name = getattr(torch_fn, "__name__", "this function")
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but one "
            "of the arguments requires grad."
        )


def _write_result(destination: Any, result: Any, operands: Any = ()) -> Any:
    for target, value in zip(tree_leaves(destination), tree_leaves(result)):
        if isinstance(value, TensorProxy) and target.shape != value.shape:
            if any(target is operand for operand in tree_leaves(operands)):  # eager resizes no input
                raise RuntimeError(
                    f"output with shape {list(target.shape)} doesn't match the broadcast shape {list(value.shape)}"
                )
            if target.numel() != 0:
                warnings.warn(
                    _RESIZE_WARNING.format(list(target.shape), list(value.shape)), UserWarning, stacklevel=2
                )
            resize(target, value)
        else:
            mutate(target, value)
    return destination


# eager's warning (ATen's resize_output), word for word
_RESIZE_WARNING = (
    "An output with one or more elements was resized since it had shape {}, which does not match the required "
    "output shape {}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)


@functools.cache
def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _with_out_and_inplace(torch_fn: Any, functional: Callable) -> Callable:
    """``functional`` that also takes ``out=`` (the result is written into it) and ``inplace=True``."""
    signature = _signature(torch_fn)
    takes_inplace = signature is not None and "inplace" in signature.parameters

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None:
            kwargs = dict(kwargs)
            out = kwargs.pop("out")
            check_eager_dtypes(torch_fn, args, kwargs)
            _check_eager_parses(torch_fn, args, kwargs, out)
            _check_out_differentiable(torch_fn, (args, kwargs, out))
            _check_out_apart(torch_fn, out, (args, kwargs))
            result = functional(*args, **kwargs)
            _check_out_dtypes(torch_fn, out, result)
            return _write_result(out, result, (args, kwargs))
        check_eager_dtypes(torch_fn, args, kwargs)
        if takes_inplace and signature is not None:
            bound = signature.bind(*args, **kwargs)
            if bound.arguments.get("inplace"):
                del bound.arguments["inplace"]
                first = next(iter(bound.arguments.values()))
                return mutate(first, functional(*bound.args, **bound.kwargs))
        return functional(*args, **kwargs)

    return call


def _in_place_function(torch_fn: Any) -> Callable | None:
    """``torch.relu_`` -> ``torch.relu`` written into the first argument (likewise in F and Tensor)."""
    name = getattr(torch_fn, "__name__", "")
    if not name.endswith("_") or name.startswith("_"):
        return None
    if getattr(torch_fn, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase):
        return tensor_method(name) if name in IN_PLACE_METHODS or hasattr(torch.Tensor, name) else None
    for namespace in (torch, F):
        if getattr(namespace, name, None) is torch_fn and getattr(namespace, name[:-1], None) is not None:
            functional = _functional(getattr(namespace, name[:-1]))
            return lambda a, *args, **kwargs: mutate(a, functional(a, *args, **kwargs))
    return None


def _batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """F.batch_norm; in training mode the running statistics are updated in place, as in eager."""
    functional = _functional(F.batch_norm)
    if not training or (running_mean is None and running_var is None):
        return functional(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if running_mean is None or running_var is None:
        raise NotImplementedError(
            "F.batch_norm in training mode with only one of running_mean and running_var"
        )
    from thunder.torch.normalization import batch_norm_running_stats
    from thunder.torch.tensor_numbers import TensorNumber

    with torch.no_grad():  # eager updates the statistics outside autograd
        new_mean, new_var = batch_norm_running_stats(input, running_mean, running_var, momentum)
        mutate(running_mean, new_mean)
        mutate(running_var, new_var)
    if isinstance(momentum, TensorNumber):  # read from num_batches_tracked (BatchNorm's momentum=None)
        momentum = 0.0  # the normalization without running statistics does not read it
    return functional(input, None, None, weight, bias, True, momentum, eps)


_SIDE_EFFECTS: dict[Any, Callable] = {F.batch_norm: _batch_norm}


def torch_lookaside(torch_fn: Any) -> Callable | None:
    """What the frontend calls instead of ``torch_fn``: None when this module has nothing to add."""
    try:
        special = _SIDE_EFFECTS.get(torch_fn)
    except TypeError:  # unhashable: not a torch function
        return None
    if special is not None:
        return special
    seeding = random_lookaside(torch_fn)  # recorded, so that every call reseeds
    if seeding is not None:
        return seeding
    multi_tensor = foreach_lookaside(torch_fn)  # torch._foreach_*: one per-tensor op per element
    if multi_tensor is not None:
        return multi_tensor
    symbol = callable_for(torch_fn)
    if symbol is not None:
        return _with_out_and_inplace(torch_fn, symbol)
    return _in_place_function(torch_fn)
