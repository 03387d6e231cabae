"""Differential fuzzing of copy-backs taken into fusion regions (``transforms/fusion_copy_backs.py``).

Random programs that update their inputs in place (``fusion_write_programs.py``) under ``thunder.jit``
with nvFuser's regions built on the CPU, against eager PyTorch: outputs and the inputs' final values.
A region that took a copy in writes the input where it runs, so a copy taken past a read of the old
value gives another answer. On the CPU, where the regions run on torch, the plan of in-place writes
is checked on the real tensors as well (``fusion_write_programs._unsafe_writes``).

A mismatch is run again with the transform disabled (the oracle): one that happens there too is
older than the transform. Either fails the test. Programs whose written inputs share memory with
another input (two views of one base) are refused by the prologue's ``CHECK_WRITES_APART``
(``InputsShareMemoryError``, counted under "refused"); those whose shared inputs are only read run.

The default ("ci" profile) runs a derandomized budget of programs; ``THUNDER_FUZZ_PROFILE=long
python -m pytest tests/fuzz/test_fusion_writes_fuzz.py -m slow`` runs ``THUNDER_FUZZ_EXAMPLES`` new
random programs (with ``THUNDER_FUZZ_LOG=path``, each failure is also appended to ``path.writes``).
"""

from __future__ import annotations

import os

import pytest
from fusion_write_programs import (
    Mismatch,
    WriteProgram,
    check_program,
    counts,
    transform_disabled,
    write_programs,
)
from fuzz_check import FUZZ_SETTINGS, PROFILE
from hypothesis import given, note, settings

# a program compiles once and runs three calls, about 0.08 s: the default run (400) takes ~40 s on 2 cores
WRITE_SETTINGS = settings(FUZZ_SETTINGS, max_examples=400) if PROFILE == "ci" else FUZZ_SETTINGS
_long = pytest.mark.skipif(PROFILE != "long", reason="the long budget runs with THUNDER_FUZZ_PROFILE=long")


def check_against_oracle(program: WriteProgram) -> None:
    """``check_program``; a mismatch says whether it also happens with the transform disabled."""
    try:
        check_program(program)
    except Mismatch as error:
        try:
            with transform_disabled():
                check_program(program)
            older = False
        except Mismatch:
            older = True
        if older:
            raise Mismatch(f"older than the transform (also fails with it disabled):\n{error}") from None
        raise Mismatch(f"the transform made it wrong (right with it disabled):\n{error}") from None


@WRITE_SETTINGS
@given(write_programs())
def test_programs_writing_inputs_match_eager(program: WriteProgram) -> None:
    note(program.source)
    check_against_oracle(program)


@pytest.mark.slow
@_long
def test_long_budget() -> None:
    """Goes on past failing programs (no shrinking) and lists them at the end."""
    failures: list[str] = []

    @FUZZ_SETTINGS
    @given(write_programs())
    def run(program: WriteProgram) -> None:
        try:
            check_against_oracle(program)
        except Mismatch as error:
            failures.append(str(error))
            if log := os.environ.get("THUNDER_FUZZ_LOG"):
                with open(f"{log}.writes", "a") as file:
                    file.write(f"{error}\n\n")
        if log := os.environ.get("THUNDER_FUZZ_LOG"):
            with open(log, "w") as file:
                file.write(f"{counts}\n")

    run()
    assert not failures, f"{len(failures)} failing programs; the first:\n{failures[0]}"


def teardown_module() -> None:
    print(f"\nthunder fusion-writes fuzz ({PROFILE}): {counts}")
