"""Sphinx configuration: MyST Markdown pages, autodoc with numpydoc-style docstrings."""

project = "odeflow"
author = "the odeflow developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
myst_enable_extensions = ["dollarmath", "amsmath"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
html_theme = "alabaster"
suppress_warnings = ["myst.header"]
