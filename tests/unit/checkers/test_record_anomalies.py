"""The record-anomalies checker (issue 16, item 4) on hand-made bad histories and legal near misses.

The scenarios are built by fixtures/histories/make_anomaly_fixtures.py (also written there as
``anomaly-*.jsonl`` and judged with every checker by test_checker_fixtures.py); here each is judged by this
checker alone and its findings and figures read, and variations of them (a rebalance between the two
batches of a skip, a gap over offsets nothing shows to exist, ...) are judged too.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import yaml

from chaos.checkers.registry import CHECKERS, run_checkers
from chaos.checkers.result import Result, Validity
from chaos.history import Assigned, Consumed, Event, FinalRead, History, Revoked, SendOk, read_history
from chaos.model.checker_name import CheckerName
from tests.simulation import SimulationSpec, simulate

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
RECORDED = FIXTURES / "recorded"
sys.path.insert(0, str(FIXTURES))

import make_anomaly_fixtures as ma  # noqa: E402 - a script beside the fixtures, not a package

NAME = CheckerName.RECORD_ANOMALIES


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Build a scenario into tmp_path; it must equal the committed ``.jsonl`` (regenerate and review if not)."""
    monkeypatch.setattr(ma.mf, "HERE", tmp_path)

    def make(key: str) -> tuple[History, dict[str, int]]:
        fx, seqs = ma.builders()[key]()
        fx.write()
        path = tmp_path / f"{fx.name}.jsonl"
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), \
            "run python fixtures/histories/make_anomaly_fixtures.py and review the diff"
        return read_history(path), seqs

    return make


def judge(h: History) -> Result:
    return run_checkers(h, [NAME]).result(NAME)


def edited(h: History, events: list[Event]) -> History:
    """``h`` with ``events`` (renumbered 1..N in the given order)."""
    return History(h.header, tuple(dataclasses.replace(e, seq=i) for i, e in enumerate(events, 1)))


def test_registered_in_the_default_set():
    assert CHECKERS[NAME].__module__ == "chaos.checkers.record_anomalies"
    assert NAME in [r.checker for r in run_checkers(read_history(FIXTURES / "faults-healed-ok.jsonl")).results]


# ----------------------------------------------------------------------------------- poll skips, steps back


def test_skip_between_batches_within_one_generation_is_a_violation(build):
    h, s = build("skip_between")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "poll skip" in v.description and "offset 5 right after offset 2" in v.description
    assert "skipping 2 record(s)" in v.description and "generation 1" in v.description
    assert v.evidence == (s["assigned"], s["before"], s["after"])
    assert r.metrics["poll_skips"] == 1 and r.metrics["skipped_records"] == 2 and r.metrics["lost"] == 0


def test_the_same_skip_across_a_rebalance_is_counted_not_failed(build):
    h, s = build("skip_between")
    events = list(h.events)
    at = next(i for i, e in enumerate(events) if e.seq == s["after"])
    before = events[at]
    rebalance = [
        Revoked(0, before.ts, before.mono_ns, "consumer-0", "g", (("t", 0),), 1, "m0", False),
        Assigned(0, before.ts, before.mono_ns, "consumer-0", "g", (("t", 0),), 2, "m0", False),
    ]
    moved = dataclasses.replace(before, generation=2)
    r = judge(edited(h, events[:at] + rebalance + [moved] + events[at + 1:]))
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["poll_skips"] == 0 and r.metrics["poll_skips_across_rebalance"] == 1
    assert any("left to others (allowed across rebalances)" in f.description for f in r.findings)


def test_a_new_generation_without_an_assignment_event_ends_the_segment(build):
    # cooperative: a kept partition has no event; the generation the batch carries is what changes
    h, s = build("skip_between")
    events = [dataclasses.replace(e, generation=2) if e.seq == s["after"] else e for e in h.events]
    r = judge(edited(h, events))
    assert r.valid is Validity.TRUE and r.metrics["poll_skips_across_rebalance"] == 1, r.summary


def test_without_generations_the_holding_alone_is_the_segment(build):
    h, s = build("skip_between")
    events = [dataclasses.replace(e, generation=None) if type(e) in (Consumed, Assigned, Revoked) else e
              for e in h.events]
    r = judge(edited(h, events))
    assert r.valid is Validity.FALSE and r.metrics["poll_skips"] == 1, r.summary


def test_a_gap_over_offsets_nothing_shows_to_exist_is_not_judged(build):
    h, s = build("skip_between")
    gone = {3, 4}
    events = []
    for e in h.events:
        if type(e) is SendOk and e.partition == 0 and e.offset in gone:
            continue
        if type(e) is FinalRead:
            e = dataclasses.replace(e, records=tuple(r for r in e.records if not (r[0] == 0 and r[1] in gone)))
        events.append(e)
    r = judge(edited(h, events))
    assert r.valid is Validity.TRUE and r.metrics["poll_skips"] == 0, r.summary


def test_skip_inside_one_batch(build):
    h, s = build("skip_in_batch")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "offset 5 right after offset 3 within one batch" in v.description
    assert v.evidence == (s["assigned"], s["batch"])


