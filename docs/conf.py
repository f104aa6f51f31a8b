"""Sphinx configuration of the docs site (``make docs``; built strictly in ``make test``, tests/unit/test_docs.py).

Sphinx with MyST-Parser: the pages stay the Markdown they are on GitHub, the fault and checker references are
generated from the code (``_ext/chaos_reference.py``), and ``-W`` turns a broken link, a missing page or an
invalid docstring into a failed build.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "kafka-chaos"
extensions = ["myst_parser", "sphinx.ext.autodoc", "chaos_reference"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # links to a page's section (`page.md#a-section`) are checked like links to pages
html_theme = "furo"
html_title = "kafka-chaos"
