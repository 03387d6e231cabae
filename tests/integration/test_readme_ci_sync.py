"""README.md's setup and test commands are what .ci/run runs, and what they install is complete."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest


def section_commands(readme: str, title: str) -> list[str]:
    """The command lines of the one fenced code block in README section ``## {title}``."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme, flags=re.M | re.S)
    assert match, f"README.md has no '## {title}' section"
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", match.group(1), flags=re.M | re.S)
    assert len(blocks) == 1, f"README.md's '## {title}' section should hold one code block, not {len(blocks)}"
    lines = [line.strip() for line in blocks[0].splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert commands, f"README.md's '## {title}' code block is empty"
    return commands


def ci_commands(repo_root: Path) -> list[str]:
    script = (repo_root / ".ci" / "run").read_text(encoding="utf-8")
    return [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_ci_runs_readme_setup_then_test(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    setup, test = section_commands(readme, "Setup"), section_commands(readme, "Test")
    ci = ci_commands(repo_root)
    for command in (*setup, *test):
        assert command in ci, f".ci/run does not run README.md's command verbatim: {command}"
    assert max(ci.index(c) for c in setup) < min(ci.index(c) for c in test), "setup must come before test"
    assert ci.index(test[-1]) == len(ci) - 1, "the test command must be .ci/run's last: its status is CI's"


def test_ci_script_fails_loudly(repo_root: Path) -> None:
    path = repo_root / ".ci" / "run"
    assert os.access(path, os.X_OK), ".ci/run must be executable"
    ci = ci_commands(repo_root)
    assert ci[0].startswith("#!") or "set -euo pipefail" in ci, ci[:2]
    assert "set -euo pipefail" in ci
    assert any(re.match(r"python3\.11 -m venv ", line) for line in ci), ".ci/run must make a fresh venv"
    assert not any("|| true" in line for line in ci), ".ci/run must not hide failures"


def test_dev_requirements_install_everything(repo_root: Path, sub_distributions) -> None:
    lines = (repo_root / "requirements" / "dev.txt").read_text(encoding="utf-8").splitlines()
    entries = {line.split("#")[0].strip() for line in lines} - {""}
    expected = {"torch==2.13.0", "-e .[test]"} | {f"-e ./packages/{d.name}" for d in sub_distributions}
    assert expected <= entries, f"requirements/dev.txt misses {sorted(expected - entries)}"


@pytest.mark.parametrize("title", ["Setup", "Test"])
def test_readme_sections_exist(repo_root: Path, title: str) -> None:
    section_commands((repo_root / "README.md").read_text(encoding="utf-8"), title)
