"""The output a page shows is what its code really prints.

On the pages listed here, every ```python block directly followed by a ```text block (docpages.py)
is run, in page order and in one namespace, with stdout and stderr captured together, and what it
printed must match the text block: ``...`` in the text stands for any text (a timing, a path, a line
number that moves whenever the page above it changes). To show a new example, with its real output, add
such a pair to a listed page; to check another page's pairs, list it here. A block whose output is
a traceback runs as a script in a fresh interpreter instead (docpages.CodeBlock.run_as_script), so
that the page shows the traceback exactly as Python prints it for a user's script.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys

import pytest
import torch
from docpages import DOCS, code_blocks

CHECKED_PAGES = ("diagnostics.md", "distributed.md", "compile-cache.md")


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what ``shown`` shows, each ``...`` standing for any text."""
    shown, printed = _normalized(shown), _normalized(printed)
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed, flags=re.S) is not None


def test_matches() -> None:
    assert matches("a ... s\n", "a 0.02 s")
    assert matches("cannot: ...", "cannot: ...")
    assert not matches("a 1 s", "a 2 s")
    assert not matches("one line", "one line\nand another")


@pytest.mark.parametrize("name", CHECKED_PAGES)
def test_shown_output_is_printed(name: str, tmp_path, monkeypatch) -> None:
    page = DOCS / name
    blocks = [b for b in code_blocks(page) if b.skip_reason is None]
    assert any(b.output is not None for b in blocks), f"{name} shows no output to check"
    monkeypatch.chdir(tmp_path)  # files a page writes land in a scratch folder
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    torch.manual_seed(0)
    for block in blocks:
        if block.raises:
            if sys.version_info < (3, 11):  # 3.10 prints no exception notes, and one frame of thunder's
                continue
            printed = block.run_as_script(tmp_path)
        else:
            captured = io.StringIO()
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                exec(block.compiled(), namespace)
            printed = captured.getvalue()
        if block.output is not None:
            assert matches(block.output, printed), (
                f"{name}, the block at line {block.line} prints:\n{printed}\nbut the page shows:\n{block.output}"
            )
