"""The kafka-python 2.x worker adapter (:mod:`chaos.workload.clients.kafka_python2`) on the 2.x releases it is
written for, no broker.

The project's environment has kafka-python 3, so each release's cases (``kafka_python2_cases.py``) run with
pytest in a subprocess whose ``PYTHONPATH`` starts with that release as prepared for a worker
(:func:`chaos.workload.libraries.ensure_library`: a no-op once ``make setup`` has prepared it; otherwise pip
fetches it from PyPI). 2.0.0 is the oldest release a member may name, 2.2.15 the last pinned 2.x, 2.3.3 the last
2.x.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.model.workload import Client
from chaos.workload.libraries import ensure_library, python_env

ROOT = Path(__file__).resolve().parents[3]
CASES = Path(__file__).with_name("kafka_python2_cases.py")
RELEASES = ("2.0.0", "2.2.15", "2.3.3")


def _cases() -> int:
    return len(re.findall(r"^def test_", CASES.read_text(), re.MULTILINE))


@pytest.mark.parametrize("release", RELEASES)
def test_the_2x_adapter_on_the_release_itself(release):
    lib = ensure_library(Client.KAFKA_PYTHON, release, progress=lambda _: None)
    env = python_env(lib, {**os.environ, "KAFKA_PYTHON_RELEASE": release, "KAFKA_PYTHON_SITE": str(lib.python_path),
                           "PYTHONDONTWRITEBYTECODE": "1"})
    # -p no:chaos: the plugin's fixtures are not needed, and the cases import nothing but the adapter
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:chaos", "-p", "no:cacheprovider",
                          "-W", "error::pytest.PytestUnraisableExceptionWarning", str(CASES)],
                         capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    # every case ran (a parametrized one counts once per parameter: at least as many as the file defines)
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", summary)) else 0
    assert passed >= _cases() and "skipped" not in summary, summary
