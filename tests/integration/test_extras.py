"""The optional extras (`nvfuser`, `triton`) can never make pip install another project's `thunder`.

The name `thunder` on the package index belongs to an unrelated project (version 0.0.1). When an extra
of ours cannot be resolved, pip backtracks from our `thunder` to the other versions of `thunder` it
can find, drops the extra they lack with a warning, and installs that project instead. So every
requirement of an extra names, by environment markers, exactly the environments where a wheel exists:
an extra then never fails to resolve (it is empty elsewhere, and the nvFuser executor says where
builds exist). The tests check the markers against a table of published wheels, the table against the
index, and finally pip's own resolver report for ``thunder[nvfuser]`` on the running Python.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename

tomllib = pytest.importorskip("tomllib")

REPO_ROOT = Path(__file__).resolve().parents[2]
INDEX = "https://pypi.org/simple"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# a platform, as (os family of wheel tags, machine) -> its marker environment
PLATFORMS = {
    ("linux", "x86_64"): {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
    ("linux", "aarch64"): {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "aarch64",
    },
    ("macosx", "arm64"): {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64"},
    ("win", "amd64"): {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64"},
}
LINUX = (("linux", "x86_64"), ("linux", "aarch64"))
# Where the index has wheels of each requirement of an extra (checked online by test_the_table_is_the_index's).
PUBLISHED = {
    "nvfuser-cu130-torch210": {(python, ("linux", "x86_64")) for python in ("3.10", "3.12")},
    "triton": {(python, platform) for python in PYTHONS for platform in LINUX},
}
EXTRAS = ("nvfuser", "triton")


def _extras(pyproject: Path) -> dict[str, list[str]]:
    with open(pyproject, "rb") as file:
        return tomllib.load(file)["project"]["optional-dependencies"]


def _environment(python: str, platform: tuple[str, str]) -> dict[str, str]:
    environment = dict(default_environment())
    environment.update(PLATFORMS[platform], python_version=python, python_full_version=f"{python}.0")
    return environment


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "packages/thunder-executors/pyproject.toml"])
def test_each_extra_requirement_holds_where_a_wheel_exists(pyproject: str) -> None:
    extras = _extras(REPO_ROOT / pyproject)
    for extra in EXTRAS:
        for text in extras[extra]:
            requirement = Requirement(text)
            assert requirement.name in PUBLISHED, f"{text}: add where its wheels exist to PUBLISHED"
            assert requirement.marker is not None, f"{text} needs markers naming where wheels exist"
            for python in PYTHONS:
                for platform in PLATFORMS:
                    expected = (python, platform) in PUBLISHED[requirement.name]
                    environment = _environment(python, platform)
                    assert requirement.marker.evaluate(environment) == expected, (
                        extra,
                        text,
                        python,
                        platform,
                    )


def test_the_meta_package_and_the_executors_name_the_same_builds() -> None:
    meta = _extras(REPO_ROOT / "pyproject.toml")
    executors = _extras(REPO_ROOT / "packages/thunder-executors/pyproject.toml")
    assert all(meta[extra] == executors[extra] for extra in EXTRAS)


def test_the_nvfuser_executor_says_where_builds_exist() -> None:
    from thunder.executors.nvfuser.executor import INSTALL_HINT

    assert "CPython 3.10 and 3.12 on Linux x86_64" in INSTALL_HINT


def _fetch_json(url: str, accept: str = "application/vnd.pypi.simple.v1+json") -> dict:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def index_reachable() -> None:
    try:
        _fetch_json(f"{INDEX}/nvfuser-cu130-torch210/")
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        reason = f"the package index ({INDEX}) is unreachable: {error}"
        print(reason)
        pytest.skip(reason)


def _usable(wheel: str, python: str, platform: tuple[str, str]) -> bool:
    """Whether a wheel installs on CPython ``python`` on ``platform`` (glibc Linux, macOS, Windows)."""
    family, machine = platform
    minor = int(python.split(".")[1])
    for tag in parse_wheel_filename(wheel)[3]:
        interpreter = tag.interpreter
        if tag.abi == "abi3" and interpreter.startswith("cp3"):  # cp312-abi3: CPython 3.12 and later
            fits = int(interpreter[3:]) <= minor
        else:
            fits = interpreter in (f"cp3{minor}", "py3") and tag.abi in (f"cp3{minor}", "none")
        if not fits:
            continue
        if tag.platform == "any":
            return True
        system = "linux" if tag.platform.startswith(("manylinux", "linux")) else tag.platform.split("_")[0]
        if system == family and tag.platform.lower().endswith(machine):
            return True
    return False


def test_the_table_is_the_index(index_reachable: None) -> None:
    """PUBLISHED says, for every Python and platform, whether the index has a wheel of a version the
    extra accepts (pip takes a pre-release, such as nvFuser's .dev builds, when only those exist)."""
    requirements = {
        Requirement(r).name: Requirement(r) for e in EXTRAS for r in _extras(REPO_ROOT / "pyproject.toml")[e]
    }
    for name, published in PUBLISHED.items():
        files = [f["filename"] for f in _fetch_json(f"{INDEX}/{name}/")["files"] if not f.get("yanked")]
        specifier = requirements[name].specifier
        wheels = [
            w
            for w in files
            if w.endswith(".whl") and specifier.contains(parse_wheel_filename(w)[1], prereleases=True)
        ]
        for python in PYTHONS:
            for platform in PLATFORMS:
                exists = any(_usable(wheel, python, platform) for wheel in wheels)
                assert exists == ((python, platform) in published), (name, python, platform)


@pytest.fixture(scope="module")
def our_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of the five distributions, as a folder pip can find them in."""
    folder = tmp_path_factory.mktemp("wheels")
    sources = [REPO_ROOT, *sorted((REPO_ROOT / "packages").iterdir())]
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "-w"]
    subprocess.run([*command, str(folder), *map(str, sources)], check=True, capture_output=True, timeout=300)
    return folder


def _resolve(arguments: list[str], report: Path) -> list[dict]:
    """What ``pip install --dry-run`` would install, from pip's resolver report."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report)]
    result = subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(report.read_text())["install"]


def _thunders(installs: list[dict]) -> list[tuple[str, str]]:
    return [
        (item["metadata"]["version"], item["download_info"]["url"])
        for item in installs
        if item["metadata"]["name"].lower() == "thunder"
    ]


def test_pip_resolves_the_nvfuser_extra_to_our_thunder(
    index_reachable: None, our_wheels: Path, tmp_path: Path
) -> None:
    """A fresh install by name, with our wheels found beside the index's `thunder` 0.0.1."""
    installs = _resolve(
        ["--ignore-installed", "--find-links", str(our_wheels), "thunder[nvfuser]"], tmp_path / "fresh.json"
    )
    ours = _thunders(installs)
    assert len(ours) == 1 and ours[0][0] == "0.1.0" and ours[0][1].startswith("file:"), ours
    names = {item["metadata"]["name"].lower().replace("_", "-") for item in installs}
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    platform = next((p for p, env in PLATFORMS.items() if env["platform_machine"] == _machine()), None)
    has_build = platform is not None and (python, platform) in PUBLISHED["nvfuser-cu130-torch210"]
    assert ("nvfuser-cu130-torch210" in names) == has_build, sorted(names)


def test_pip_keeps_the_installed_thunder_for_the_nvfuser_extra(index_reachable: None, tmp_path: Path) -> None:
    """The issue's command, ``pip install 'thunder[nvfuser]'``, where thunder is installed (as here)."""
    from importlib.metadata import version

    assert version("thunder") == "0.1.0"
    installs = _resolve(["thunder[nvfuser]"], tmp_path / "installed.json")
    assert all(found == "0.1.0" for found, _ in _thunders(installs)), _thunders(installs)


def _machine() -> str:
    import platform

    return platform.machine()
