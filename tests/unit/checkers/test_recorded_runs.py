"""Histories recorded from real clusters are judged as fixtures/histories/recorded/RECORDED.yaml says."""

from pathlib import Path

import pytest
import yaml

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import read_history
from chaos.model.checker_name import CheckerName

RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "histories" / "recorded"
MANIFEST = yaml.safe_load((RECORDED / "RECORDED.yaml").read_text())


def test_manifest_covers_every_recording():
    assert set(MANIFEST) == {p.name for p in RECORDED.glob("*.jsonl")}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_recorded_run(name):
    verdict = run_checkers(read_history(RECORDED / name))
    got = {r.checker.value: r.valid.value for r in verdict.results}
    want = {c.value: MANIFEST[name]["expect"].get(c.value, "true") for c in CheckerName}
    assert got == want, {r.checker.value: r.summary for r in verdict.results
                         if got[r.checker.value] != want[r.checker.value]}
    for r in verdict.results:
        if r.valid is Validity.FALSE:
            assert r.violations and all(f.evidence for f in r.violations)
