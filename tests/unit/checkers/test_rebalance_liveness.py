"""The rebalance-liveness checker (issue 17) on hand-made bad histories and legal near misses.

The scenarios are built by fixtures/histories/make_liveness_fixtures.py (also written there as
``liveness-*.jsonl`` and judged with every checker by test_checker_fixtures.py); here each is judged by
this checker alone and its findings read: the cause, the member ids waited for and whether each was
alive or a ghost, and the figures that go into checks.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chaos.checkers.registry import CHECKERS, run_checkers
from chaos.checkers.result import Validity
from chaos.history import History, read_history
from chaos.model.checker_name import CheckerName

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
sys.path.insert(0, str(FIXTURES))

import make_liveness_fixtures as ml  # noqa: E402 - a script beside the fixtures, not a package

NAME = CheckerName.REBALANCE_LIVENESS


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Build a scenario into tmp_path; it must equal the committed ``.jsonl`` (regenerate and review if not)."""
    monkeypatch.setattr(ml.mf, "HERE", tmp_path)

    def make(key: str) -> tuple[History, dict[str, int]]:
        fx, seqs = ml.builders()[key]()
        fx.write()
        path = tmp_path / f"{fx.name}.jsonl"
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), \
            "run python fixtures/histories/make_liveness_fixtures.py and review the diff"
        return read_history(path), seqs

    return make


def judge(h: History):
    return run_checkers(h, [NAME]).result(NAME)


def test_registered_in_the_default_set():
    assert CHECKERS[NAME].__module__ == "chaos.checkers.rebalance_liveness"
    assert NAME in [r.checker for r in run_checkers(read_history(FIXTURES / "faults-healed-ok.jsonl")).results]


def test_ghost_member_blocks_the_join_phase(build):
    h, s = build("ghost")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "join phase" in v.description and "40.0s" in v.description
    assert "m2 (consumer-2): ghost" in v.description and "m2b" in v.description
    assert "no fault in effect explains" in v.description
    assert {s["prep"], s["failed"], s["new_id"]} <= set(v.evidence)
    assert r.metrics["longest_rebalance_s"] == pytest.approx(40.0, abs=0.5)
    assert r.metrics["unavailable_s:t-2"] > 39  # consumer-2's partition had no owner while the group waited
    assert r.metrics["violations"] == 1


def test_paused_member_is_reported_with_its_cause_not_failed(build):
    h, s = build("paused")
    r = judge(h)
    assert r.valid is Validity.TRUE, r.summary
    (note,) = [f for f in r.findings if not f.violation]
    assert "33.0s" in note.description and "fault f1 (pause on consumer-1)" in note.description
    assert "m1 (consumer-1): alive" in note.description
    assert s["fault"] in note.evidence
    assert r.metrics["phases_over_bound_explained"] == 1
    assert "explained" in r.summary and "pause on consumer-1" in r.summary


def test_coordinator_failover_mid_rebalance_is_a_near_miss(build):
    h, s = build("failover")
    r = judge(h)
    assert r.valid is Validity.TRUE, r.summary
    (note,) = [f for f in r.findings if not f.violation]
    assert "sync phase" in note.description and "coordinator failover" in note.description
    assert "kill on broker-1" in note.description
    assert {s["stab"], s["fault"], s["loading"]} <= set(note.evidence)


def test_kip848_reconciliation_over_its_bound(build):
    h, s = build("kip848")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "reconciliation of group epoch 3" in v.description
    assert "m1 (consumer-1): alive" in v.description and "m0" not in v.description
    assert {s["bump"], s["last"]} <= set(v.evidence)


def test_the_same_wait_within_the_bound_passes(build):
    """The ghost scenario cut to 25 s of waiting (under the 30 s rebalance timeout) is legal."""
    h, _ = build("ghost")
    cut = _drop_samples(h, keep_first=25)
    r = judge(cut)
    assert r.valid is Validity.TRUE, r.summary


def test_no_sample_is_unknown_never_true(build):
    h, _ = build("ghost")
    bare = History(h.header, tuple(e for e in h.events if e.kind.value != "group_state"), h.notes)
    r = judge(bare)
    assert r.valid is Validity.UNKNOWN and "no usable group_state sample" in r.summary


def test_figures_for_checks_json(build):
    h, _ = build("paused")
    r = judge(h)
    for key in ("rebalances", "longest_rebalance_s", "unavailable_max_s", "unavailable_total_s",
                "phases_over_bound", "join_bound_s", "sync_bound_s"):
        assert key in r.metrics
    # consumer-1, paused, held t-1 until consumer-3 got it: time without a consuming owner
    assert r.metrics["unavailable_s:t-1"] == pytest.approx(r.metrics["unavailable_max_s"])
    assert r.metrics["unavailable_s:t-1"] > 30
    assert r.metrics["unavailable_s:t-0"] < 0.1


def _drop_samples(h: History, keep_first: int) -> History:
    """The history with the PreparingRebalance samples after the first ``keep_first`` removed and every later
    event moved earlier by the time removed (a shorter wait)."""
    from dataclasses import replace

    out, seen, shift = [], 0, 0
    for e in h.events:
        if e.kind.value == "group_state" and getattr(e, "state", None) == "PreparingRebalance":
            seen += 1
            if seen > keep_first:
                shift += 1_000_000_000
                continue
        out.append(replace(e, mono_ns=e.mono_ns - shift, ts=e.ts - shift / 1e9))
    return History(h.header, tuple(out), h.notes)


def test_a_member_stuck_on_a_lost_sync_group_answer_is_reported_in_its_partitions_figure():
    """Issue 33: the coordinator had the group Stable while consumer-1 waited for a SyncGroup answer the kafka toxic
    dropped. No rebalance phase was long (the coordinator's view), so nothing fails; the gap is the partition's:
    t-1 without a consuming owner for the ~5 s consumer-1 waited, named in the summary."""
    h = read_history(FIXTURES / "liveness-sync-group-answer-lost-reported.jsonl")
    (r,) = run_checkers(h, [CheckerName.REBALANCE_LIVENESS]).results
    assert r.valid is Validity.TRUE
    assert 5.0 <= r.metrics["unavailable_s:t-1"] <= 5.2 and r.metrics["unavailable_s:t-0"] < 0.2
    assert "longest time without a consuming owner 5.1s (t-1)" in r.summary
