"""The documentation builds without warnings, and the code on every page runs (on the CPU)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from docpages import DOCS, REPO_ROOT, code_blocks, pages

PAGES = pages(DOCS)


def test_sphinx_builds_without_warnings(tmp_path) -> None:
    pytest.importorskip("sphinx", reason="sphinx is not installed (the `test` extra has it)")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed (the `test` extra has it)")
    command = [
        sys.executable,
        "-m",
        "sphinx",
        *"-W --keep-going -E -q -b html".split(),
        str(DOCS),
        str(tmp_path),
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout}\n{result.stderr}"
    built = {p.relative_to(tmp_path).with_suffix(".md") for p in tmp_path.rglob("*.html")}
    for page in PAGES:  # every page is in the toctree and built
        assert page.relative_to(DOCS) in built, f"{page} was not built"


def test_every_page_has_code_that_runs() -> None:
    assert PAGES, "no pages found in docs/"
    for page in PAGES:
        # index has no code; the executors' page is written by the executors' owners; examples.md
        # shows shell commands, which test_examples.py runs
        if page.name not in ("index.md", "writing-an-executor.md", "examples.md"):
            assert any(b.skip_reason is None for b in code_blocks(page)), f"{page} runs no code"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_code_runs(page, tmp_path, monkeypatch) -> None:
    blocks = code_blocks(page)
    if not blocks:
        pytest.skip(f"{page.name} has no python code blocks")
    monkeypatch.chdir(tmp_path)  # files a page writes land in a scratch folder
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    skipped = []
    torch.manual_seed(0)
    for block in blocks:
        if block.skip_reason is not None:
            skipped.append(f"line {block.line}: {block.skip_reason}")
            continue
        if block.raises:  # a script of its own that stops with an error (test_shown_output.py runs it so)
            with pytest.raises(Exception):  # noqa: B017 -- the page shows which (test_shown_output.py)
                exec(block.compiled(), {"__name__": "__main__"})
            continue
        exec(block.compiled(), namespace)
    if skipped:
        print(f"{page.name}: blocks not run: {skipped}")
