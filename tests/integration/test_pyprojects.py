"""The pyprojects say what ARCHITECTURE.md (restated in conftest.py) says about the packages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")


def load(path: Path) -> dict:
    with open(path, "rb") as file:
        return tomllib.load(file)


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[]", requirement, maxsplit=1)[0].lower()


def test_thunder_dependencies(distribution) -> None:
    project = load(distribution.root / "pyproject.toml")["project"]
    assert project["name"] == distribution.name
    declared = {requirement_name(r) for r in project.get("dependencies", [])}
    assert {n for n in declared if n.startswith("thunder")} == set(distribution.thunder_dependencies)
    assert_python_versions_are_the_supported_ones(project)


def assert_python_versions_are_the_supported_ones(project: dict) -> None:
    """requires-python and the classifiers name exactly the versions the interpreter runs (and nox tests)."""
    from thunder.interpreter.version import SUPPORTED_PYTHON_VERSIONS

    oldest, newest = SUPPORTED_PYTHON_VERSIONS[0], SUPPORTED_PYTHON_VERSIONS[-1]
    assert project["requires-python"] == f">={oldest[0]}.{oldest[1]},<{newest[0]}.{newest[1] + 1}"
    prefix = "Programming Language :: Python :: 3."
    classified = {c.removeprefix(prefix) for c in project.get("classifiers", []) if c.startswith(prefix)}
    assert classified == {str(minor) for _, minor in SUPPORTED_PYTHON_VERSIONS}


def test_sub_distribution_layout(sub_distribution) -> None:
    root = sub_distribution.root
    config = load(root / "pyproject.toml")
    assert config["build-system"]["build-backend"] == "hatchling.build"
    assert config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/thunder"]
    assert (root / "README.md").is_file()
    assert (root / "tests").is_dir(), f"{root}/tests is missing"


def test_core_declares_a_torch_range_the_local_build_satisfies(sub_distributions) -> None:
    core = next(d for d in sub_distributions if d.name == "thunder-core")
    dependencies = load(core.root / "pyproject.toml")["project"]["dependencies"]
    assert "torch>=2.5" in dependencies


def test_executors_entry_point(repo_root: Path) -> None:
    project = load(repo_root / "packages" / "thunder-executors" / "pyproject.toml")["project"]
    assert project["entry-points"]["thunder.executors"]["torch"] == "thunder.executors.torchex:executor"


def test_meta_extras(repo_root: Path) -> None:
    extras = load(repo_root / "pyproject.toml")["project"]["optional-dependencies"]
    assert {"nvfuser", "triton", "test"} <= set(extras)
    assert {"pytest", "pytest-xdist", "numpy", "expecttest", "hypothesis"} <= {
        requirement_name(r) for r in extras["test"]
    }


def test_pytest_collects_every_package(repo_root: Path) -> None:
    options = load(repo_root / "pyproject.toml")["tool"]["pytest"]["ini_options"]
    expected = {f"packages/{p.name}/tests" for p in (repo_root / "packages").iterdir() if p.is_dir()}
    assert expected | {"tests/integration"} <= set(options["testpaths"])


def test_nox_tests_every_supported_python(repo_root) -> None:
    from thunder.interpreter.version import SUPPORTED_PYTHON_VERSIONS

    noxfile = (repo_root / "noxfile.py").read_text(encoding="utf-8")
    listed = re.search(r"^PYTHONS = \[(.*?)\]", noxfile, flags=re.M)
    assert listed, "noxfile.py has no PYTHONS list"
    assert re.findall(r'"(3\.\d+)"', listed.group(1)) == [f"{a}.{b}" for a, b in SUPPORTED_PYTHON_VERSIONS]
