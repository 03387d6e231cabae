"""Differential fuzzing: random tensor programs under ``thunder.jit`` against eager PyTorch.

The default budget ("ci" profile: derandomized, a few dozen programs per test) runs with every test
run; ``THUNDER_FUZZ_PROFILE=long python -m pytest tests/fuzz -m slow`` runs the long budget
(``THUNDER_FUZZ_EXAMPLES`` programs per test, 3000 by default, new random programs each time).
Every failure the fuzzer found is kept as an explicit program in ``test_regressions.py``.
"""

from __future__ import annotations

import pytest
from fuzz_check import FUZZ_SETTINGS, PROFILE, check_program, counts
from fuzz_programs import programs
from hypothesis import given, note
from hypothesis import strategies as st

# eager warns the same for a var() over one element; the fuzzer compares values, not warnings
pytestmark = pytest.mark.filterwarnings("ignore:var\\(\\)")

_long = pytest.mark.skipif(PROFILE != "long", reason="the long budget runs with THUNDER_FUZZ_PROFILE=long")


def _check(program, seed, kw):  # noqa: ANN001
    note(program.source)
    check_program(program, seed, kw)


@FUZZ_SETTINGS
@given(programs(grads=False), st.integers(0, 2**16), st.booleans())
def test_forward_programs_match_eager(program, seed, kw) -> None:  # noqa: ANN001
    _check(program, seed, kw)


@FUZZ_SETTINGS
@given(programs(grads=True), st.integers(0, 2**16), st.booleans())
def test_forward_and_backward_programs_match_eager(program, seed, kw) -> None:  # noqa: ANN001
    _check(program, seed, kw)


@pytest.mark.slow
@_long
@FUZZ_SETTINGS
@given(programs(), st.integers(0, 2**32 - 1), st.booleans())
def test_long_budget(program, seed, kw) -> None:  # noqa: ANN001
    _check(program, seed, kw)


def teardown_module() -> None:
    print(f"\nthunder fuzz ({PROFILE}): {counts}")
