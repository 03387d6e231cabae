"""nox sessions: one per package (that package and its declared thunder dependencies only), plus
integration (regular installs), quickstart, editable, lint and typecheck. `nox -l` lists them;
README.md says more.

Python versions: the interpreter's tests (its VM reads each version's bytecode) and the README's
quick start run on every supported version, the integration tests on the oldest and the newest; the
rest on 3.11, the development version.

torch is always pinned to the local CPU build: an unpinned torch pulls gigabytes of CUDA wheels. The
thunder-* distributions are not on PyPI, so each session names every one it needs by path.
"""

from __future__ import annotations

import re
from pathlib import Path

import nox
import tomllib

ROOT = Path(__file__).parent
TORCH = "torch==2.13.0"
PYTHON = "3.11"
# Exactly thunder.interpreter.version.SUPPORTED_PYTHON_VERSIONS (and requires-python in every pyproject.toml).
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
# distribution -> the Python versions its session runs on (others: PYTHON)
PIECE_PYTHONS = {"thunder-interpreter": PYTHONS}
# Same versions as the development environment, so the sessions and your editor agree.
RUFF = "ruff==0.17.5"
MYPY = "mypy==2.4.1"

# distribution -> the thunder distributions it declares (ARCHITECTURE.md); paths are packages/<name>.
PIECES = {
    "thunder-core": [],
    "thunder-interpreter": ["thunder-core"],
    "thunder-executors": ["thunder-core"],
    "thunder-dynamo": ["thunder-core", "thunder-interpreter"],
}
# distribution -> thunder distributions its tests need besides its own dependencies: thunder.dynamo's
# tests run the pieces they compile, which takes an executor (found through the registry, never imported).
TEST_PIECES = {"thunder-dynamo": ["thunder-executors"]}
EXAMPLE_PLUGIN = "./examples/thunder-example-executor"

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True


def test_tools() -> list[str]:
    """The meta package's `test` extra: one list of test dependencies for pip and nox alike."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["optional-dependencies"]["test"]


def piece_path(name: str) -> str:
    return f"./packages/{name}"


def piece_session(name: str) -> None:
    def session_function(session: nox.Session) -> None:
        # One pip command, so the declared thunder dependencies resolve to the local paths.
        pieces = [*PIECES[name], *TEST_PIECES.get(name, [])]
        session.install(TORCH, piece_path(name), *map(piece_path, pieces), *test_tools())
        session.run("pytest", f"packages/{name}/tests", *session.posargs)

    needs = ", ".join(["torch", *PIECES[name]])
    extra = "".join(f" (+ {piece} for its tests)" for piece in TEST_PIECES.get(name, []))
    session_function.__doc__ = f"Install {name} with only {needs}{extra}, and run its tests."
    python = PIECE_PYTHONS.get(name, PYTHON)
    nox.session(name=name.removeprefix("thunder-"), python=python)(session_function)


for _piece in PIECES:
    piece_session(_piece)


@nox.session(python=[PYTHONS[0], PYTHONS[-1]])
def integration(session: nox.Session) -> None:
    """Regular (non-editable) installs of all five distributions and the example plugin."""
    session.install(TORCH, *map(piece_path, PIECES), ".[test]", EXAMPLE_PLUGIN, "hatchling")
    session.run("pytest", "tests/integration", *session.posargs)


def readme_quick_start() -> str:
    """The Python code block of README.md's "Using thunder" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Using thunder\n(.*?)(?=^## |\Z)", readme, flags=re.M | re.S)
    assert section, "README.md has no '## Using thunder' section"
    block = re.search(r"^```python\n(.*?)^```", section.group(1), flags=re.M | re.S)
    assert block, "README.md's '## Using thunder' section has no python code block"
    return block.group(1)


@nox.session(python=PYTHONS)
def quickstart(session: nox.Session) -> None:
    """README.md's quick start ("Using thunder"), as a user installs thunder (regular installs, no test tools)."""
    session.install(TORCH, *map(piece_path, PIECES), ".")
    session.run("python", "-c", readme_quick_start())


@nox.session(python=PYTHON)
def editable(session: nox.Session) -> None:
    """The README's development install (everything editable), then the integration tests."""
    session.install("-r", "requirements/dev.txt")
    session.run("pytest", "tests/integration", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting (config in pyproject.toml)."""
    session.install(RUFF)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy over every package's src/ (config in pyproject.toml)."""
    session.install(MYPY, TORCH, "numpy")
    session.run("mypy", *session.posargs)
