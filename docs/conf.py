"""Sphinx configuration of the jaxpapers documentation site.

Build (README): ``pip install -e ".[docs]" && sphinx-build -W -b html docs build/docs``.
"""

import os
import sys

# experiments/ is read from the checkout (it is not installed), like the binaries.
sys.path.insert(0, os.path.abspath(".."))

import jaxpapers  # pylint: disable=wrong-import-position

project = "jaxpapers"
copyright = "2026, the jaxpapers authors"  # pylint: disable=redefined-builtin
release = jaxpapers.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax served from the site itself (_static/mathjax), not from a CDN:
    # the site renders its formulas offline.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
root_doc = "index"
exclude_patterns = ["_build", "build"]

# Google-style docstrings (Args:, Returns:), as optax and flax write them.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes of NamedTuples as fields of the class, not a second description.
napoleon_use_ivar = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True,
                           "undoc-members": False}

html_theme = "sphinx_book_theme"
html_title = f"jaxpapers {release}"
html_theme_options = {"repository_url": "https://github.com/jaxpapers/jaxpapers",
                      "use_repository_button": False, "show_toc_level": 2}
