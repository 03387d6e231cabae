"""The runnable code of a documentation page: its ```python blocks, in order.

A block whose first line is ``# not run: <reason>`` is shown on the page but not run (the reason
says why, e.g. it needs a GPU); every other ```python block runs, in page order, in one namespace.

A ```text block that directly follows a ```python block (only blank lines between) is the output
that block prints, stdout and stderr together; on the pages test_shown_output.py lists, it must be
what the code really prints, ``...`` standing for any text (a timing, a path).

A block whose shown output is a traceback is a script that stops with an error: it runs on its own,
in a fresh interpreter (``run_as_script``), so that the traceback is the one a user sees.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
EXAMPLES = REPO_ROOT / "examples"
NOT_RUN = "# not run:"
TRACEBACK = "Traceback (most recent call last):"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_OUTPUT = re.compile(r"\n*```text[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)  # right after a python block


@dataclass(frozen=True)
class CodeBlock:
    page: Path
    line: int  # 1-based line of the first line of code in the page
    source: str
    output: str | None = None  # the ```text block shown right after it, if any

    @property
    def skip_reason(self) -> str | None:
        first = self.source.lstrip().splitlines()[0] if self.source.strip() else ""
        return first[len(NOT_RUN) :].strip() if first.startswith(NOT_RUN) else None

    @property
    def raises(self) -> bool:
        """Whether the block is a script that stops with an error (the output it shows is a traceback)."""
        return self.output is not None and self.output.startswith(TRACEBACK)

    def compiled(self):
        """The block as code whose line numbers are the page's, so errors point at the page."""
        return compile(self._numbered_source(), str(self.page), "exec")

    def run_as_script(self, folder: Path) -> str:
        """What ``python <page name>`` prints, stdout and stderr together, when the file holds the block
        at the page's line numbers: the block run as a script, its traceback printed by Python itself.
        thunder's environment variables (THUNDER_FULL_TRACEBACK, THUNDER_LOGS, ...) are left out."""
        script = folder / self.page.name
        script.write_text(self._numbered_source(), encoding="utf-8")
        kept = ("THUNDER_CACHE_DIR", "THUNDER_DISK_CACHE")  # the test run's cache settings (conftest.py)
        environment = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_") or k in kept}
        environment["PYTHON_COLORS"] = "0"  # 3.13 colours tracebacks when told to
        result = subprocess.run(
            [sys.executable, script.name],
            cwd=folder,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        return result.stdout

    def _numbered_source(self) -> str:
        return "\n" * (self.line - 1) + self.source


def code_blocks(page: Path) -> list[CodeBlock]:
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        output = _OUTPUT.match(text, match.end() + 1)
        line = text.count("\n", 0, match.start(1)) + 1
        blocks.append(CodeBlock(page, line, match.group(1), output.group(1) if output else None))
    return blocks


def pages(docs: Path) -> list[Path]:
    return sorted(p for p in docs.rglob("*.md") if "_build" not in p.parts)
