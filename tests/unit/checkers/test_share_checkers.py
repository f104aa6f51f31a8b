"""Share groups (issue 36, KIP-932): the share events read and write back, and the five share checkers on the
hand-made histories of fixtures/histories/make_share_fixtures.py, their variations, and consumer-group histories.

The fixtures themselves (each bad history fires its checker citing the right seqs, each near miss passes, every
other checker answers as MANIFEST.yaml says) are judged by test_checker_fixtures.py; here: what each finding
says, the boundaries of each rule (one event moved across the slack or the bound), and the answers without
evidence (``true`` without a share group, ``unknown`` with share events but not what a checker needs).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.checkers import evidence
from chaos.checkers.registry import CHECKERS, run_checkers
from chaos.checkers.result import Result, Validity
from chaos.history import (
    EVENT_CLASS,
    History,
    Kind,
    ShareAcknowledged,
    ShareAckType,
    ShareAcquired,
    ShareGroupStateSample,
    ShareLockExpired,
    from_dict,
    read_history,
    to_dict,
    write_history,
)
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
sys.path.insert(0, str(FIXTURES))

import make_share_fixtures as ms  # noqa: E402 - a script beside the fixtures, not a package

SHARE = (CheckerName.SHARE_OWNERSHIP, CheckerName.SHARE_DELIVERY, CheckerName.SHARE_COMPLETION,
         CheckerName.SHARE_PROGRESS, CheckerName.SHARE_PROCESSING)
MODULES = {CheckerName.SHARE_OWNERSHIP: "share_ownership", CheckerName.SHARE_DELIVERY: "share_delivery",
           CheckerName.SHARE_COMPLETION: "share_completion", CheckerName.SHARE_PROGRESS: "share_progress",
           CheckerName.SHARE_PROCESSING: "share_processing"}


def built(name: str) -> tuple[History, dict[str, int]]:
    """The scenario ``name`` of make_share_fixtures as a history (not written), and its named seqs."""
    fx, seqs = ms.builders()[name]()
    return _history(fx.header, fx.events), seqs


def _history(header: dict[str, Any], events: list[dict[str, Any]]) -> History:
    from chaos.history import header_from_dict

    return History(header_from_dict(header), tuple(from_dict(e) for e in events))


def edited(name: str, edit: Any) -> tuple[History, dict[str, int]]:
    """The scenario with each event dict passed through ``edit`` (return None to drop it), renumbered in order."""
    fx, seqs = ms.builders()[name]()
    events = [x for e in fx.events if (x := edit(dict(e))) is not None]
    events.sort(key=lambda e: e["mono_ns"])
    return _history(fx.header, [{**e, "seq": i} for i, e in enumerate(events, 1)]), seqs


def judge(h: History, name: CheckerName) -> Result:
    return run_checkers(h, [name]).result(name)


def cited(r: Result) -> set[int]:
    return {s for f in (r.violations if r.valid is Validity.FALSE else r.findings) for s in f.evidence}


# ----------------------------------------------------------------------------------------------- the events


def test_the_share_kinds_are_registered():
    assert {Kind.SHARE_ACQUIRED, Kind.SHARE_ACKNOWLEDGED, Kind.SHARE_LOCK_EXPIRED, Kind.SHARE_GROUP_STATE} <= set(Kind)
    assert EVENT_CLASS[Kind.SHARE_GROUP_STATE] is ShareGroupStateSample


def test_share_events_write_and_read_back(tmp_path):
    """Every share event of every scenario, through a history file and back: the same records, in order."""
    for name in ms.builders():
        h, _ = built(name)
        path = tmp_path / f"{name}.jsonl"
        write_history(path, h)
        back = read_history(path)
        assert back.events == h.events, name
    h, _ = built("late_ack")
    kinds = {type(e) for e in h.events}
    assert {ShareAcquired, ShareAcknowledged, ShareLockExpired, ShareGroupStateSample} <= kinds


def test_share_fields_are_typed_and_optional_ones_left_out_at_their_default():
    acq = from_dict({"seq": 1, "ts": 1.0, "mono_ns": 10, "source": "consumer-0", "kind": "share_acquired",
                     "group": "sg", "topic": "t", "partition": 0, "offsets": [3, 4], "delivery_count": None,
                     "member_id": None, "lock_duration_ms": 15000, "fetched_ns": 7})
    assert isinstance(acq, ShareAcquired) and acq.offsets == (3, 4) and acq.fetched_ns == 7
    assert "ts_uncertain_ns" not in to_dict(acq) and to_dict(acq)["lock_duration_ms"] == 15000
    ack = from_dict({"seq": 2, "ts": 1.0, "mono_ns": 11, "source": "consumer-0", "kind": "share_acknowledged",
                     "group": "sg", "topic": "t", "partition": 0, "offsets": [3], "ack_type": "renew",
                     "member_id": "m0", "outcome": "fail", "error_code": 121, "error_name": "INVALID_RECORD_STATE"})
    assert isinstance(ack, ShareAcknowledged) and ack.ack_type is ShareAckType.RENEW and ack.outcome is Outcome.FAIL
    assert "answered_ns" not in to_dict(ack)


@pytest.mark.parametrize(("field", "value"), [("ack_type", "commit"), ("outcome", "maybe"), ("offsets", [1, "2"])])
def test_a_wrong_share_acknowledgement_is_refused(field, value):
    from chaos.history import SchemaError

    good = {"seq": 1, "ts": 1.0, "mono_ns": 10, "source": "consumer-0", "kind": "share_acknowledged", "group": "sg",
            "topic": "t", "partition": 0, "offsets": [3], "ack_type": "accept", "member_id": "m0", "outcome": "ok",
            "error_code": None, "error_name": None}
    from_dict(good)
    with pytest.raises(SchemaError, match=field):
        from_dict({**good, field: value})


# ----------------------------------------------------------------------------------- registered, not gated


def test_registered_in_the_default_set_and_never_gated_by_member_evidence():
    for name in SHARE:
        assert CHECKERS[name].__module__ == f"chaos.checkers.{MODULES[name]}"
        # no member-side evidence kind of consumer groups applies: an app member lacking consumed/ownership
        # events does not turn a share checker's answer into unknown, nor pass one
        assert name not in evidence.NEEDS
        r = Result(name, Validity.TRUE, "judged")
        assert evidence.gate(r, {kind: ["consumer-0"] for kind in evidence.MemberEvidence},
                             {"consumer-0": "app"}) is r


@pytest.mark.parametrize("fixture", ["delivery-lost-record.jsonl", "ownership-time-zombie-explained.jsonl",
                                     "realistic-eager-roundrobin-faults.jsonl"])
def test_a_consumer_group_history_has_no_share_group_to_judge(fixture):
    v = run_checkers(read_history(FIXTURES / fixture))
    for name in SHARE:
        r = v.result(name)
        assert r.valid is Validity.TRUE and r.summary == "no share group in the history: nothing to judge", r.summary
        assert r.metrics == {"share_groups": 0} and not r.findings


def test_an_empty_history_is_true_for_every_share_checker():
    h, _ = built("overlap")
    empty = History(h.header, ())
    assert all(judge(empty, n).valid is Validity.TRUE for n in SHARE)


def _only_samples(h: History) -> History:
    return dataclasses.replace(h, events=tuple(e for e in h.events if not isinstance(
        e, ShareAcquired | ShareAcknowledged | ShareLockExpired)))


def test_share_samples_without_any_acquisition_leave_ownership_and_delivery_unknown():
    h = _only_samples(built("overlap")[0])
    for name in (CheckerName.SHARE_OWNERSHIP, CheckerName.SHARE_DELIVERY):
        r = judge(h, name)
        assert r.valid is Validity.UNKNOWN and "no member recorded an acquisition" in r.summary, r.summary


# -------------------------------------------------------------------------------------------- share-ownership


def test_two_holders_at_once():
    h, s = built("overlap")
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.FALSE and len(r.violations) == 1
    assert {s["first"], s["second"]} <= cited(r)
    assert "t-0@0 held by consumer-0 (delivery 1" in r.violations[0].description
    assert r.metrics["overlaps"] == 1


def test_the_same_acquisitions_after_the_lock_ran_out_are_not_an_overlap():
    """Near miss: consumer-1's acquisition moved from 0.5 s to 2.6 s after consumer-0's (2 s lock, 0.5 s slack)."""
    h, s = edited("overlap", lambda e: _later(e, 2.1))
    assert judge(h, CheckerName.SHARE_OWNERSHIP).valid is Validity.TRUE


def test_an_overlap_within_the_slack_is_not_judged():
    """Near miss: consumer-1's acquisition 0.3 s before consumer-0's lock could have run out (slack 0.5 s)."""
    h, _ = edited("overlap", lambda e: _later(e, 1.2))
    assert judge(h, CheckerName.SHARE_OWNERSHIP).valid is Validity.TRUE


def _later(e: dict[str, Any], by_s: float) -> dict[str, Any]:
    """consumer-1's acquisition of t-0@0 and its accept, ``by_s`` later."""
    if e["source"] != "consumer-1" or e["offsets"] != [0]:
        return e
    shift = int(by_s * 1e9)
    return {**e, **{k: e[k] + shift for k in ("mono_ns", "fetched_ns", "answered_ns") if k in e}}


