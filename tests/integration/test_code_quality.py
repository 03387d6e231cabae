"""Lint, formatting and type hints are clean: what noxfile.py's lint and typecheck sessions run, here so
that the test command (and so CI) runs it too. Each tool runs from the repository root with its
configuration in pyproject.toml, as the installed module of the running Python (pinned in the meta
package's `test` extra, which requirements/dev.txt installs); a tool that is not installed skips its test.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_tool(module: str, *args: str) -> None:
    """Run ``python -m <module> <args>`` from the repository root; fail with its output if it reports anything."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (python -m pip install -r requirements/dev.txt installs it)")
    command = [sys.executable, "-m", module, *args]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        shown = " ".join([module, *args])
        pytest.fail(f"`{shown}` reports (exit status {result.returncode}):\n{result.stdout}{result.stderr}")


def test_ruff_check() -> None:
    # --no-cache: nothing written into the tree (without a cache the whole tree takes about a second)
    run_tool("ruff", "check", "--no-cache", ".")


def test_ruff_format() -> None:
    run_tool("ruff", "format", "--check", "--no-cache", ".")


def test_mypy(tmp_path: Path) -> None:
    # A fresh cache: an incremental run on an old .mypy_cache has reported errors that a full run does
    # not. A full run takes about 30 to 50 seconds on two cores.
    run_tool("mypy", "--cache-dir", str(tmp_path / "mypy_cache"))


def test_tool_pins_are_noxfile_ones() -> None:
    """The `test` extra pins ruff and mypy to the versions noxfile.py's lint and typecheck sessions install."""
    noxfile = (REPO_ROOT / "noxfile.py").read_text(encoding="utf-8")
    nox_pins = set(re.findall(r'^(?:RUFF|MYPY) = "([^"]+)"', noxfile, flags=re.M))
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        test_extra = tomllib.load(file)["project"]["optional-dependencies"]["test"]
    extra_pins = {r for r in test_extra if re.match(r"(ruff|mypy)==", r)}
    assert len(nox_pins) == 2 and nox_pins == extra_pins, (nox_pins, extra_pins)
