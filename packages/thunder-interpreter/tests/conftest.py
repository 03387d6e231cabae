"""The VM's tests run without torch (CI runs them so on every supported Python; see README.md)."""

import importlib.util
from pathlib import Path

_HERE = Path(__file__).parent
_TORCH_MISSING = importlib.util.find_spec("torch") is None


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    # Everything outside vm/ (the corpus, the frontend's tests) goes through thunder's pipeline,
    # which needs torch; the VM does not, and its few torch tests skip themselves.
    if not _TORCH_MISSING or collection_path == _HERE or not collection_path.is_relative_to(_HERE):
        return None
    return collection_path.relative_to(_HERE).parts[0] != "vm" or None
