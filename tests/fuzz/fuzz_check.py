"""The differential check: a program under ``thunder.jit`` against eager PyTorch, over a series of calls.

One jitted function is called again and again while what it depends on changes: tensor values,
shapes, dtypes, memory layouts, requires_grad, the Python number argument, a global float, a global
tensor (updated in place and rebound) and a closure cell. Each call must equal eager PyTorch (outputs,
inputs updated in place, gradients), and raise where eager raises: a cache entry must never run for a
call it was not built for.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from fuzz_programs import Program, build
from hypothesis import HealthCheck, settings

import thunder

__all__ = ["FUZZ_SETTINGS", "check_program", "PROFILE"]

# "ci": a bounded, reproducible budget for every test run. "long": THUNDER_FUZZ_PROFILE=long, on demand.
settings.register_profile(
    "thunder-fuzz-ci",
    max_examples=75,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
settings.register_profile(
    "thunder-fuzz-long",
    max_examples=int(os.environ.get("THUNDER_FUZZ_EXAMPLES", "3000")),
    derandomize=False,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("THUNDER_FUZZ_PROFILE", "ci")
FUZZ_SETTINGS = settings.get_profile(f"thunder-fuzz-{PROFILE}")

# how many programs and calls ran in this process (the long run reports them)
counts = {"programs": 0, "calls": 0, "skipped calls": 0, "refused calls": 0}
# thunder's refusal of a write whose value overlaps the memory written, where eager reads what it
# wrote (core/inplace.py, check_write_overlap): eager's answer then depends on its loop order
_ORDER_DEPENDENT = "depends on the order it writes memory in"


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-7, "atol": 1e-7}


def _inputs(
    program: Program, seed: int, shapes: list, dtype: torch.dtype, grads: bool, layout: str = "contiguous"
) -> list:
    generator = torch.Generator().manual_seed(seed)
    return [_laid_out(torch.randn(shape, generator=generator, dtype=dtype), layout).requires_grad_(grads)
            for shape in shapes]  # fmt: skip


def _laid_out(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """``tensor``'s values in another memory layout: its dims in reverse order in memory ("permuted"),
    or every other element of a tensor twice as long in its last dim ("strided")."""
    if layout == "permuted":
        order = tuple(reversed(range(tensor.ndim)))
        return tensor.permute(order).contiguous().permute(order)
    if layout == "strided" and tensor.ndim:
        wide = torch.zeros(*tensor.shape[:-1], 2 * tensor.shape[-1], dtype=tensor.dtype)
        wide[..., ::2] = tensor
        return wide[..., ::2]
    return tensor


def _clone(tensors: list) -> list:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _other_shapes(shapes: list) -> list:
    """The same broadcasting pattern over other sizes: every non-1 size of a dim becomes another one."""
    rank = max(len(s) for s in shapes)
    new = {}
    for shape in shapes:
        for position, size in enumerate(shape, start=rank - len(shape)):
            if size != 1:
                new[position] = 5 - size if size != 5 - size else size + 1
    return [
        tuple(new.get(p, 1) if size != 1 else 1 for p, size in enumerate(shape, start=rank - len(shape)))
        for shape in shapes
    ]


def _compare(actual: Any, expected: Any, dtype: torch.dtype, what: str, source: str) -> None:
    assert type(actual) is type(expected) or not isinstance(expected, torch.Tensor), what
    torch.testing.assert_close(
        actual, expected, equal_nan=True, **_tolerance(dtype), msg=lambda m: f"{what}: {m}\n{source}"
    )


def _call_and_compare(
    jitted: Callable, f: Callable, program: Program, inputs: list, k: Any, label: str, kw: bool
) -> None:
    eager_inputs, jit_inputs = _clone(inputs), _clone(inputs)
    try:
        expected = f(*eager_inputs, k=k) if kw else f(*eager_inputs, k)
    except (RuntimeError, IndexError, ValueError) as error:
        counts["skipped calls"] += 1  # eager rejects these inputs: thunder must too
        try:
            jitted(*jit_inputs, k=k) if kw else jitted(*jit_inputs, k)
        except Exception:  # noqa: BLE001 -- any clear error; eager's own where thunder checks as eager
            return
        raise AssertionError(
            f"{label}: eager raised {type(error).__name__}: {error}; thunder returned\n{program.source}"
        ) from error
    try:
        actual = jitted(*jit_inputs, k=k) if kw else jitted(*jit_inputs, k)
    except NotImplementedError as error:
        if _ORDER_DEPENDENT not in str(error):
            raise
        counts["refused calls"] += 1  # eager's answer depends on its order of writes (a documented refusal)
        return
    counts["calls"] += 1
    dtype = inputs[0].dtype
    _compare(actual, expected, dtype, f"{label}: outputs", program.source)
    if not any(t.requires_grad for t in inputs):
        _compare(jit_inputs, eager_inputs, dtype, f"{label}: inputs after the call", program.source)
        return
    for index, (a, e) in enumerate(zip(actual, expected)):
        assert a.requires_grad == e.requires_grad, (
            f"{label}: requires_grad of output {index}\n{program.source}"
        )
    differentiable = [(a, e) for a, e in zip(actual, expected) if e.requires_grad]
    if not differentiable or not torch.is_grad_enabled():
        return
    generator = torch.Generator().manual_seed(1234)
    cotangents = [torch.randn(e.shape, generator=generator, dtype=e.dtype) for _, e in differentiable]
    eager_grads = torch.autograd.grad(
        [e for _, e in differentiable], eager_inputs, cotangents, allow_unused=True
    )
    jit_grads = torch.autograd.grad([a for a, _ in differentiable], jit_inputs, cotangents, allow_unused=True)
    # an unused input's gradient may be None in one and zeros in the other: both mean zero
    for index, (g_jit, g_eager, x) in enumerate(zip(jit_grads, eager_grads, inputs)):
        g_jit = torch.zeros_like(x) if g_jit is None else g_jit
        g_eager = torch.zeros_like(x) if g_eager is None else g_eager
        _compare(g_jit, g_eager, dtype, f"{label}: gradient of input {index}", program.source)


def _report_progress() -> None:
    """With THUNDER_FUZZ_LOG=path, the counts so far are written there (a long run may be cut short)."""
    path = os.environ.get("THUNDER_FUZZ_LOG")
    if path:
        with open(path, "w") as file:
            file.write(f"{counts}\n")


def check_program(program: Program, seed: int, kw: bool = False) -> None:
    """Run ``program`` jitted and eager over a series of calls that change what it depends on."""
    counts["programs"] += 1
    _report_progress()
    f, namespace = build(program)
    jitted = thunder.jit(f)
    dtype, grads = program.dtype, program.grads
    other_dtype = torch.float64 if dtype == torch.float32 else torch.float32

    def call(label: str, shapes: list | None = None, dtype_: torch.dtype | None = None,
             grads_: bool | None = None, k: Any = program.k, seed_: int = seed,
             layout: str = "contiguous") -> None:  # fmt: skip
        inputs = _inputs(
            program,
            seed_,
            shapes or program.shapes,
            dtype_ or dtype,
            grads if grads_ is None else grads_,
            layout,
        )
        _call_and_compare(jitted, f, program, inputs, k, label, kw)

    call("first call")
    call("new values", seed_=seed + 1)
    call("new number argument", k=program.k + 1)
    call("number argument of another type", k=float(program.k) + 0.5 if isinstance(program.k, int) else 2)
    namespace["SCALE"] = -0.75
    call("global float changed")
    namespace["W"].mul_(3.0)  # the same global tensor, updated in place
    call("global tensor updated in place")
    namespace["W"] = torch.randn(program.w_shape, dtype=torch.float64)  # rebound, another dtype
    call("global tensor rebound")
    if f.__closure__:  # the program reads the closure variable ``c``
        f.__closure__[0].cell_contents = 7.0
        call("closure changed")
    call("other shapes", shapes=_other_shapes(program.shapes))
    call("other dtype", dtype_=other_dtype)
    call("requires_grad toggled", grads_=not grads)
    with torch.no_grad():
        call("under no_grad", grads_=True)
    call("inputs permuted in memory", layout="permuted")
    call("inputs strided in memory", layout="strided")
    call("back to the first call")
    assert thunder.cache_misses(jitted) >= 1