def test_without_the_fetch_time_an_overlap_is_not_certain():
    h, _ = edited("overlap", lambda e: {k: v for k, v in e.items() if k != "fetched_ns"})
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.TRUE and r.metrics["holds_with_bounded_lock"] == 0


def test_an_overlap_across_a_broker_kill_is_explained():
    h, s = built("spso_equal_across_failover")
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.TRUE and r.metrics["overlaps_explained"] == 1
    assert any("explained by fault f0" in f.description and s["kill"] in f.evidence for f in r.findings)


def test_a_late_acknowledgement_answered_ok():
    h, s = built("late_ack")
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.FALSE and {s["acquired"], s["ack"], s["expired"]} <= cited(r)
    text = r.violations[0].description
    assert "ran out by" in text and "recorded its lock as expired" in text, text


def test_the_same_late_acknowledgement_refused_is_what_kafka_owes():
    h, _ = edited("late_ack", lambda e: {**e, "outcome": "fail", "error_code": 121,
                                         "error_name": "INVALID_RECORD_STATE"}
                  if e["kind"] == "share_acknowledged" and e["offsets"] == [0] else e)
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.TRUE and r.metrics["late_refused"] == 1


def test_a_renewal_moves_the_deadline():
    """KIP-1222: a renewal answered ok 1.5 s after the acquisition restarts the 2 s lock: the accept at 3 s is in
    time."""
    fx, s = ms.builders()["late_ack"]()
    acquired = next(e for e in fx.events if e["seq"] == s["acquired"])
    at = acquired["mono_ns"] + int(1.5e9)
    renew = {"seq": 0, "ts": 0.0, "mono_ns": at, "source": "consumer-0", "kind": "share_acknowledged", "group": "sg",
             "topic": "t", "partition": 0, "offsets": [0], "ack_type": "renew", "member_id": "m0", "outcome": "ok",
             "error_code": None, "error_name": None, "answered_ns": at + 2_000_000}
    events = sorted([*fx.events, renew], key=lambda e: e["mono_ns"])
    h = _history(fx.header, [{**e, "seq": i} for i, e in enumerate(events, 1)])
    assert judge(h, CheckerName.SHARE_OWNERSHIP).valid is Validity.TRUE
    # refused, the renewal does not move it
    refused = [{**e, "outcome": "fail", "error_name": "INVALID_RECORD_STATE", "error_code": 121}
               if e is renew else e for e in events]
    h = _history(fx.header, [{**e, "seq": i} for i, e in enumerate(refused, 1)])
    assert judge(h, CheckerName.SHARE_OWNERSHIP).valid is Validity.FALSE
    # unanswered (the commit failed), it may have been applied at any moment after: the lock's end is not bounded,
    # so the late accept is not certainly past it
    unknown = [{**e, "outcome": "unknown", "answered_ns": None} if e is renew else e for e in events]
    h = _history(fx.header, [{**e, "seq": i} for i, e in enumerate(unknown, 1)])
    assert judge(h, CheckerName.SHARE_OWNERSHIP).valid is Validity.TRUE