def test_step_back_within_one_generation_is_a_violation(build):
    h, s = build("nonmonotonic")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "non-monotonic poll" in v.description and "offset 3 after offset 3" in v.description
    assert v.evidence == (s["assigned"], s["before"], s["after"])
    # the re-read is a duplicate too, within the segment: no rebalance to attribute it to
    assert r.metrics["duplicates"] == 1 and r.metrics["duplicates_within_segment"] == 1
    assert r.metrics["duplicates_after_rebalance"] == 0


def test_kip848_skip_within_one_member_epoch(build):
    h, s = build("kip848_skip")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "offset 4 right after offset 2" in v.description and "generation 3" in v.description
    assert v.evidence == (s["assigned"], s["before"], s["after"])


def test_kip848_kept_partition_across_epochs_and_moved_partition(build):
    h, s = build("kip848_epochs")
    r = judge(h)
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["duplicates"] == 1 and r.metrics["duplicates_after_rebalance"] == 1
    (note,) = [f for f in r.findings if "delivered again" in f.description]
    assert "rebalance into generation 4" in note.description and note.evidence == (s["again"],)


def test_cooperative_kept_partition_and_unknown_gap(build):
    h, s = build("cooperative")
    r = judge(h)
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["poll_skips"] == r.metrics["poll_skips_across_rebalance"] == 0


def test_batches_outside_a_holding_are_not_judged(build):
    # a zombie that revoked t-0 and went on reading it (wrong_mode ignore_revoke): ownership-time's business
    h, s = build("skip_between")
    events = list(h.events)
    at = next(i for i, e in enumerate(events) if e.seq == s["after"])
    e = events[at]
    revoke = Revoked(0, e.ts, e.mono_ns, "consumer-0", "g", (("t", 0),), 1, "m0", False)
    r = judge(edited(h, events[:at] + [revoke] + events[at:]))
    assert r.valid is Validity.TRUE and r.metrics["unowned_batches"] == 1, r.summary


def test_application_members_poll_order_is_not_judged(build):
    # an app member's consumed events are its own processing order (and its code may seek): counted, not judged
    h, _ = build("nonmonotonic")
    experiment = {**h.header.experiment, "workload": {"consumers": [{"app": "service:main"}, {"app": "service:main"}]}}
    r = judge(dataclasses.replace(h, header=dataclasses.replace(h.header, experiment=experiment)))
    assert r.valid is Validity.TRUE and r.metrics["application_batches"] == r.metrics["batches"] > 0, r.summary
    assert "application members not judged" in r.summary and r.metrics["duplicates"] == 1


# ----------------------------------------------------------------------------------- duplicates per rebalance


def test_duplicates_after_a_rebalance_are_a_rate_not_a_violation(build):
    h, s = build("duplicates")
    r = judge(h)
    assert r.valid is Validity.TRUE, r.summary
    m = r.metrics
    assert m["duplicates"] == 2 and m["duplicates_after_rebalance"] == 2 and m["rebalances"] == 1
    assert m["duplicates_per_rebalance"] == 2.0 and m["max_duplicates_one_rebalance"] == 2
    assert m["duplicates_per_1000_records"] == round(1000 * 2 / m["consumed_records"], 3)
    assert "2 duplicate(s), 2 after 1 rebalance(s): 2.00 per rebalance" in r.summary
    (note,) = [f for f in r.findings if not f.violation and "delivered again" in f.description]
    assert "generation 2" in note.description and note.evidence == (s["again"],)


def test_a_static_replacement_within_the_generation_follows_no_rebalance():
    # the recorded KIP-345 run: consumer-2 took consumer-0's instance id within generation 2
    r = judge(read_history(RECORDED / "duplicate-instance-id-replaced-in-generation.jsonl"))
    assert r.valid is Validity.TRUE
    assert r.metrics["duplicates"] > 0
    assert r.metrics["duplicates_without_rebalance"] == r.metrics["duplicates"]
    assert r.metrics["duplicates_after_rebalance"] == 0 and r.metrics["rebalances"] == 0


def test_a_member_reporting_the_new_generation_early_still_counts_the_rebalance():
    # cooperative, coordinator killed mid-rebalance: consumer-1 tagged its last old-holding batches with
    # generation 4 before losing them; its generation-4 holding re-reads them (after the rebalance into 4)
    r = judge(read_history(RECORDED / "coordinator-kill-completing-cooperative-lost.jsonl"))
    assert r.valid is Validity.TRUE
    assert r.metrics["duplicates"] == r.metrics["duplicates_after_rebalance"] > 0


def test_duplicate_count_agrees_with_delivery():
    paths = sorted(FIXTURES.glob("*.jsonl")) + sorted(RECORDED.glob("*.jsonl"))
    for path in paths:
        v = run_checkers(read_history(path), [CheckerName.DELIVERY, NAME])
        assert v.result(NAME).metrics["duplicates"] == v.result(CheckerName.DELIVERY).metrics["duplicates"], path.name


# ----------------------------------------------------------------------------------- lost, inconsistent offsets


