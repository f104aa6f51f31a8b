"""The fencing checker on KIP-848 groups: commits carry member epochs, judged by the member's own samples.

The fixtures (fixtures/histories/fencing-kip848-*.jsonl, judged in test_checker_fixtures.py) show the checker
fires and does not misfire; these tests pin down the rules behind them: which Kafka version gets which rule, the
benefit of the doubt between samples (epoch ranges, assignment-epoch bounds, pending revocations), and what
leaves a commit unjudged.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from chaos.checkers import fencing
from chaos.checkers.coordinator import member_timelines
from chaos.checkers.index import index_of
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Commit, Header, History, from_dict, read_history
from chaos.model.checker_name import CheckerName

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
MS = 1_000_000


def header(kafka: str | None) -> Header:
    return Header(1, "t", 0, {}, {} if kafka is None else {"kafka": kafka}, {})


def history(kafka: str | None, *events: dict[str, Any]) -> History:
    """Events with ``t`` (ms) for their CLOCK_MONOTONIC stamp, in time order."""
    out = []
    for i, e in enumerate(events, 1):
        fields = {k: v for k, v in e.items() if k != "t"}
        out.append(from_dict({"seq": i, "ts": e["t"] / 1e3, "mono_ns": e["t"] * MS, **fields}))
    return History(header(kafka), tuple(out))


def sample(t: int, members: dict[str, tuple[int, list[int]]], group_epoch: int = 9) -> dict[str, Any]:
    """A ConsumerGroupDescribe sample: member id -> (member epoch, assigned partitions of topic t)."""
    return {"t": t, "source": "observer", "kind": "group_state", "group": "g", "state": "Stable", "coordinator": 1,
            "protocol": "uniform", "generation": group_epoch, "group_epoch": group_epoch,
            "assignment_epoch": group_epoch, "group_type": "consumer",
            "members": [{"member_id": m, "instance_id": None, "client_id": m, "host": "",
                         "assignment": [["t", p] for p in parts], "member_epoch": e}
                        for m, (e, parts) in members.items()]}


def unknown_sample(t: int) -> dict[str, Any]:
    return {"t": t, "source": "observer", "kind": "group_state", "group": "g", "state": "Unknown",
            "coordinator": None, "protocol": None, "generation": None, "members": []}


def commit(t: int, epoch: int, parts: list[int], mid: str = "m0", answered_after: int = 5) -> dict[str, Any]:
    return {"t": t, "source": "consumer-0", "kind": "commit", "group": "g", "offsets": [["t", p, 1] for p in parts],
            "generation": epoch, "member_id": mid, "outcome": "ok", "error_code": None, "error_name": None,
            "auto": False, "answered_ns": (t + answered_after) * MS}


def line(t: int, event: str, mid: str) -> dict[str, Any]:
    return {"t": t, "source": "observer", "kind": "broker_log", "broker": 1, "group": "g", "event": event,
            "generation": None, "member_id": mid, "line": f"[GroupId g] Member {mid} ({event})"}


def fencing_result(h: History):
    return run_checkers(h, [CheckerName.FENCING]).result(CheckerName.FENCING)


def judgements(h: History) -> dict[int, fencing.Judgement]:
    """seq -> the verdict on each accepted commit of ``h``."""
    idx = index_of(h)
    rule, _ = fencing.commit_rule(h.header)
    tls = member_timelines(idx)
    out = {}
    for c in idx.of(Commit):
        start, end = fencing.judged_interval(c, 500 * MS)
        assert c.generation is not None
        out[c.seq] = fencing.judge_member_commit(c, c.generation, tls.get((c.group, c.member_id or "")),
                                                 start, end, rule).judgement
    return out


# ------------------------------------------------------------------ the false positive seen on a real run


def test_commit_at_the_members_epoch_behind_the_group_epoch_is_legal():
    """Run b3a6ac5eb7 (Kafka 4.4.0): member epoch 2 while the group epoch was 4 was reported as a stale generation."""
    h = read_history(FIXTURES / "fencing-kip848-member-epoch-behind-group-epoch.jsonl")
    r = fencing_result(h)
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["judged_by_member_epoch"] == r.metrics["accepted_commits"] == 4
    assert r.metrics["judged_by_generation"] == 0 and r.metrics["unjudged"] == 0
    first = min(c.seq for c in index_of(h).of(Commit))
    assert h.event(first).generation == 2  # type: ignore[attr-defined]
    assert judgements(h)[first] is fencing.Judgement.LEGAL


@pytest.mark.parametrize("name", ["fencing-kip848-stale-member-epoch", "fencing-kip848-partition-assigned-later",
                                  "fencing-kip848-partition-not-assigned", "fencing-kip848-fenced-member"])
def test_violations_speak_of_member_epochs(name):
    r = fencing_result(read_history(FIXTURES / f"{name}.jsonl"))
    assert r.valid is Validity.FALSE and len(r.violations) == 1
    text = r.violations[0].description
    assert "accepted with member epoch" in text and "generation" not in text, text
    assert r.metrics["member_epoch_violations"] == r.metrics["violations"] == 1
    assert "by member epoch" in r.summary


def test_fenced_member_should_have_been_unknown():
    r = fencing_result(read_history(FIXTURES / "fencing-kip848-fenced-member.jsonl"))
    assert "not in the group" in r.violations[0].description
    assert "UNKNOWN_MEMBER_ID" in r.violations[0].description


def test_classic_groups_keep_generations():
    r = fencing_result(read_history(FIXTURES / "fencing-sent-after-bump.jsonl"))
    assert r.valid is Validity.FALSE
    assert "with generation 1 while the coordinator was at generation 2" in r.violations[0].description
    assert r.metrics["judged_by_member_epoch"] == 0 and r.metrics["judged_by_generation"] == r.metrics["judged"]


# ------------------------------------------------------------------ which rule, by Kafka version


@pytest.mark.parametrize(("experiment", "versions", "rule", "shown"), [
    ({"cluster": {"kafka_version": "4.2.1"}}, {"kafka": "4.4.0"}, fencing.CommitRule.MEMBER_EPOCH, "4.2.1"),
    ({}, {"kafka": "4.0.0"}, fencing.CommitRule.MEMBER_EPOCH, "4.0.0"),
    ({}, {"kafka": "3.9.1"}, fencing.CommitRule.MEMBER_EPOCH, "3.9.1"),
    ({}, {"kafka": "4.3.0"}, fencing.CommitRule.ASSIGNMENT_EPOCHS, "4.3.0"),
    ({"cluster": {"kafka_version": "4.4.0"}}, {}, fencing.CommitRule.ASSIGNMENT_EPOCHS, "4.4.0"),
    ({"cluster": {"kafka_version": None}}, {}, fencing.CommitRule.ASSIGNMENT_EPOCHS, "unknown"),
    ({}, {"kafka": "trunk"}, fencing.CommitRule.ASSIGNMENT_EPOCHS, "unknown"),
])
def test_rule_follows_the_kafka_version(experiment, versions, rule, shown):
    assert fencing.commit_rule(Header(1, "t", 0, experiment, versions, {})) == (rule, shown)


@pytest.mark.parametrize(("kafka", "valid"), [("4.0.0", Validity.FALSE), ("4.2.0", Validity.FALSE),
                                              ("4.3.0", Validity.TRUE), ("4.4.0", Validity.TRUE),
                                              (None, Validity.TRUE)])
def test_the_same_lagging_commit_by_version(kafka, valid):
    h = read_history(FIXTURES / "fencing-kip848-stale-member-epoch.jsonl")
    h = replace(h, header=header(kafka))
    assert fencing_result(h).valid is valid


# ------------------------------------------------------------------ the benefit of the doubt between samples


def test_epoch_between_two_samples_may_be_either():
    h = history("4.0.0",
                sample(0, {"m0": (2, [0])}), commit(50, 2, [0]), commit(60, 3, [0]), sample(100, {"m0": (3, [0])}),
                commit(150, 2, [0]), sample(200, {"m0": (3, [0])}))
    got = judgements(h)
    assert [got[s] for s in (2, 3, 5)] == [fencing.Judgement.LEGAL, fencing.Judgement.LEGAL,
                                           fencing.Judgement.VIOLATION]


def test_assignment_epoch_is_only_known_between_two_samples():
    """t-1 is absent at member epoch 2 and present at 4: assigned at 2, 3 or 4 (KIP-1251, Kafka 4.4)."""
    h = history("4.4.0",
                sample(0, {"m0": (2, [0])}), sample(100, {"m0": (4, [0, 1])}),
                commit(150, 3, [1]), commit(160, 1, [1]), commit(170, 1, [0]), sample(200, {"m0": (4, [0, 1])}))
    got = judgements(h)
    # epoch 3: t-1 may have been assigned at 2 or 3; epoch 1: t-1 was assigned at 2 or later; t-0 may be older
    assert [got[s] for s in (3, 4, 5)] == [fencing.Judgement.LEGAL, fencing.Judgement.VIOLATION,
                                           fencing.Judgement.LEGAL]
    r = fencing_result(h)
    assert "t-1 was assigned to it at epoch 2 or later" in r.violations[0].description
    assert {1, 2, 4} <= set(r.violations[0].evidence)


def test_partition_pending_revocation_commits_until_the_epoch_moves_on():
    """t-0 leaves m0's described assignment at epoch 3: it may be pending revocation (the member keeps epoch 3
    until it acknowledges), and KIP-1251 validates it still; once m0 is at epoch 4 it is gone."""
    h = history("4.4.0",
                sample(0, {"m0": (1, [])}), sample(100, {"m0": (2, [0, 1])}), sample(150, {"m0": (3, [0, 1])}),
                sample(200, {"m0": (3, [1])}), commit(230, 2, [0]), sample(300, {"m0": (3, [1])}),
                sample(400, {"m0": (4, [1])}), commit(430, 2, [0]), sample(500, {"m0": (4, [1])}))
    got = judgements(h)
    assert got[5] is fencing.Judgement.LEGAL and got[8] is fencing.Judgement.VIOLATION
    assert "t-0 was not assigned to it" in fencing_result(h).violations[0].description


# ------------------------------------------------------------------ what the samples cannot decide


@pytest.mark.parametrize("events", [
    # no sample after the commit
    [sample(0, {"m0": (3, [0])}), commit(50, 2, [0])],
    # no sample listing the member before it
    [sample(0, {"m1": (3, [1])}), commit(50, 2, [0]), sample(100, {"m0": (3, [0]), "m1": (3, [1])})],
    # the samples around it are further apart than the observer's once-a-second rule allows
    [sample(0, {"m0": (3, [0])}), commit(2000, 2, [0]), sample(4000, {"m0": (3, [0])})],
    # a sample in between could not describe the group
    [sample(0, {"m0": (3, [0])}), unknown_sample(40), commit(50, 2, [0]), sample(100, {"m0": (3, [0])})],
    # the coordinator logged the member fenced and rejoining between two samples that list it
    [sample(0, {"m0": (3, [0])}), line(20, "member_fenced", "m0"), line(30, "member_joined", "m0"),
     commit(50, 2, [0]), sample(100, {"m0": (3, [0])})],
    # the member left, and the coordinator logged it rejoining before the next sample
    [sample(0, {"m0": (3, [0])}), sample(50, {}), line(60, "member_joined", "m0"), commit(70, 2, [0]),
     sample(100, {})],
    # an epoch newer than the samples': the samples lag
    [sample(0, {"m0": (3, [0])}), commit(50, 5, [0]), sample(100, {"m0": (3, [0])})],
    # no member epoch on the commit
    [sample(0, {"m0": (3, [0])}), {**commit(50, 2, [0]), "generation": None}, sample(100, {"m0": (3, [0])})],
])
def test_undecidable_commits_are_not_judged(events):
    r = fencing_result(history("4.0.0", *events))
    assert r.valid is Validity.UNKNOWN, r.summary
    assert r.metrics["judged"] == 0 and r.metrics["unjudged_member_epoch"] == 1


def test_absent_member_after_it_was_seen_is_judged():
    h = history("4.4.0",
                sample(0, {"m0": (3, [0]), "m1": (3, [1])}), line(20, "member_failed", "m1"),
                sample(40, {"m0": (4, [0, 1])}), commit(50, 3, [1], mid="m1"), sample(100, {"m0": (4, [0, 1])}))
    r = fencing_result(h)
    assert r.valid is Validity.FALSE and "not in the group" in r.violations[0].description


def test_summary_counts_both_kinds():
    classic = fencing_result(read_history(FIXTURES / "fencing-commit-during-preparing.jsonl"))
    assert classic.valid is Validity.TRUE and "by generation, 0 by member epoch" in classic.summary
    kip848 = fencing_result(read_history(FIXTURES / "fencing-kip848-lagging-epoch-assigned-before.jsonl"))
    assert kip848.valid is Validity.TRUE
    assert "0 by generation, 5 by member epoch, Kafka 4.4.0: assignment-epochs rule" in kip848.summary
