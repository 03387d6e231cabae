"""Why a call recompiled: ``compile_stats(fn).recompile_reasons`` and ``THUNDER_LOGS=recompiles``.

Each cache miss after the first compile names the check of the cached prologue that failed, the value
as the program knows it, and what it was before and is now. Cache hits must not pay for any of it.
"""

from __future__ import annotations

import functools
import gc
import logging
import warnings
import weakref

import pytest
import torch

import thunder
from thunder.core.diagnostics import recompiles
from thunder.core.diagnostics.log_channels import LOG_VARIABLE

OFFSET = 1.0


def scale(x, factor, extras=()):
    return x * factor + OFFSET + len(extras)


LINE = scale.__code__.co_firstlineno  # messages name the function's file and line


def _reasons(jitted):
    return thunder.compile_stats(jitted).recompile_reasons


def _last(jitted):
    return _reasons(jitted)[-1]


def test_the_first_compile_gives_no_reason():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    jitted(torch.ones(2), 2)
    assert _reasons(jitted) == []


def test_a_changed_python_number():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    jitted(torch.ones(2), 3)
    reason = _last(jitted)
    assert str(reason) == (
        f"thunder: recompiling scale (test_recompile_log.py:{LINE}) because factor changed: 2 -> 3 "
        "(check_value in the prologue)"
    )
    assert (reason.what, reason.before, reason.after, reason.check) == ("factor", "2", "3", "check_value")
    assert (
        reason.prologue_line == "if type(_checked := args[1]) is not int or _checked != 2: raise GuardFailure"
    )


def test_a_number_of_another_type_says_so():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    jitted(torch.ones(2), 2.0)
    assert "factor changed: 2 (int) -> 2.0 (float)" in str(_last(jitted))


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda x: x.reshape(2, 2), "x changed: shape (4,) -> (2, 2)"),
        (lambda x: x.double(), "x changed: dtype torch.float32 -> torch.float64"),
        (lambda x: x.requires_grad_(), "x changed: requires_grad False -> True"),
        (
            lambda x: x.double().reshape(1, 4),
            "x changed: shape (4,) -> (1, 4), dtype torch.float32 -> torch.float64",
        ),
        (lambda x: [1.0], "x changed: a tensor -> a list"),
    ],
    ids=["shape", "dtype", "requires_grad", "shape and dtype", "not a tensor"],
)
def test_a_changed_tensor(change, expected):
    def double(x):
        return x * 2

    jitted = thunder.jit(double)
    jitted(torch.ones(4))
    try:
        jitted(change(torch.ones(4)))
    except Exception:
        pass  # ``[1.0] * 2`` is fine in Python, but the reason is recorded before the compile anyway
    reason = _last(jitted)
    assert (
        expected in str(reason) and reason.check in ("check_tensor", "check_tensors") and reason.what == "x"
    )


def test_a_changed_container_length():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2, [1])
    jitted(torch.ones(2), 2, [1, 2])
    reason = _last(jitted)
    assert "extras changed: length 1 -> 2 (check_container in the prologue)" in str(reason)
    assert (reason.before, reason.after) == ("length 1", "length 2")
    jitted(torch.ones(2), 2, (1, 2))
    assert "extras changed: a list -> a tuple" in str(_last(jitted))


def test_a_changed_global(monkeypatch):
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    monkeypatch.setattr(f"{__name__}.OFFSET", 5.0)
    jitted(torch.ones(2), 2)
    reason = _last(jitted)
    assert reason.what == f"global {__name__}.OFFSET"
    assert f"global {__name__}.OFFSET changed: 1.0 -> 5.0 (check_value in the prologue)" in str(reason)


def test_a_changed_closure_variable_and_argument_count():
    def make(factor):
        def multiply(x, *rest):
            return x * factor + len(rest)

        return multiply

    function = make(3)
    jitted = thunder.jit(function)
    jitted(torch.ones(2))
    function.__closure__[0].cell_contents = 4
    jitted(torch.ones(2))
    assert (
        "factor (closure variable of test_a_changed_closure_variable_and_argument_count.<locals>.make"
        in str(_last(jitted))
    )
    jitted(torch.ones(2), 1)
    assert "the number of positional arguments changed: 1 -> 2" in str(_last(jitted))


def test_keyword_arguments():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    jitted(torch.ones(2), 2, extras=[1])
    assert "keyword arguments were passed: extras" in str(_last(jitted))
    jitted(torch.ones(2), factor=2)
    assert "the number of positional arguments changed: 2 -> 1" in str(_last(jitted))


def test_a_module_attribute_parameter_and_hook():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    jitted = thunder.jit(model)
    jitted(torch.randn(4, 2))
    model[1].inplace = True
    jitted(torch.randn(4, 2))
    assert "self[1].inplace changed: False -> True" in str(_last(jitted))
    assert str(_last(jitted)).startswith("thunder: recompiling Sequential (")
    model[0].weight.requires_grad_(False)
    jitted(torch.randn(4, 2))
    assert "self[0].weight changed: requires_grad True -> False" in str(_last(jitted))
    model[0].register_forward_hook(lambda *args: None)
    jitted(torch.randn(4, 2))
    assert "self[0]._forward_hooks changed: empty -> 1 item (check_hooks in the prologue)" in str(
        _last(jitted)
    )


