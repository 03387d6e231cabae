"""Proxies: the values a trace computes with. They carry metadata only, never data.

A ``TensorProxy`` stands for a tensor while a program is traced: it knows its shape, dtype,
device and whether it requires grad, and it behaves like a ``torch.Tensor`` towards user code
(operators, methods, ``.shape``, ``.dtype``) by recording torch-language symbols into the trace
being built. Methods come from a table that the torch language fills (``register_tensor_method``),
so that this module stays independent of the language.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from thunder.core import devices, dtypes
from thunder.core.trace import get_tracectx

__all__ = [
    "Proxy",
    "TensorProxy",
    "NumberProxy",
    "pyval",
    "register_tensor_method",
    "tensor_method",
    "reads_data_error",
    "DataDependentError",
    "data_dependent_error",
]


class Proxy:
    """Abstract: a named value in a trace."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None, prefix: str = "t"):
        trace = get_tracectx()
        if trace is None:
            if name is None:
                raise RuntimeError("a proxy needs a name or a trace to take one from")
            self.name = name
        else:
            self.name = trace.add_name(name) if name is not None else trace.make_name(prefix)

    def type_comment(self) -> str:
        raise NotImplementedError


_tensor_methods: dict[str, Callable] = {}


_grad_access: tuple[Callable, Callable] | None = None  # (read, write) of a proxy's .grad while tracing


def register_grad_access(read: Callable[[Any], Any], write: Callable[[Any, Any], None]) -> None:
    """What ``proxy.grad`` and ``proxy.grad = value`` do (set by ``transforms/inline_backward.py``)."""
    global _grad_access
    _grad_access = (read, write)


def register_tensor_method(name: str, fn: Callable) -> None:
    """Make ``proxy.<name>(...)`` call ``fn(proxy, ...)``; the torch language registers its methods here."""
    _tensor_methods[name] = fn


def tensor_method(name: str) -> Callable:
    try:
        return _tensor_methods[name]
    except KeyError:
        pass
    torch_method = getattr(torch.Tensor, name, None)
    if not name.startswith("_") and inspect.isroutine(torch_method):  # run by PyTorch: core/fallback.py
        from thunder.core import fallback

        return functools.partial(_fallback_method, fallback, torch_method)
    raise NotImplementedError(f"thunder does not support the tensor method or operator {name!r}")


# torch.Tensor's properties (``x.T``, ``x.real``, ``x.grad``): read as attributes, never called, so a
# proxy answers them with a value where it answers a method with a bound callable.
def _class_attributes(cls: type) -> dict[str, Any]:
    """``dict(inspect.getmembers_static(cls))``, which Python 3.10 lacks: attributes, descriptors unrun."""
    attributes: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        attributes.update(vars(klass))
    return attributes


_TORCH_PROPERTIES = frozenset(
    name for name, value in _class_attributes(torch.Tensor).items() if inspect.isdatadescriptor(value)
)


@functools.cache
def _is_device_type(name: str) -> bool:
    try:
        torch.device(name)
    except RuntimeError:
        return False
    return True


class DataDependentError(NotImplementedError):
    """A construct needs a tensor's data while tracing (``if x.sum() > 0``, ``x.item()``, ``np.sin(x)``).

    ``thunder.jit`` traces with shapes, dtypes and devices only; ``torch.compile`` with thunder's
    ``ThunderCompiler`` backend runs such programs by splitting them where they read data.
    """


THUNDER_COMPILER_USAGE = (
    "torch.compile(fn, backend=ThunderCompiler()) runs such programs: it splits them where they read data, "
    "runs that part with PyTorch and the rest with thunder (from thunder.dynamo import ThunderCompiler)"
)


def data_dependent_error(construct: str, instead: str) -> DataDependentError:
    """The error for ``construct``, which needs a tensor's data; ``instead``: how to do without it."""
    return DataDependentError(
        f"{construct} depends on the tensor's data, which thunder.jit does not see: it traces with shapes, "
        f"dtypes and devices only (data-dependent control flow). {THUNDER_COMPILER_USAGE}. Or {instead}"
    )


def _numpy_instead(name: str) -> str:
    if callable(getattr(torch, name, None)):
        return f"use torch.{name}, which thunder traces, or call numpy outside the jitted function"
    return "call numpy outside the jitted function"


def reads_data_error(construct: str) -> DataDependentError:
    """The error for ``x.item()`` and other constructs that turn a tensor's data into a Python value."""
    method = construct.removeprefix("Tensor")
    return data_dependent_error(
        construct, f"return the tensor from the jitted function and call {method} on the result outside it"
    )


def _fallback_method(fallback: Any, torch_method: Callable, self: Any, *args: Any, **kwargs: Any) -> Any:
    return fallback.call(torch_method, (self, *args), kwargs)