def test_an_acknowledgement_after_another_member_acquired_the_record():
    h, s = built("foreign_ack")
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.FALSE and {s["first"], s["second"], s["ack"]} <= cited(r)
    assert "no longer consumer-0's to acknowledge" in r.violations[0].description
    # the contradiction is share-ownership's: share-delivery does not blame a redelivery for it
    assert judge(h, CheckerName.SHARE_DELIVERY).valid is Validity.TRUE


def test_an_acknowledgement_of_a_record_never_acquired():
    h, _ = built("overlap")
    stray = from_dict({"seq": len(h.events) + 1, "ts": 1.0, "mono_ns": h.events[-1].mono_ns + 1,
                       "source": "consumer-1", "kind": "share_acknowledged", "group": "sg", "topic": "t",
                       "partition": 0, "offsets": [7], "ack_type": "accept", "member_id": "m1", "outcome": "ok",
                       "error_code": None, "error_name": None})
    h2 = _drop_first_overlap(History(h.header, (*h.events, stray)))
    r = judge(h2, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.FALSE and "never acquired the record" in r.violations[0].description
    assert cited(r) == {stray.seq}


def _drop_first_overlap(h: History) -> History:
    """The overlap scenario without consumer-1's early acquisition of t-0@0 (and its accept)."""
    drop = {e.seq for e in h.events if isinstance(e, ShareAcquired | ShareAcknowledged) and e.source == "consumer-1"
            and e.offsets == (0,)}
    return dataclasses.replace(h, events=tuple(e for e in h.events if e.seq not in drop))


def test_the_acknowledgement_at_the_lock_boundary_is_a_near_miss():
    h, _ = built("ack_at_boundary")
    r = judge(h, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.TRUE and r.metrics["late_refused"] == 1
    # 0.2 s later it is past the slack
    late, s = edited("ack_at_boundary", lambda e: {**e, "mono_ns": e["mono_ns"] + int(0.2e9)}
                     if e["kind"] == "share_acknowledged" and e["offsets"] == [0] and e["source"] == "consumer-0"
                     else e)
    r = judge(late, CheckerName.SHARE_OWNERSHIP)
    assert r.valid is Validity.FALSE and s["acquired"] in cited(r)


# --------------------------------------------------------------------------------------------- share-delivery


def test_a_delivery_count_given_twice():
    h, s = built("repeated_count")
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.FALSE and cited(r) == {s["first"], s["again"]}
    assert "delivery 1 given twice" in r.violations[0].description


def test_a_delivery_count_given_twice_across_a_broker_kill_is_explained():
    h, s = built("spso_equal_across_failover")
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.TRUE and r.metrics["repeats_explained"] == 1
    assert any({s["before"], s["after"], s["kill"]} <= set(f.evidence) for f in r.findings)


def test_a_delivery_past_the_limit():
    h, s = built("past_limit")
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.FALSE and {s["d4"], s["d3"]} <= cited(r)
    assert "4th time" in r.violations[0].description and "limit 3" in r.violations[0].description


def test_redelivery_up_to_the_limit_is_a_near_miss():
    h, _ = built("archived_at_limit")
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.TRUE and r.metrics["max_delivery_count"] == 3 and r.metrics["redeliveries"] == 2
    # the record is archived at the limit: share-completion counts it so
    c = judge(h, CheckerName.SHARE_COMPLETION)
    assert c.valid is Validity.TRUE and c.metrics["archived"] == 1


def test_the_limit_comes_from_the_samples_before_the_configs():
    h, _ = edited("past_limit", lambda e: {**e, "delivery_count_limit": 5} if e["kind"] == "share_group_state" else e)
    assert judge(h, CheckerName.SHARE_DELIVERY).valid is Validity.TRUE


def test_a_count_going_down_between_acquisitions_in_a_known_order():
    h, s = edited("repeated_count", lambda e: {**e, "delivery_count": 2} if e["kind"] == "share_acquired"
                  and e["offsets"] == [1] and e["source"] == "consumer-0" else e)
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.FALSE and "went down from 2" in r.violations[0].description


def test_delivered_again_after_it_was_accepted():
    h, s = built("after_accept")
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.FALSE and {s["accept"], s["again"]} <= cited(r)
    assert "accepted by consumer-0" in r.violations[0].description


def test_without_reported_delivery_counts_delivery_is_unknown():
    h, _ = edited("overlap", lambda e: {**e, "delivery_count": None} if e["kind"] == "share_acquired" else e)
    r = judge(h, CheckerName.SHARE_DELIVERY)
    assert r.valid is Validity.UNKNOWN and "delivery count" in r.summary


# ------------------------------------------------------------------------------------------- share-completion


def test_a_record_never_accepted_rejected_or_archived():
    h, s = built("lost")
    r = judge(h, CheckerName.SHARE_COMPLETION)
    assert r.valid is Validity.FALSE and {s["send"], s["final"]} <= cited(r)
    assert "offsets 2" in r.violations[0].description and "start offset at 2" in r.violations[0].description


def test_a_final_sample_before_the_bound_is_unknown_not_a_violation():
    """The final sample 5 s after the start instead of 10 s: before 3 x 2 s + 3 s + 0.5 s."""
    fx, s = ms.builders()["lost"]()
    final = next(e for e in fx.events if e["seq"] == s["final"])
    shift = int(5e9)
    events = [{**e, "mono_ns": e["mono_ns"] - shift} if e["mono_ns"] >= final["mono_ns"] else e for e in fx.events]
    r = judge(_history(fx.header, events), CheckerName.SHARE_COMPLETION)
    assert r.valid is Validity.UNKNOWN and "before the bound 9.5s" in r.summary, r.summary


def test_without_a_final_sample_completion_is_unknown():
    h, s = edited("lost", lambda e: None if e["kind"] == "share_group_state" else e)
    r = judge(h, CheckerName.SHARE_COMPLETION)
    assert r.valid is Validity.UNKNOWN and "no share_group_state sample with start offsets after the last heal" in r.summary


def test_records_done_by_acknowledgements_need_no_final_sample():
    h, _ = edited("overlap", lambda e: None if e["kind"] == "share_group_state" else e)
    assert judge(h, CheckerName.SHARE_COMPLETION).valid is Validity.TRUE


def test_the_final_start_offset_past_a_record_makes_it_done():
    h, _ = edited("lost", lambda e: {**e, "start_offsets": [["t", 0, 4]]} if e["kind"] == "share_group_state"
                  and e["start_offsets"] == [["t", 0, 2]] else e)
    r = judge(h, CheckerName.SHARE_COMPLETION)
    assert r.valid is Validity.TRUE and r.metrics["by_start_offset"] == 1


def test_a_fault_never_healed_leaves_completion_unknown():
    h, _ = edited("spso_back", lambda e: None if e["kind"] == "fault_end" else e)
    assert judge(h, CheckerName.SHARE_COMPLETION).valid is Validity.UNKNOWN


# --------------------------------------------------------------------------------------------- share-progress


def test_the_start_offset_going_back():
    h, s = built("spso_back")
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.FALSE and cited(r) == {s["high"], s["low"]}
    assert "went back from 3" in r.violations[0].description


def test_an_equal_start_offset_across_failover_is_a_near_miss():
    h, _ = built("spso_equal_across_failover")
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.TRUE and r.metrics["samples_compared"] == 4


def test_a_rewinding_fault_starts_the_comparison_again():
    def rewind(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "traits": ["rewinds_committed_offsets"]} if e["kind"] == "fault_start" else e

    h, _ = edited("spso_back", rewind)
    assert judge(h, CheckerName.SHARE_PROGRESS).valid is Validity.TRUE


def test_one_sample_gives_the_start_offset_nothing_to_compare():
    h, _ = edited("overlap", lambda e: None if e["kind"] == "share_group_state" and e["start_offsets"]
                  == [["t", 0, 4]] else e)
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.UNKNOWN and "nothing to be compared with" in r.summary


def test_a_dead_members_record_acquired_again_too_late():
    h, s = built("not_reacquired")
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.FALSE and {s["held"], s["stop"], s["again"]} <= cited(r)
    assert "past its lock deadline" in r.violations[0].description


def test_a_dead_members_records_acquired_again_in_time():
    h, _ = built("reacquired_in_time")
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.TRUE and r.metrics["orphans"] == 2 and r.metrics["reacquired"] == 2
    assert 5.5 < r.metrics["reacquire_max_s"] < 6.0


def test_a_dead_members_record_never_acquired_again_while_the_partition_is_fetched():
    h, s = edited("not_reacquired", lambda e: None if e["kind"] in ("share_acquired", "share_acknowledged")
                  and e["offsets"] == [2] and e["source"] == "consumer-1" else _spso_stuck_at_2(e))
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.FALSE and "never acquired again" in r.violations[0].description


def test_without_load_after_the_death_the_orphan_is_unjudged():
    """Nobody fetches t-0 after consumer-0's death (and the final sample says nothing of t-0@2): unknown."""
    def edit(e: dict[str, Any]) -> dict[str, Any] | None:
        if e["kind"] in ("share_acquired", "share_acknowledged") and e["source"] == "consumer-1":
            return None
        return _spso_stuck_at_2(e)

    h, _ = edited("not_reacquired", edit)
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.UNKNOWN and r.metrics["orphans_unjudged"] == 1, r.summary


def _spso_stuck_at_2(e: dict[str, Any]) -> dict[str, Any]:
    """The final sample's start offset left at 2 (t-0@2 not done)."""
    if e["kind"] == "share_group_state" and e["start_offsets"] == [["t", 0, 4]]:
        return {**e, "start_offsets": [["t", 0, 2]]}
    return e


def test_a_dead_members_record_the_start_offset_passed_is_done():
    """consumer-1 never acquires t-0@2 again, but the final sample's start offset is past it (archived or accepted
    without a recorded acquisition): not awaited."""
    h, _ = edited("not_reacquired", lambda e: None if e["kind"] in ("share_acquired", "share_acknowledged")
                  and e["offsets"] == [2] and e["source"] == "consumer-1" else e)
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.TRUE and r.metrics["orphans_done_by_start_offset"] == 1, r.summary


def test_an_orphan_at_the_delivery_limit_is_archived_not_awaited():
    h, _ = edited("not_reacquired", lambda e: {**e, "delivery_count": 3} if e["kind"] == "share_acquired"
                  and e["offsets"] == [2] and e["source"] == "consumer-0" else e)
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.metrics["orphans"] == 0


def test_every_share_checker_cites_events_that_exist():
    for name in ms.builders():
        h, _ = built(name)
        seqs = {e.seq for e in h.events}
        for checker in SHARE:
            r = judge(h, checker)
            assert all(set(f.evidence) <= seqs for f in r.findings), (name, checker)
            assert not r.summary.startswith("checker crashed"), (name, checker, r.summary)


def test_a_record_acknowledged_by_the_producer_just_before_the_final_sample_is_not_judged():
    """A fifth record, acknowledged 1 s before the final sample (bound 9.5 s) and never delivered: unknown, not a
    lost record."""
    fx, s = ms.builders()["archived_at_limit"]()
    final = next(e for e in fx.events if e["kind"] == "share_group_state" and e["start_offsets"] == [["t", 0, 4]])
    late = {"seq": 0, "ts": 0.0, "mono_ns": final["mono_ns"] - int(1e9), "source": "producer-0", "kind": "send_ok",
            "topic": "t", "partition": 0, "offset": 4, "key": None, "value": "fx:p0:4"}
    events = sorted([*fx.events, late], key=lambda e: e["mono_ns"])
    r = judge(_history(fx.header, [{**e, "seq": i} for i, e in enumerate(events, 1)]), CheckerName.SHARE_COMPLETION)
    assert r.valid is Validity.UNKNOWN and "less than the bound 9.5s before it" in r.summary, r.summary


def test_a_record_acquired_again_before_its_holder_died_is_not_awaited_after():
    """consumer-1 acquires t-0@2 (delivery 2) 3 s after consumer-0 did (2 s lock), 17 s before consumer-0 is
    killed: it came back in time, even though nobody acquired it after the death -- and consumer-0, killed long
    after its lock ran out, did not die holding it: no orphan at all."""
    fx, s = ms.builders()["not_reacquired"]()
    held = next(e for e in fx.events if e["seq"] == s["held"])

    def move(e: dict[str, Any]) -> dict[str, Any]:
        if e["kind"] == "member_stop":
            return {**e, "mono_ns": held["mono_ns"] + int(20e9)}
        if e["source"] == "consumer-1" and e.get("offsets") == [2]:
            shift = held["mono_ns"] + int(3e9) - e["mono_ns"]
            return {**e, **{k: e[k] + shift for k in ("mono_ns", "fetched_ns", "answered_ns") if k in e}}
        return e

    events = sorted((move(e) for e in fx.events), key=lambda e: e["mono_ns"])
    h = _history(fx.header, [{**e, "seq": i} for i, e in enumerate(events, 1)])
    r = judge(h, CheckerName.SHARE_PROGRESS)
    assert r.valid is Validity.TRUE and r.metrics["orphans"] == 0, r.summary


# ------------------------------------------------------------------------------------- a run declaring a share group


def declared_share(name: str, group_configs: dict[str, str] | None = None) -> History:
    """Scenario ``name`` with the header a ``chaos run`` of a share workload writes: ``workload.share`` declared
    (and, with ``group_configs``, the group's own configs)."""
    fx, _ = ms.builders()[name]()
    header = dict(fx.header)
    header["experiment"] = {**header.get("experiment", {}), "workload": {"consumers": [], "share": {}}}
    if group_configs is not None:
        header["configs"] = {**header.get("configs", {}), "group": group_configs}
    return _history(header, fx.events)


def test_a_declared_share_run_leaves_the_consumer_group_checkers_nothing_to_judge():
    plain, _ = built("reacquired_in_time")
    share = declared_share("reacquired_in_time")
    # undeclared, record-anomalies finds no consumed records and answers unknown; declared, no consumer group
    assert run_checkers(plain, [CheckerName.RECORD_ANOMALIES]).valid is Validity.UNKNOWN
    verdict = run_checkers(share)
    for r in verdict.results:
        if r.checker in SHARE or r.checker is CheckerName.FAULTS:
            continue
        assert r.valid is Validity.TRUE and "share group (KIP-932): no consumer group to judge" in r.summary, r
    # the share checkers judge as before, and still fire on a bad history declared the same way
    assert {r.checker: r.valid for r in verdict.results if r.checker in SHARE} == \
        {n: run_checkers(plain, [n]).valid for n in SHARE}
    bad = declared_share("late_ack")
    assert run_checkers(bad).result(CheckerName.SHARE_OWNERSHIP).valid is Validity.FALSE


def test_the_groups_own_lock_duration_is_read_before_the_brokers_default():
    # near miss: an accept 0.4 s past the brokers' 2 s lock, within the slack. The group's own config of 1 s (set
    # by the run, header configs.group) makes it 1.4 s late: a violation -- the brokers' larger default is not used
    near, _ = built("ack_at_boundary")
    assert judge(near, CheckerName.SHARE_OWNERSHIP).valid is Validity.TRUE
    short = declared_share("ack_at_boundary", {"share.record.lock.duration.ms": "1000"})
    assert judge(short, CheckerName.SHARE_OWNERSHIP).valid is Validity.FALSE


def test_a_member_that_stops_after_its_lock_ran_out_leaves_no_orphan():
    # near miss of share-progress-dead-members-record-late: consumer-0 stops 3 s after acquiring t-0@2 under a 2 s
    # lock (past lock + slack): the record was Available again while consumer-0 lived, so its late reacquisition is
    # not a dead member's record coming back late (found on a real run: every member stopping at teardown)
    def later_stop(e):
        if e["kind"] == "member_stop" and e["source"] == "consumer-0":
            e["mono_ns"] += 3_000_000_000
            e["ts"] += 3.0
        return e

    bad, _ = built("not_reacquired")
    assert judge(bad, CheckerName.SHARE_PROGRESS).valid is Validity.FALSE
    lived, _ = edited("not_reacquired", later_stop)
    r = judge(lived, CheckerName.SHARE_PROGRESS)
    assert r.valid is not Validity.FALSE and r.metrics["orphans"] == 0, (r.valid, r.summary)


# ------------------------------------------------------------------------------------------- share-processing


def _shifted(name: str, seq: int, dt_s: float, field: str = "mono_ns") -> History:
    """Scenario ``name`` with event ``seq``'s ``field`` moved by ``dt_s``."""
    def move(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, field: e[field] + int(dt_s * 1e9)} if e["seq"] == seq else e

    return edited(name, move)[0]


def test_without_processing_evidence_processing_is_unknown():
    # every other share scenario: members that record acquisitions and acknowledgements but not their processing
    r = judge(built("overlap")[0], CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.UNKNOWN and "no member recorded its processing" in r.summary, r.summary


def test_an_accept_before_the_processing_ended_and_one_never_processed():
    h, s = built("accepted_early")
    r = judge(h, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and r.metrics["accepted_before_processed"] == 2, r.summary
    assert r.metrics["accepted_never_processed"] == 1
    texts = " | ".join(f.description for f in r.violations)
    assert "its processing ended only at" in texts and "without processing it: accepted" in texts, texts
    assert {s["accept"], s["late"], s["stop"]} <= cited(r)


def test_an_accept_at_the_instant_processing_ended_is_after_it():
    h, s = built("processed_in_time")
    assert judge(h, CheckerName.SHARE_PROCESSING).valid is Validity.TRUE
    # the same accept stamped 1 ns before the processing ended: accepted before processed
    early = _shifted("processed_in_time", s["accept"], -1e-9)
    r = judge(early, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and r.metrics["accepted_before_processed"] == 1, r.summary


def test_a_refused_accept_before_processing_is_not_judged():
    def refuse(e: dict[str, Any]) -> dict[str, Any]:
        if e["kind"] == "share_acknowledged" and e["source"] == "consumer-0" and e["offsets"] == [1, 2]:
            return {**e, "outcome": "fail", "error_code": 121, "error_name": "INVALID_RECORD_STATE"}
        return e

    r = judge(edited("accepted_early", refuse)[0], CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.TRUE and r.metrics["accepted_before_processed"] == 0, r.summary


def test_processing_begun_after_the_lock():
    h, s = built("began_past_lock")
    r = judge(h, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and r.metrics["processed_past_lock"] == 1, r.summary
    assert "began processing the record" in r.violations[0].description
    assert "meanwhile consumer-1 (delivery 2" in r.violations[0].description
    assert {s["acquired"], s["processed"], s["other"]} <= cited(r)


def test_processing_that_ran_past_the_lock():
    h, s = built("ran_past_lock")
    r = judge(h, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and "past its lock" in r.violations[0].description, r.summary
    # ending 0.2 s earlier, 0.4 s past the 2 s lock: within the slack
    r = judge(_shifted("ran_past_lock", s["processed"], -0.2), CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.TRUE, r.summary


def test_a_processing_end_just_past_the_slack_is_a_violation():
    h, s = built("processed_in_time")
    r = judge(_shifted("processed_in_time", s["processed"], 0.11), CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and r.metrics["processed_past_lock"] == 1, r.summary


def test_a_pause_of_the_member_explains_an_overrun_but_not_a_start_after_the_lock():
    h, s = built("paused_while_processing")
    r = judge(h, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.TRUE and r.metrics["past_lock_explained"] == 1, r.summary
    assert any("explained by fault p0" in f.description for f in r.findings)
    # the same processing begun after the pause (past the lock): the pause explains nothing
    late = _shifted("paused_while_processing", s["processed"], 2.95, field="started_ns")
    r = judge(late, CheckerName.SHARE_PROCESSING)
    assert r.valid is Validity.FALSE and "began processing" in r.violations[0].description, r.summary


def test_processing_of_a_record_never_acquired():
    def foreign(e: dict[str, Any]) -> dict[str, Any] | None:
        return {**e, "source": "consumer-2"} if e["kind"] == "share_processed" and e["offsets"] == [3] else e

    r = judge(edited("processed_in_time", foreign)[0], CheckerName.SHARE_PROCESSING)
    texts = [f.description for f in r.violations]
    # consumer-2 processed what it never acquired; consumer-1, whose processing it was, accepted it unprocessed
    assert r.valid is Validity.FALSE and any("consumer-2 processed the record" in t and "without having acquired it"
                                             in t for t in texts), texts
    assert any("consumer-1 accepted the record" in t and "never processed it" in t for t in texts), texts