def test_lost_write_agrees_with_delivery(build):
    h, s = build("lost_write")
    v = run_checkers(h, [CheckerName.DELIVERY, NAME])
    r, d = v.result(NAME), v.result(CheckerName.DELIVERY)
    assert r.valid is d.valid is Validity.FALSE
    (lost,) = r.violations
    assert lost.evidence == (s["s3"],) and {s["s3"]} <= {q for f in d.violations for q in f.evidence}
    assert "lost write" in lost.description and "delivery fails for the same record" in lost.description
    assert r.metrics["lost"] == d.metrics["lost"] == 1 and r.metrics["lost_writes"] == 1


def test_unseen_record_agrees_with_delivery():
    v = run_checkers(read_history(FIXTURES / "delivery-lost-record.jsonl"), [CheckerName.DELIVERY, NAME])
    r, d = v.result(NAME), v.result(CheckerName.DELIVERY)
    assert r.valid is d.valid is Validity.FALSE
    assert {q for f in r.violations for q in f.evidence} == {q for f in d.violations for q in f.evidence}
    assert r.metrics["unseen"] == d.metrics["lost"] == 1


def test_one_offset_acknowledged_for_two_records(build):
    h, s = build("inconsistent")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "acknowledged for two different records" in v.description and "other:7" in v.description
    assert v.evidence == (s["first"], s["second"])


def test_the_same_record_acknowledged_twice_is_consistent(build):
    h, s = build("inconsistent")
    first = next(e for e in h.events if e.seq == s["first"])
    events = [dataclasses.replace(e, key=first.key, value=first.value) if e.seq == s["second"] else e
              for e in h.events]
    r = judge(edited(h, events))
    assert r.valid is Validity.TRUE and r.metrics["offsets_acked_twice"] == 1, r.summary


def test_a_record_read_then_missing_from_the_final_read_vanished(build):
    h, s = build("vanished")
    r = judge(h)
    assert r.valid is Validity.FALSE
    (v,) = r.violations
    assert "t-0@2" in v.description and "vanished" in v.description
    assert v.evidence == (s["read"], s["final"])


def test_below_the_final_readers_first_offset_nothing_is_judged(build):
    # the log may start later (retention, DeleteRecords): only holes inside what the final reader read count
    h, s = build("vanished")
    events = [dataclasses.replace(e, records=tuple(x for x in e.records if not (x[0] == 0 and x[1] < 3)))
              if type(e) is FinalRead else e for e in h.events]
    assert judge(edited(h, events)).valid is Validity.TRUE


def test_record_content_is_reported_unknown_not_passed(build):
    h, _ = build("duplicates")
    r = judge(h)
    assert "record content unknown" in r.summary and "not judged" in r.summary
    assert r.metrics["content_unjudged_reads"] == r.metrics["consumed_records"]


# ----------------------------------------------------------------------------------- no evidence


def test_no_consumed_record_is_unknown_never_true():
    r = judge(read_history(FIXTURES / "assignor-sticky-moved.jsonl"))
    assert r.valid is Validity.UNKNOWN and "no record was consumed" in r.summary


def test_no_recorded_holding_is_unknown(build):
    h, _ = build("duplicates")
    events = [e for e in h.events if type(e) is not Assigned]
    r = judge(edited(h, events))
    assert r.valid is Validity.UNKNOWN and "poll skips cannot be judged" in r.summary


# ----------------------------------------------------------------------------------- real and simulated runs


def test_recorded_real_runs():
    """Every false on a real run is a real anomaly: the deliberately wrong consumers."""
    want = {"wrong-skip-records.jsonl": Validity.FALSE, "wrong-ignore-revoke.jsonl": Validity.FALSE}
    manifest = yaml.safe_load((RECORDED / "RECORDED.yaml").read_text())
    for name in manifest:
        r = judge(read_history(RECORDED / name))
        assert r.valid is want.get(name, Validity.TRUE), (name, r.summary)
    skips = judge(read_history(RECORDED / "wrong-skip-records.jsonl"))
    # skip_records drops every skip_every-th record it polled, unprocessed: one record per skip, inside a batch or
    # at its start (then between two batches)
    assert skips.metrics["poll_skips"] == skips.metrics["skipped_records"] > 0
    assert all(f.description.startswith("poll skip") and "skipping 1 record(s)" in f.description
               for f in skips.violations)
    zombie = judge(read_history(RECORDED / "wrong-ignore-revoke.jsonl"))
    # ignore_revoke processes queued records of a revoked partition; given it back, it steps back to the commit
    assert zombie.metrics["nonmonotonic_polls"] > 0 and zombie.metrics["poll_skips"] == 0
    assert zombie.metrics["unowned_batches"] > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulated_runs_pass_with_figures(seed):
    r = judge(simulate(SimulationSpec(seed=seed, events=3000, members=3, partitions=5)))
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["poll_skips"] == r.metrics["nonmonotonic_polls"] == 0
    assert r.metrics["duplicates"] == (r.metrics["duplicates_after_rebalance"] + r.metrics["duplicates_within_segment"]
                                       + r.metrics["duplicates_without_rebalance"]
                                       + r.metrics["duplicates_unattributed"])