def _inplace_operator(method_name: str) -> Callable:
    """``x += y`` is ``x.add_(y)``: the torch language functionalizes it (thunder/torch/inplace.py)."""

    def method(self: TensorProxy, other: Any) -> TensorProxy:
        return tensor_method(method_name)(self, other)

    return method


def _binary(name: str, reflected: bool = False) -> Callable:
    if reflected:
        return lambda self, other: tensor_method(name)(other, self)
    return lambda self, other: tensor_method(name)(self, other)


def _unary(name: str) -> Callable:
    return lambda self: tensor_method(name)(self)


def _size(s: torch.SymInt) -> Any:
    constant = s.node.maybe_as_int()  # a symbol the trace has specialized by now is a plain int
    return s if constant is None else int(constant)


class TensorProxy(Proxy):
    """A tensor in a trace: shape, dtype, device and requires_grad, and no data."""

    __slots__ = ("shape", "dtype", "device", "requires_grad")

    def __init__(
        self,
        name: str | None = None,
        *,
        shape: Sequence[int],
        dtype: Any,
        device: Any,
        requires_grad: bool = False,
    ):
        super().__init__(name)
        # a torch.SymInt stays one where its size is symbolic (core/symbolic_shapes.py); a torch.Size, as
        # the tensor's: the program may test ``isinstance(x.shape, torch.Size)``, print or return it
        self.shape: torch.Size = torch.Size(
            [int(s) if type(s) is not torch.SymInt else _size(s) for s in shape]
        )
        self.dtype: dtypes.dtype = dtypes.to_dtype(dtype)
        self.device: devices.Device = devices.to_device(device)
        self.requires_grad: bool = bool(requires_grad)

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, name: str | None = None) -> TensorProxy:
        return cls(
            name,
            shape=tensor.shape,
            dtype=tensor.dtype,
            device=tensor.device,
            requires_grad=tensor.requires_grad,
        )

    def replace(self, **changes: Any) -> TensorProxy:
        """A new proxy (with a new name) that is like this one except for ``changes``."""
        fields: dict[str, Any] = {
            "shape": self.shape,
            "dtype": self.dtype,
            "device": self.device,
            "requires_grad": self.requires_grad,
        }
        fields.update(changes)
        return TensorProxy(**fields)

    def type_comment(self) -> str:
        if any(type(s) is torch.SymInt for s in self.shape):
            from thunder.core.symbolic_shapes import expression

            shape = (
                "["
                + ", ".join(expression(s) if type(s) is torch.SymInt else str(s) for s in self.shape)
                + "]"
            )
            return f'"{self.device} {self.dtype.short_name}{shape}"'
        return f'"{self.device} {self.dtype.short_name}{list(self.shape)}"'

    def __repr__(self) -> str:
        return f"<TensorProxy {self.name}: {self.type_comment()}>"

    # metadata, answered without recording anything
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self.shape[dim]

    def numel(self) -> int:
        return functools.reduce(lambda a, b: a * b, self.shape, 1)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[TensorProxy]:
        return iter(tensor_method("unbind")(self, 0))

    def __bool__(self) -> bool:
        raise data_dependent_error(
            "The truth value of a tensor (an `if` or `while` on a tensor, `and`, `or`, `not`, `assert`, bool())",
            "compute the condition outside the jitted function and pass it in as a Python bool",
        )

    # numpy on a tensor (``np.sin(x)``, ``np.asarray(x)``): eager converts the tensor to an array
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise reads_data_error("Converting a tensor to a numpy array (numpy.asarray(t), numpy.array(t))")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = getattr(ufunc, "__name__", "a ufunc")
        call = f"numpy.{name}()" if method == "__call__" else f"numpy.{name}.{method}()"
        raise data_dependent_error(f"{call} on a tensor", _numpy_instead(name))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        name = getattr(func, "__name__", "a function")
        raise data_dependent_error(f"numpy.{name}() on a tensor", _numpy_instead(name))

    # Python values computed from the data: a trace holds no data, and what it computes cannot depend
    # on values it would have to read back (as a graph break would) without retracing on every call
    def item(self) -> Any:
        raise reads_data_error("Tensor.item()")

    def tolist(self) -> Any:
        raise reads_data_error("Tensor.tolist()")

    def numpy(self, *, force: bool = False) -> Any:
        raise reads_data_error("Tensor.numpy()")

    # metadata properties that a proxy always answers the same way: thunder traces dense, strided
    # tensors only, and the prologue checks every input's device and dtype
    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    @property
    def layout(self) -> torch.layout:
        return torch.strided

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    is_sparse = is_sparse_csr = is_quantized = is_nested = is_mkldnn = property(lambda self: False)

    @property
    def grad(self) -> TensorProxy | None:
        """The tensor's ``.grad`` in the program being traced (``core/transforms/inline_backward.py``)."""
        if _grad_access is None:
            raise NotImplementedError("thunder does not support reading the tensor attribute 'grad'")
        return _grad_access[0](self)

    @grad.setter
    def grad(self, value: TensorProxy | None) -> None:
        if _grad_access is None:
            raise NotImplementedError("thunder does not support assigning the tensor attribute 'grad'")
        _grad_access[1](self, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _TORCH_PROPERTIES:  # x.H, x.mH, x.real: the value, not a method bound to x
            return self._torch_property(name)
        if name not in _tensor_methods and not hasattr(torch.Tensor, name):
            # as eager: ``hasattr(tensor, "jax")`` is False (transformers probes tensors this way)
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        return functools.partial(tensor_method(name), self)

    def _torch_property(self, name: str) -> Any:
        if name in _tensor_methods:
            return tensor_method(name)(self)
        if name.startswith("is_") and _is_device_type(name[3:]):  # x.is_xpu
            return self.device.type == name[3:]
        # autograd's state of the actual tensor (x.grad, x.grad_fn, x.is_leaf, x.data)
        raise NotImplementedError(f"thunder does not support reading the tensor attribute {name!r}")

    __hash__ = Proxy.__hash__
    __add__, __radd__ = _binary("add"), _binary("add", reflected=True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", reflected=True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", reflected=True)
    __truediv__, __rtruediv__ = _binary("true_divide"), _binary("true_divide", reflected=True)
    __floordiv__, __rfloordiv__ = _binary("floor_divide"), _binary("floor_divide", reflected=True)
    __mod__, __rmod__ = _binary("remainder"), _binary("remainder", reflected=True)
    __pow__, __rpow__ = _binary("pow"), _binary("pow", reflected=True)
    __matmul__, __rmatmul__ = _binary("matmul"), _binary("matmul", reflected=True)
    __and__, __rand__ = _binary("bitwise_and"), _binary("bitwise_and", reflected=True)
    __or__, __ror__ = _binary("bitwise_or"), _binary("bitwise_or", reflected=True)
    __xor__, __rxor__ = _binary("bitwise_xor"), _binary("bitwise_xor", reflected=True)
    __lshift__, __rlshift__ = _binary("bitwise_left_shift"), _binary("bitwise_left_shift", reflected=True)
    __rshift__, __rrshift__ = _binary("bitwise_right_shift"), _binary("bitwise_right_shift", reflected=True)
    __eq__, __ne__ = _binary("eq"), _binary("ne")
    __lt__, __le__ = _binary("lt"), _binary("le")
    __gt__, __ge__ = _binary("gt"), _binary("ge")
    __neg__, __pos__ = _unary("neg"), _unary("positive")
    __abs__, __invert__ = _unary("abs"), _unary("bitwise_not")

    def __getitem__(self, key: Any) -> TensorProxy:
        return tensor_method("getitem")(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        tensor_method("setitem")(self, key, value)


# The in-place operators and the in-place methods they are (``x @= y`` is not in-place in torch).
_INPLACE_OPERATORS = {
    "iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_", "ifloordiv": "floor_divide_",
    "imod": "remainder_", "ipow": "pow_", "iand": "bitwise_and_", "ior": "bitwise_or_", "ixor": "bitwise_xor_",
    "ilshift": "bitwise_left_shift_", "irshift": "bitwise_right_shift_",
}  # fmt: skip
for _name, _method_name in _INPLACE_OPERATORS.items():
    setattr(TensorProxy, f"__{_name}__", _inplace_operator(_method_name))


class NumberProxy(Proxy):
    """A Python ``int`` or ``float`` that is an input of the trace (``cache="symbolic values"``).

    It knows the value it had when the program was traced (``value``) and stands for whatever value
    later calls pass: arithmetic on it is recorded (``thunder.core.python_ops``) and it can be an
    operand of elementwise tensor ops. Anything that needs the value itself (a branch, a shape, an
    index, ``int()``, a comparison, hashing) *specializes* it: the value is returned and the prologue
    checks that every input it derives from keeps its value, so a cached trace never runs with a
    value that would have traced differently.
    """

    __slots__ = ("value", "roots", "on_specialize")

    def __init__(self, value: int | float, name: str | None = None, *, roots: tuple = ()):
        super().__init__(name, prefix=_NUMBER_PREFIXES.get(type(value), "n"))
        self.value = value
        # the trace inputs this number is computed from; an input is its own root
        self.roots: tuple[NumberProxy, ...] = roots or (self,)
        # set on inputs by the prologue builder: makes the prologue check the value from now on
        self.on_specialize: Callable[[], None] | None = None

    @property
    def python_type(self) -> type:
        return type(self.value)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with a compiled program (core/disk_cache.py), once its prologue is compiled: a value
        # needed after that raises where it happens (PrologueBuilder._specialize), so the callback,
        # a closure over the builder that cannot be pickled, is not kept.
        return {"name": self.name, "value": self.value, "roots": self.roots}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name, self.value, self.roots = state["name"], state["value"], state["roots"]
        self.on_specialize = None

    def __copy__(self) -> NumberProxy:  # while tracing, a copy keeps the callback (pickling alone drops it)
        copied = NumberProxy.__new__(NumberProxy)
        copied.name, copied.value, copied.roots = self.name, self.value, self.roots
        copied.on_specialize = self.on_specialize
        return copied

    def type_comment(self) -> str:
        return f'"{type(self.value).__name__} {self.value!r}"'

    def __repr__(self) -> str:  # the user's program may print it: as the number, which is then guarded
        return repr(self.specialize())

    def describe(self) -> str:
        return f"<NumberProxy {self.name}: {self.type_comment()}>"

    def specialize(self) -> int | float:
        """The value, from now on guarded: every input this number derives from is checked by value."""
        for root in self.roots:
            if root.on_specialize is not None:
                on_specialize, root.on_specialize = root.on_specialize, None
                on_specialize()
        return self.value

    # Python reads the value: specialize
    def __bool__(self) -> bool:
        return bool(self.specialize())

    def __int__(self) -> int:
        return int(self.specialize())

    def __index__(self) -> int:
        value: Any = self.specialize()  # a float raises TypeError, as it does in Python
        return operator.index(value)

    def __float__(self) -> float:
        return float(self.specialize())

    def __complex__(self) -> complex:
        return complex(self.specialize())

    def __hash__(self) -> int:
        return hash(self.specialize())

    def __str__(self) -> str:
        return str(self.specialize())

    def __format__(self, spec: str) -> str:
        return format(self.specialize(), spec)

    def __round__(self, ndigits: int | None = None) -> Any:
        return round(self.specialize(), ndigits)

    def __trunc__(self) -> int:
        return math.trunc(self.specialize())

    def __floor__(self) -> int:
        return math.floor(self.specialize())

    def __ceil__(self) -> int:
        return math.ceil(self.specialize())


_NUMBER_PREFIXES = {int: "i", float: "f", bool: "b", complex: "c"}


def pyval(x: Any) -> Any:
    """The value of a number proxy as it was traced, without specializing it; anything else unchanged.

    Only for decisions that depend on the number's *type* (promotion, the dtype of ``full``), which
    the prologue checks anyway.
    """
    return x.value if isinstance(x, NumberProxy) else x


def _comparison(name: str) -> Callable:
    compare = getattr(operator, name)
    return lambda self, other: compare(self.specialize(), _specialized(other))


def _specialized(x: Any) -> Any:
    return x.specialize() if isinstance(x, NumberProxy) else x


def _arithmetic(name: str, reflected: bool = False) -> Callable:
    def method(self: NumberProxy, other: Any) -> Any:
        from thunder.core import python_ops  # records into the trace; imports symbols

        if not isinstance(other, NumberProxy) and type(other) not in (int, float, bool):
            return NotImplemented  # a tensor proxy's reflected operator takes over
        return python_ops.binary(name, other, self) if reflected else python_ops.binary(name, self, other)

    return method


def _unary_number(name: str) -> Callable:
    def method(self: NumberProxy) -> Any:
        from thunder.core import python_ops

        return python_ops.unary(name, self)

    return method


def _divmod(reflected: bool = False) -> Callable:
    floordiv, mod = _arithmetic("floordiv", reflected), _arithmetic("mod", reflected)

    def method(self: NumberProxy, other: Any) -> Any:
        quotient = floordiv(self, other)
        return NotImplemented if quotient is NotImplemented else (quotient, mod(self, other))

    return method


_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")
_BITWISE = ("lshift", "rshift", "and", "or", "xor")
for _name in _ARITHMETIC + _BITWISE:
    setattr(NumberProxy, f"__{_name}__", _arithmetic(_name))
    setattr(NumberProxy, f"__r{_name}__", _arithmetic(_name, reflected=True))
setattr(NumberProxy, "__divmod__", _divmod())  # noqa: B010 -- set like the operators above
setattr(NumberProxy, "__rdivmod__", _divmod(reflected=True))  # noqa: B010
for _name in ("neg", "pos", "abs", "invert"):
    setattr(NumberProxy, f"__{_name}__", _unary_number(_name))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(NumberProxy, f"__{_name}__", _comparison(_name))
numbers.Number.register(NumberProxy)  # prims take "a tensor or a number"
