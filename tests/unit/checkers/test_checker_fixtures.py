"""Every hand-made fixture is judged exactly as fixtures/histories/MANIFEST.yaml says.

A checker is trusted only once it has caught known-bad histories (docs/architecture.md,
"Invariants"): each bad fixture must be flagged by exactly the expected checkers,
with evidence citing the right events; each near miss must pass.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import BrokerLogEvent, CommittedOffsets, read_history
from chaos.model.checker_name import CheckerName

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
MANIFEST = yaml.safe_load((FIXTURES / "MANIFEST.yaml").read_text())


def test_manifest_lists_every_fixture_and_only_known_checkers():
    assert set(MANIFEST) == {p.name for p in FIXTURES.glob("*.jsonl")}
    for spec in MANIFEST.values():
        for name in list(spec["expect"]) + list(spec["evidence"]):
            CheckerName(name)


def test_every_checker_has_a_failing_fixture_and_a_passing_one():
    failing = {c for spec in MANIFEST.values() for c, v in spec["expect"].items() if v == "false"}
    # the faults checker is a precondition, not an invariant: it answers unknown, never false
    assert failing == {c.value for c in CheckerName} - {"faults"}
    assert any(spec["expect"].get("faults") == "unknown" for spec in MANIFEST.values())
    near_misses = [n for n, spec in MANIFEST.items() if not spec["expect"]]
    assert len(near_misses) >= 10


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_fixture(name):
    spec = MANIFEST[name]
    verdict = run_checkers(read_history(FIXTURES / name))
    got = {r.checker.value: r.valid.value for r in verdict.results}
    want = {c.value: spec["expect"].get(c.value, "true") for c in CheckerName}
    assert got == want, {r.checker.value: r.summary for r in verdict.results
                         if got[r.checker.value] != want[r.checker.value]}
    for checker, seqs in spec["evidence"].items():
        result = verdict.result(checker)
        # a false answer cites its violations; an unknown one its findings (reported, not violations)
        cited = {s for f in (result.violations if result.valid is Validity.FALSE else result.findings)
                 for s in f.evidence}
        assert set(seqs) <= cited, f"{checker} cites {sorted(cited)}, expected to include {seqs}"
    for r in verdict.results:
        if r.valid is Validity.FALSE:
            assert r.violations and all(f.evidence for f in r.violations)


def test_zombie_window_metrics_reported():
    verdict = run_checkers(read_history(FIXTURES / "ownership-time-zombie-explained.jsonl"))
    r = verdict.result(CheckerName.OWNERSHIP_TIME)
    assert r.valid is Validity.TRUE
    assert r.metrics["zombie_windows"] == 1 and r.metrics["zombie_window_max_s"] > 1.0
    assert any("coordinator declared m0 failed" in f.description for f in r.findings)


def test_duplicates_counted_not_failed():
    r = run_checkers(read_history(FIXTURES / "delivery-duplicates.jsonl")).result(CheckerName.DELIVERY)
    assert r.valid is Validity.TRUE and r.metrics["duplicates"] == 2 and r.metrics["lost"] == 0


def test_time_to_recover_metric():
    r = run_checkers(read_history(FIXTURES / "realistic-eager-roundrobin-faults.jsonl")).result(CheckerName.CONVERGENCE)
    assert r.valid is Validity.TRUE and 0 < r.metrics["time_to_recover_s"] < r.metrics["bound_s"]


def test_deposed_coordinators_sample_is_set_aside_only_because_another_broker_loaded_the_group():
    history = read_history(FIXTURES / "committed-offsets-deposed-coordinator-read.jsonl")
    r = run_checkers(history, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.TRUE and r.metrics["stale_samples"] == 1, r.summary
    assert any("answered by broker 1 after broker 2 had loaded the group" in f.description for f in r.findings)
    # the same history without the new coordinator's loading line: the stale read is judged, and fails
    without = replace(history, events=tuple(e for e in history.events
                                            if getattr(e, "event", None) is not BrokerLogEvent.LOADING))
    r = run_checkers(without, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.FALSE and r.metrics["stale_samples"] == 0, r.summary


def test_new_coordinators_trailing_read_is_set_aside_only_when_the_same_broker_reads_the_commit_again():
    history = read_history(FIXTURES / "committed-offsets-new-coordinator-trailing-read.jsonl")
    r = run_checkers(history, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.TRUE and r.metrics["trailing_samples"] == 1, r.summary
    assert any("answered by broker 2 just after it loaded the group" in f.description for f in r.findings)
    # without the sample in which broker 2 reads t-0@4 again, the dip is a lost commit
    last = max(e.seq for e in history.events if isinstance(e, CommittedOffsets)
               and any(o == 4 for _, p, o in e.offsets if p == 0))
    without = replace(history, events=tuple(e for e in history.events if e.seq != last))
    r = run_checkers(without, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.FALSE and r.metrics["trailing_samples"] == 0, r.summary
    # nor without the new coordinator's loading line: nothing says a leader change happened
    unloaded = replace(history, events=tuple(e for e in history.events
                                             if getattr(e, "event", None) is not BrokerLogEvent.LOADING))
    r = run_checkers(unloaded, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.FALSE, r.summary
