"""The dependency rules between thunder's packages, checked statically on their sources.

core imports none of the other pieces; interpreter and executors never import each other; dynamo
never imports executors; nothing imports the meta package. A piece may import itself and the
thunder distributions it declares (conftest.py's table, checked against the pyprojects elsewhere).

``import thunder`` and ``from thunder import name`` (name not a sub-package) count as importing the
meta package: they reach ``thunder/__init__.py`` for its public API.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

META = "thunder"


def module_name(source_root: Path, path: Path) -> tuple[str, bool]:
    """The dotted name of the module at ``path`` under ``source_root``, and whether it is a package."""
    parts = list(path.relative_to(source_root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _resolve_relative(name: str | None, level: int, module: str, is_package: bool) -> str:
    package = module.split(".")
    if not is_package:
        package.pop()
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, name] if name else base)


def imported_names(source: str, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """Yield (absolute dotted name, line) for everything ``source`` imports.

    ``from a import b`` yields ``a``, except ``from thunder import b`` yields ``thunder.b`` so that the
    caller can tell a sub-package (``thunder.core``) from a name of the meta package (``thunder.jit``).
    String constants given to ``importlib.import_module`` and ``__import__`` count as imports.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(node.module, node.level, module, is_package)
            if base == META:
                for alias in node.names:
                    yield (META if alias.name == "*" else f"{META}.{alias.name}"), node.lineno
            else:
                yield base, node.lineno
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.args[0].value, node.lineno


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def owner(name: str, owners: dict[str, str]) -> str | None:
    """The distribution that provides module ``name``: None outside thunder, META for the meta package.

    ``owners`` maps the second part of a name (``core`` in ``thunder.core.trace``) to its distribution;
    any other ``thunder.x`` is a name of the meta package.
    """
    parts = name.split(".")
    if parts[0] != META:
        return None
    if len(parts) == 1:
        return META
    return owners.get(parts[1], META)


def violations(
    source: str, module: str, is_package: bool, distribution: str, allowed: set[str], owners: dict[str, str]
) -> list[str]:
    """Imports in ``source`` (module ``module`` of ``distribution``) of thunder pieces not in ``allowed``."""
    found = []
    for name, line in imported_names(source, module, is_package):
        provider = owner(name, owners)
        if provider is not None and provider != distribution and provider not in allowed:
            found.append(f"line {line}: imports {name} (from {provider})")
    return found


def subpackage_owners(sub_distributions) -> dict[str, str]:
    return {module.split(".")[1]: d.name for d in sub_distributions for module in d.modules}


def test_owners_match_source_tree(sub_distributions) -> None:
    """Every top-level entry under a piece's src/thunder is one the table knows, so none slips by."""
    owners = subpackage_owners(sub_distributions)
    for distribution in sub_distributions:
        source_root = distribution.root / "src" / "thunder"
        for entry in source_root.iterdir() if source_root.is_dir() else ():
            if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                continue
            name = entry.name.removesuffix(".py")
            assert owners.get(name) == distribution.name, (
                f"{entry} is not listed for {distribution.name} in tests/integration/conftest.py"
            )


def test_import_rules(sub_distribution, sub_distributions) -> None:
    source_root = sub_distribution.root / "src"
    assert (source_root / "thunder").is_dir(), f"{source_root / 'thunder'} is missing"
    assert not (source_root / "thunder" / "__init__.py").exists(), (
        "thunder/__init__.py belongs to the meta package only"
    )
    owners = subpackage_owners(sub_distributions)
    allowed = set(sub_distribution.thunder_dependencies)
    problems = []
    for path in sorted(source_root.rglob("*.py")):
        module, is_package = module_name(source_root, path)
        source = path.read_text(encoding="utf-8")
        for problem in violations(source, module, is_package, sub_distribution.name, allowed, owners):
            problems.append(f"{path.relative_to(sub_distribution.root)} {problem}")
    assert not problems, f"{sub_distribution.name} breaks the import rules:\n" + "\n".join(problems)


OWNERS = {
    "core": "thunder-core",
    "torch": "thunder-core",
    "distributed": "thunder-core",
    "interpreter": "thunder-interpreter",
    "executors": "thunder-executors",
    "dynamo": "thunder-dynamo",
}

BAD = [
    ("thunder-core", "thunder.core.trace", "import thunder\n"),
    ("thunder-core", "thunder.core.trace", "from thunder import jit\n"),
    ("thunder-core", "thunder.core.trace", "from thunder import *\n"),
    ("thunder-core", "thunder.core.trace", "from thunder.executors.torchex import executor\n"),
    ("thunder-core", "thunder.core.trace", "import thunder.interpreter as interp\n"),
    ("thunder-core", "thunder.core.trace", "from thunder import dynamo\n"),
    ("thunder-core", "thunder.core.trace", "from ..executors import torchex\n"),
    ("thunder-core", "thunder.core.trace", "from .. import jit\n"),
    (
        "thunder-core",
        "thunder.core.trace",
        "import importlib\nimportlib.import_module('thunder.executors')\n",
    ),
    ("thunder-core", "thunder.core.trace", "def f():\n    from thunder.dynamo import x\n"),
    ("thunder-interpreter", "thunder.interpreter.ops", "from thunder.executors import torchex\n"),
    ("thunder-interpreter", "thunder.interpreter", "from ..dynamo import ThunderCompiler\n"),
    ("thunder-executors", "thunder.executors.torchex", "import thunder.interpreter\n"),
    ("thunder-executors", "thunder.executors.torchex", "from thunder.common import CompileData\n"),
    ("thunder-dynamo", "thunder.dynamo.splitter", "from thunder.executors import torchex\n"),
    ("thunder-dynamo", "thunder.dynamo.splitter", "import thunder\n"),
]

GOOD = [
    ("thunder-core", "thunder.core.trace", "import thunder.core.proxies\nfrom thunder.torch import relu\n"),
    ("thunder-core", "thunder.core.trace", "from thunder import core, torch\nfrom . import proxies\n"),
    ("thunder-core", "thunder.core", "from .trace import Trace\nfrom ..torch import relu\n"),
    ("thunder-core", "thunder.core.trace", "import torch\nfrom torch import nn\n"),
    ("thunder-interpreter", "thunder.interpreter", "from thunder.core.trace import Trace\n"),
    ("thunder-executors", "thunder.executors.torchex", "import thunder.torch as ltorch\n"),
    ("thunder-dynamo", "thunder.dynamo", "from thunder.interpreter import interpret\nimport thunder.core\n"),
]

ALLOWED = {
    "thunder-core": set(),
    "thunder-interpreter": {"thunder-core"},
    "thunder-executors": {"thunder-core"},
    "thunder-dynamo": {"thunder-core", "thunder-interpreter"},
}


@pytest.mark.parametrize("piece, module, source", BAD)
def test_checker_flags_bad_imports(piece: str, module: str, source: str) -> None:
    is_package = module.count(".") == 1  # the synthetic `thunder.x` modules are package __init__s
    assert violations(source, module, is_package, piece, ALLOWED[piece], OWNERS)


@pytest.mark.parametrize("piece, module, source", GOOD)
def test_checker_passes_good_imports(piece: str, module: str, source: str) -> None:
    is_package = module.count(".") == 1
    assert violations(source, module, is_package, piece, ALLOWED[piece], OWNERS) == []
