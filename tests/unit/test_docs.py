"""The docs site builds strictly, every ``chaos.*`` name the docs give resolves, and their Python examples
hold together (issue 32 item 3).

The site: Sphinx with MyST-Parser (``docs/conf.py``), built with ``-W`` so a broken link between pages, a
missing page or an invalid docstring in the generated fault and checker references fails here. The
examples: the README's command-line block runs (``test_readme.py``) and its pytest example runs on a real
cluster (``tests/integration/test_pytest_plugin.py``); the Python blocks of a page need a cluster, so here
each page's blocks, read in order as one program (a later block uses an earlier one's imports), must
compile, import what they import, and use no name they never define (ruff's pyflakes rules).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
#: a dotted name given in backticks: `chaos.model.workload.MEMBER_ENV`, `chaos.lifecycle.Run`
DOTTED = re.compile(r"`(chaos(?:\.[A-Za-z_]\w*)+)")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("sphinx")
    res = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(ROOT / "docs"), str(tmp_path / "html"), "-d", str(tmp_path / "doctrees")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # nothing written under docs/
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr[-4000:]
    faults = (tmp_path / "html" / "reference" / "faults.html").read_text()
    checkers = (tmp_path / "html" / "reference" / "checkers.html").read_text()
    # the references are generated from the registries: every kind and every checker is there
    from chaos.checkers.registry import CHECKERS
    from chaos.nemesis.kinds import kinds
    assert all(f">{name}<" in faults for name in kinds()), "a fault kind missing from the reference"
    assert all(f">{name.value}<" in checkers for name in CHECKERS), "a checker missing from the reference"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _fixture_method(dotted: str) -> bool:
    """``chaos.kill``: a method of the pytest plugin's ``chaos`` fixture (a ``ChaosControl``), not a module."""
    from chaos.harness import ChaosControl

    parts = dotted.split(".")
    return len(parts) == 2 and not parts[1].startswith("_") and hasattr(ChaosControl, parts[1])


def test_every_dotted_chaos_name_in_the_docs_resolves():
    names = {(page.name, m) for page in PAGES for m in DOTTED.findall(page.read_text())}
    assert len(names) > 30  # the pattern finds what the docs name
    missing = sorted(f"{page}: {name}" for page, name in names if not (_resolves(name) or _fixture_method(name)))
    assert not missing, missing


def test_resolving_fails_on_a_name_that_is_not_there():
    assert _resolves("chaos.lifecycle.Run") and _resolves("chaos.model.workload")
    assert not _resolves("chaos.lifecycle.NoSuchThing") and not _resolves("chaos.no_such_module")
    assert _fixture_method("chaos.kill") and not _fixture_method("chaos.no_such_fault")


#: README's one Python example (two files) runs on a real cluster: tests/integration/test_pytest_plugin.py
EXAMPLE_PAGES = [p for p in PAGES[1:] if PYTHON_BLOCK.search(p.read_text())]


def test_the_example_pages_are_found():
    assert {p.name for p in EXAMPLE_PAGES} >= {"python-api.md", "docker.md"}


def _is_submodule(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return False


def _example_problems(name: str, program: str, tmp: Path) -> list[str]:
    """What is wrong with a page's examples read as one program: an import that fails, a name never defined."""
    problems = []
    tree = ast.parse(program, filename=name)
    for node in ast.walk(tree):  # what the examples import exists
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            problems += [f"from {node.module} import {a.name}" for a in node.names
                         if not hasattr(module, a.name) and not _is_submodule(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
    example = tmp / f"{Path(name).stem}.py"
    example.write_text(program)
    res = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "--isolated", "--select", "F821,F822,F823",
                          "--output-format", "concise", str(example)], capture_output=True, text=True, timeout=60)
    return problems + ([res.stdout] if res.returncode else [])


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_a_pages_python_examples_compile_import_and_define_every_name(page, tmp_path):
    problems = _example_problems(page.name, "\n".join(PYTHON_BLOCK.findall(page.read_text())), tmp_path)
    assert not problems, f"{page.name}: {problems}"


def test_an_example_using_a_name_it_never_imports_is_caught(tmp_path):
    """The docker page's example before its ClusterSpec import was added: a name used, never imported."""
    program = "from chaos.cluster.container_cluster import DockerCluster\n\nDockerCluster(ClusterSpec(brokers=3))\n"
    assert any("F821" in p and "ClusterSpec" in p for p in _example_problems("docker.md", program, tmp_path))
    assert _example_problems("x.md", "from chaos.lifecycle import NoSuchThing\n", tmp_path) == [
        "from chaos.lifecycle import NoSuchThing"]
