"""The Python versions whose bytecode thunder's interpreter runs, and the error for any other.

Each version compiles to its own instruction set (``vm/opcodes_*.py`` registers a handler per
version where an instruction's meaning differs), so a newer Python is refused up front instead of
failing somewhere inside the user's program with an error that names neither.
"""

from __future__ import annotations

import sys

__all__ = ["SUPPORTED_PYTHON_VERSIONS", "UnsupportedPythonError", "check_python_version"]

# Keep in step with every pyproject.toml's requires-python and classifiers, and noxfile.py's PYTHONS.
SUPPORTED_PYTHON_VERSIONS: tuple[tuple[int, int], ...] = ((3, 10), (3, 11), (3, 12), (3, 13))


class UnsupportedPythonError(RuntimeError):
    """thunder runs on a Python whose bytecode its interpreter does not know."""


def _spelled(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def check_python_version(version_info: tuple[int, ...] | None = None) -> None:
    """Raise ``UnsupportedPythonError`` unless the running Python (or ``version_info``) is supported.

    Args:
        version_info: a ``sys.version_info``-like tuple; the running interpreter's by default.

    Example::

        check_python_version((3, 14, 0))  # UnsupportedPythonError: ... Python 3.14.0 ...
    """
    info = tuple(sys.version_info if version_info is None else version_info)
    if (info[0], info[1]) in SUPPORTED_PYTHON_VERSIONS:
        return
    running = ".".join(str(part) for part in info[:3])
    supported = ", ".join(_spelled(version) for version in SUPPORTED_PYTHON_VERSIONS)
    raise UnsupportedPythonError(
        f"thunder does not support Python {running}: its interpreter runs the bytecode of Python "
        f"{supported} only. Use one of those (for example a virtual environment made with "
        f"python{_spelled(SUPPORTED_PYTHON_VERSIONS[-1])} -m venv)."
    )