def test_grad_mode_and_the_count_of_other_entries():
    def double(x):
        return x * 2

    jitted = thunder.jit(double)
    x = torch.ones(2, requires_grad=True)
    jitted(x)
    with torch.no_grad():
        jitted(x)
    assert "grad mode changed: enabled -> disabled" in str(_last(jitted))
    jitted(torch.ones(3))
    # the most recently used entry (the no_grad one) is explained; the other one is counted
    assert str(_last(jitted)).endswith("; 1 other cache entry did not match either")


def test_the_reasons_are_bounded_and_hold_no_values():
    # dynamic=False: an int that changes stays a constant (it would become symbolic on the third compile)
    jitted = thunder.jit(scale, cache_size=4, dynamic=False)
    x = torch.ones(2)
    for factor in range(recompiles.REASONS_KEPT + 5):
        jitted(x, factor)
    reasons = _reasons(jitted)
    assert len(reasons) == recompiles.REASONS_KEPT
    assert "factor changed" in str(reasons[-1]) and str(recompiles.REASONS_KEPT + 4) in reasons[-1].after
    # explaining keeps no reference to the call's values (the traceback of the failure is dropped)
    tracked = torch.ones(3)
    reference = weakref.ref(tracked)
    # the newest entry's factor: its tensors' check, after the value checks, is the one that fails
    reason = recompiles.explain_miss(scale, jitted._cache, (tracked, recompiles.REASONS_KEPT + 4), {})
    assert "x changed: shape (2,) -> (3,)" in str(reason)
    del tracked
    gc.collect()
    assert reference() is None
    assert all(type(getattr(r, field)) in (str, type(None)) for r in reasons for field in ("before", "after"))


def test_cache_hits_do_not_explain(monkeypatch):
    calls = []
    original = recompiles.explain_miss
    monkeypatch.setattr(recompiles, "explain_miss", lambda *a: calls.append(1) or original(*a))
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    jitted(torch.ones(2), 3)
    for _ in range(5):
        jitted(torch.ones(2), 2)  # a hit on the older entry, after the newer one's prologue failed
        jitted(torch.ones(2), 3)
    assert len(calls) == 1 and thunder.cache_misses(jitted) == 2


def test_the_prologue_callable_is_unchanged_by_explaining():
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    prologue = str(thunder.last_prologue_traces(jitted)[-1])
    assert (
        "if type(_checked := args[1]) is not int or _checked != 2: raise GuardFailure" in prologue
        and "GuardFailure(" not in prologue
    )


def test_thunder_logs_prints_to_stderr(monkeypatch, capsys):
    jitted = thunder.jit(scale, dynamic=False)  # every factor compiles (no symbolic int)
    jitted(torch.ones(2), 2)
    monkeypatch.delenv(LOG_VARIABLE, raising=False)
    jitted(torch.ones(2), 3)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(LOG_VARIABLE, "recompiles")
    jitted(torch.ones(2), 4)
    assert capsys.readouterr().err == (
        f"thunder: recompiling scale (test_recompile_log.py:{LINE}) because factor changed: 3 -> 4 "
        "(check_value in the prologue); 1 other cache entry did not match either\n"
    )
    monkeypatch.setenv(LOG_VARIABLE, "other,recompiles")  # a list; unknown names are warned about
    with pytest.warns(UserWarning, match="unknown log channel"):
        jitted(torch.ones(2), 5)
    assert "factor changed: 4 -> 5" in capsys.readouterr().err
    monkeypatch.delenv(LOG_VARIABLE)
    jitted(torch.ones(2), 6)
    assert capsys.readouterr().err == ""
    assert not logging.getLogger("thunder.recompiles").handlers  # removed again


def test_the_logger_works_without_the_variable(monkeypatch, caplog):
    monkeypatch.delenv(LOG_VARIABLE, raising=False)
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    with caplog.at_level(logging.INFO, logger="thunder.recompiles"):
        jitted(torch.ones(2), 3)
    assert [r.getMessage() for r in caplog.records if r.name == "thunder.recompiles"] == [str(_last(jitted))]


def test_explaining_never_breaks_a_call(monkeypatch):
    monkeypatch.setattr(recompiles, "_explain_failure", lambda *a: 1 / 0)
    jitted = thunder.jit(scale)
    jitted(torch.ones(2), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jitted(torch.ones(2), 3).tolist() == [4.0, 4.0]
    assert "not explained: ZeroDivisionError" in str(_last(jitted))


def test_a_partial_is_labelled():
    jitted = thunder.jit(functools.partial(scale, factor=2))
    jitted(torch.ones(2))
    jitted(torch.ones(3))
    assert str(_last(jitted)).startswith(
        f"thunder: recompiling scale (test_recompile_log.py:{LINE}) because x changed: shape (2,) -> (3,)"
    )
