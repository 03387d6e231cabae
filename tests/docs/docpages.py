"""The runnable code of a documentation page: its ```python blocks, in order.

A block whose first line is ``# not run: <reason>`` is shown on the page but not run (the reason
says why, e.g. it needs a GPU); every other ```python block runs, in page order, in one namespace.

A ```text block that directly follows a ```python block (only blank lines between) is the output
that block prints, stdout and stderr together; on the pages test_shown_output.py lists, it must be
what the code really prints, ``...`` standing for any text (a timing, a path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
EXAMPLES = REPO_ROOT / "examples"
NOT_RUN = "# not run:"
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

    def compiled(self):
        """The block as code whose line numbers are the page's, so errors point at the page."""
        return compile("\n" * (self.line - 1) + self.source, str(self.page), "exec")


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
