"""Fixtures of thunder.dynamo's tests.

The thunder pieces run on thunder's executors, which this package finds through the registry and
never imports; without any (thunder-executors not installed) the tests that run pieces are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from thunder.core.executor import get_default_executors
from thunder.torch import registry


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if get_default_executors():
        return
    skip = pytest.mark.skip(reason="no thunder executor is installed (install thunder-executors)")
    for item in items:
        if "needs_executor" in item.fixturenames:
            item.add_marker(skip)


@pytest.fixture
def needs_executor() -> None:
    """Marks a test that runs thunder pieces."""


@pytest.fixture
def without_symbol(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], None]:
    """Make thunder forget its symbol for a torch callable, as if the op were not supported yet.

    Other ops gain symbols over time; tests about unsupported ops pick one and remove it.
    """

    def remove(torch_fn: Any) -> None:
        monkeypatch.delitem(registry._torch_to_symbol, getattr(torch_fn, "__func__", torch_fn), raising=False)

    return remove


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Each test compiles from scratch: Dynamo's caches would reuse another test's backend."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def meta_package() -> Any:
    """The meta package ``thunder`` (last_traces, jit); skipped where only the pieces are installed."""
    import thunder

    if not hasattr(thunder, "last_traces"):
        pytest.skip("the thunder meta package is not installed (only its pieces are)")
    return thunder
