"""Guard fuzzing: one jitted function called with changing Python values, against eager PyTorch.

Each case (``guard_programs.py``) reads one value or two -- a shape, an index, a branch condition,
a loop count, a number, a dtype or device, a config dict, an object, a callable -- nested in a
container or not, reached as an argument, a global, a closure cell or an attribute, and calls one
``thunder.jit``-ted function with a sequence of values (same kind, other value; other kind). Every call must return
eager's answer or raise eager's exception type: the prologue must check every value the trace was
built on. Both cache modes run. The default run uses the derandomized "ci" budget (800 cases a test);
``THUNDER_FUZZ_PROFILE=long python -m pytest tests/fuzz -m slow`` runs ``THUNDER_FUZZ_EXAMPLES``
new random cases.
"""

from __future__ import annotations

import os
import re

import pytest
from fuzz_check import FUZZ_SETTINGS, PROFILE
from guard_check import GuardMismatch, check_case, guard_counts
from guard_programs import GuardCase, guard_cases
from hypothesis import given, note, settings

# a case is cheap (a few small compiles): the "ci" budget runs more of them than fuzz_check's default
GUARD_SETTINGS = settings(FUZZ_SETTINGS, max_examples=800) if PROFILE == "ci" else FUZZ_SETTINGS
_long = pytest.mark.skipif(PROFILE != "long", reason="the long budget runs with THUNDER_FUZZ_PROFILE=long")


def _check(case: GuardCase) -> None:
    note(case.describe())
    check_case(case)


@GUARD_SETTINGS
@given(guard_cases(cache="constant values"))
def test_changing_values_match_eager(case: GuardCase) -> None:
    _check(case)


@GUARD_SETTINGS
@given(guard_cases(cache="symbolic values"))
def test_changing_values_match_eager_symbolic_cache(case: GuardCase) -> None:
    _check(case)


def _group(case: GuardCase, error: GuardMismatch) -> str:
    uses = "+".join(part.use.name for part in case.parts)
    problem = re.sub(r"\d+", "N", error.problem.splitlines()[0])[:90]
    return f"{'one object reached two ways; ' if error.aliased else ''}{uses}: {problem}"


@pytest.mark.slow
@_long
def test_guards_long_budget() -> None:
    """The long budget goes on past failing cases (no shrinking) and lists them at the end, grouped by
    use and problem; with THUNDER_FUZZ_LOG=path, each failing case is also written to ``path.guards``."""
    failures: dict[str, list[str]] = {}

    @FUZZ_SETTINGS
    @given(guard_cases())
    def run(case: GuardCase) -> None:
        try:
            check_case(case)
        except GuardMismatch as error:
            failures.setdefault(_group(case, error), []).append(str(error))
            guard_counts["failing cases"] = guard_counts.get("failing cases", 0) + 1
            if log := os.environ.get("THUNDER_FUZZ_LOG"):
                with open(f"{log}.guards", "a") as file:
                    file.write(f"{error}\n\n")

    run()
    summary = "\n".join(f"{len(v):5d}  {k}" for k, v in sorted(failures.items(), key=lambda kv: -len(kv[1])))
    examples = "\n\n".join(v[0] for v in failures.values())
    assert not failures, f"failing cases by group:\n{summary}\n\none example of each:\n{examples}"


def teardown_module() -> None:
    print(f"\nthunder guard fuzz ({PROFILE}): {guard_counts}")
