"""What the integration tests know about the repository: where it is and how it is laid out.

The table below restates ARCHITECTURE.md's package list; test_pyprojects.py checks that the
pyprojects agree with it, and test_import_rules.py that the sources do.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))  # the tests import helper modules of this folder (hf_models)


@dataclass(frozen=True)
class Distribution:
    name: str
    modules: tuple[str, ...]
    thunder_dependencies: tuple[str, ...]

    @property
    def root(self) -> Path:
        return REPO_ROOT if self.name == "thunder" else REPO_ROOT / "packages" / self.name


SUB_DISTRIBUTIONS = (
    Distribution("thunder-core", ("thunder.core", "thunder.torch", "thunder.distributed"), ()),
    Distribution("thunder-interpreter", ("thunder.interpreter",), ("thunder-core",)),
    Distribution("thunder-executors", ("thunder.executors",), ("thunder-core",)),
    Distribution("thunder-dynamo", ("thunder.dynamo",), ("thunder-core", "thunder-interpreter")),
)
META_DISTRIBUTION = Distribution("thunder", ("thunder",), tuple(d.name for d in SUB_DISTRIBUTIONS))
ALL_DISTRIBUTIONS = (*SUB_DISTRIBUTIONS, META_DISTRIBUTION)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize tests over the distributions they name as arguments."""
    tables = {"sub_distribution": SUB_DISTRIBUTIONS, "distribution": ALL_DISTRIBUTIONS}
    for argument, table in tables.items():
        if argument in metafunc.fixturenames:
            metafunc.parametrize(argument, table, ids=[d.name for d in table])


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def sub_distributions() -> tuple[Distribution, ...]:
    return SUB_DISTRIBUTIONS
