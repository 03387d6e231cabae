"""Sphinx configuration: Markdown pages (myst-parser), API pages from docstrings (autodoc + napoleon).

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (tests/docs/test_docs.py runs the same).
"""

project = "thunder"
author = "the thunder developers"
copyright = "the thunder developers"  # noqa: A001 -- Sphinx's name

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]

myst_heading_anchors = 3  # links to a page's sections: [text](page.md#a-section)

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = "thunder"
