"""The installed distributions: all five present, entry points declared, and thunder imported from
where the kind of install (editable or regular) says it should be.

nox runs these tests after a regular install (`nox -s integration`) and after an editable one
(`nox -s editable`, the README's setup), so both kinds are covered.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import re
import site
import sysconfig
from pathlib import Path
from urllib.parse import unquote, urlparse


def direct_url(name: str) -> dict:
    """The distribution's PEP 610 record; empty when it came from an index."""
    text = metadata.distribution(name).read_text("direct_url.json")
    return json.loads(text) if text else {}


def is_editable(name: str) -> bool:
    return bool(direct_url(name).get("dir_info", {}).get("editable", False))


def source_dir(name: str) -> Path:
    url = urlparse(direct_url(name)["url"])
    assert url.scheme == "file", url
    return Path(unquote(url.path)).resolve()


def site_dirs() -> list[Path]:
    dirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    return [Path(d).resolve() for d in dirs]


def module_locations(module_name: str) -> list[Path]:
    """Where ``module_name`` is imported from: its folder, or each folder of a namespace package."""
    module = importlib.import_module(module_name)
    if module.__file__:
        return [Path(module.__file__).resolve().parent]
    return [Path(entry).resolve() for entry in module.__path__]


def test_installed(distribution) -> None:
    assert metadata.distribution(distribution.name).version


def test_thunder_requirements(distribution) -> None:
    requires = metadata.distribution(distribution.name).requires or []
    names = {re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0].lower() for r in requires}
    assert set(distribution.thunder_dependencies) <= names


def test_torch_executor_entry_point() -> None:
    entry_points = {ep.name: ep for ep in metadata.entry_points(group="thunder.executors")}
    assert "torch" in entry_points, sorted(entry_points)
    torch_entry = entry_points["torch"]
    assert torch_entry.value == "thunder.executors.torchex:executor"
    assert torch_entry.dist is not None and torch_entry.dist.name == "thunder-executors"
    assert hasattr(torch_entry.load(), "name")


def test_meta_extras_declared() -> None:
    extras = set(metadata.distribution("thunder").metadata.get_all("Provides-Extra") or [])
    assert {"nvfuser", "triton", "test"} <= extras


def test_sub_distribution_ships_no_thunder_init(sub_distribution) -> None:
    if is_editable(sub_distribution.name):
        init = source_dir(sub_distribution.name) / "src" / "thunder" / "__init__.py"
        assert not init.exists(), f"{init} would shadow the meta package"
    else:
        files = metadata.files(sub_distribution.name) or []
        assert "thunder/__init__.py" not in {f.as_posix() for f in files}


def test_meta_ships_thunder_init() -> None:
    if is_editable("thunder"):
        assert (source_dir("thunder") / "src" / "thunder" / "__init__.py").is_file()
    else:
        files = {f.as_posix() for f in metadata.files("thunder") or []}
        assert "thunder/__init__.py" in files
        assert not any(f.startswith(("thunder/core/", "thunder/executors/")) for f in files)


def test_import_location_matches_install_kind(distribution) -> None:
    """Editable: thunder comes from this checkout's sources. Regular: from site-packages."""
    editable = is_editable(distribution.name)
    print(f"{distribution.name}: {'editable' if editable else 'regular'} install")
    if editable:
        assert source_dir(distribution.name) == distribution.root.resolve(), (
            f"{distribution.name} is an editable install of another checkout: {source_dir(distribution.name)}"
        )
        expected = [(distribution.root / "src").resolve()]
    else:
        expected = site_dirs()
    for module_name in distribution.modules:
        for location in module_locations(module_name):
            assert any(location.is_relative_to(d) for d in expected), (
                f"{module_name} comes from {location}, not from under any of {expected}"
            )


def test_one_install_kind(sub_distributions) -> None:
    """A mix of editable and regular pieces tests neither layout; reinstall them together."""
    kinds = {name: is_editable(name) for name in ["thunder", *(d.name for d in sub_distributions)]}
    assert len(set(kinds.values())) == 1, f"mixed editable and regular installs: {kinds}"
