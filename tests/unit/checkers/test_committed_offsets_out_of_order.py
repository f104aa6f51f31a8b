"""committed-offsets on a client's own auto-commits answered out of order (issue 31, item 5).

The real history is ``fixtures/histories/real/auto-commit-coordinator-moves-back-c6b984d4a7.jsonl``:
``chaos run tests/integration/experiments/auto-commit-coordinator-moves-back.yaml --kafka-version 4.4.0
--seed 503`` (three KRaft 4.4.0 brokers, confluent-kafka 2.16.1 / librdkafka 2.16.0 members auto-committing
every 100 ms), trimmed to the events committed-offsets reads (commits, OffsetFetch samples, broker log lines,
faults, membership) up to seq 4100. The preferred-leader election moved the group from broker 3 back to
broker 2 (unloading 3715, loading 3828); consumer-1's auto-commits built at offsets 229 and 235 of t-8 were
answered NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS and re-sent from librdkafka's retry queue after the
newer one of 237 had gone out: 237 answered at 3842, 229 at 3844 and 3848, 235 at 3856 and 3994
(docs/findings.md).
"""

from __future__ import annotations

from pathlib import Path

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Result, Validity
from chaos.history import Header, History, from_dict, read_history
from chaos.model.checker_name import CheckerName

REAL = (Path(__file__).resolve().parents[3] / "fixtures" / "histories" / "real"
        / "auto-commit-coordinator-moves-back-c6b984d4a7.jsonl")
TOPIC = "chaos-c6b984d4a7"
#: consumer-1's auto-commit of t-8 at 237, then its older ones of 229 answered after it
NEWER, OLDER = 3842, 3844
HEADER = Header(1, "t", 0, {}, {}, {})


def judge(history: History) -> Result:
    return run_checkers(history, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)


def finding_of(r: Result, partition: str):
    return next(f for f in r.violations if f"{partition}:" in f.description)


def test_the_real_run_fails_and_says_the_client_answered_its_auto_commits_out_of_order():
    r = judge(read_history(REAL))
    assert r.valid is Validity.FALSE
    assert "8 partition(s) whose committed offset moved backwards" in r.summary, r.summary
    assert "39 of them a client's own auto-commit(s) answered out of order" in r.summary, r.summary
    assert r.metrics["out_of_order_auto_commits"] == 39
    f = finding_of(r, f"{TOPIC}-8")
    assert f.description.startswith(f"group group-c6b984d4a7 {TOPIC}-8: accepted commit 229 by consumer-1 is below "
                                    "the earlier accepted commit 237: consumer-1's auto-commits were answered out of "
                                    "order (generation 7) — the client sent the older commit after the newer one, "
                                    "across a coordinator change (broker 2 loaded the group 0."), f.description
    assert "librdkafka re-sends an auto-commit held back" in f.description and "docs/findings.md" in f.description
    assert {NEWER, OLDER} <= set(f.evidence)


def test_the_real_run_without_the_late_older_answers_is_a_near_miss():
    """The same run had librdkafka dropped the auto-commits a newer answered one superseded: the coordinator moves,
    the commit that failed for good (3816) and the new coordinator's first sample (3840, 228) are no violation."""
    history = read_history(REAL)
    late = {s for f in judge(history).violations for s in f.evidence[1:]}
    kept = History(history.header, tuple(e for e in history.events if e.seq not in late))
    r = judge(kept)
    assert r.valid is Validity.TRUE, [f.description for f in r.violations]
    assert r.metrics["out_of_order_auto_commits"] == 0


def history(*events: dict) -> History:
    return History(HEADER, tuple(from_dict({"seq": i, "ts": float(i), "mono_ns": i * 10_000_000, **e})
                                 for i, e in enumerate(events, 1)))


def commit(src: str, value: int, auto: bool = True, member: str | None = "m1") -> dict:
    return {"source": src, "kind": "commit", "group": "g", "offsets": [["t", 0, value]], "generation": 7,
            "member_id": member, "outcome": "ok", "error_code": None, "error_name": None, "auto": auto}


def loading(broker: int) -> dict:
    return {"source": "observer", "kind": "broker_log", "broker": broker, "group": "g", "event": "loading",
            "generation": 7, "member_id": None, "line": "Loaded classic group g"}


def sample(value: int, broker: int = 2) -> dict:
    return {"source": "observer", "kind": "committed_offsets", "group": "g", "coordinator": broker,
            "offsets": [["t", 0, value]]}


def start(src: str, client: str = "confluent-kafka") -> dict:
    return {"source": src, "kind": "member_start", "group": "g", "client": client, "client_version": "2",
            "instance_id": None, "assignor": "range", "protocol": "eager", "commit_mode": "auto",
            "session_timeout_ms": 6000, "max_poll_interval_ms": 30000, "auto_commit_interval_ms": 100,
            "wrong_mode": None}


def test_a_retried_auto_commit_answered_before_the_newer_one_is_a_near_miss():
    r = judge(history(start("consumer-1"), commit("consumer-1", 228), loading(2), commit("consumer-1", 229),
                      commit("consumer-1", 229), commit("consumer-1", 237), sample(237)))
    assert r.valid is Validity.TRUE, r.summary


def test_the_sample_reading_the_late_older_value_names_the_commit_that_wrote_it():
    r = judge(history(start("consumer-1"), commit("consumer-1", 228), loading(2), commit("consumer-1", 237),
                      sample(237), commit("consumer-1", 229), sample(229)))
    assert r.valid is Validity.FALSE
    assert "consumer-1's auto-commits were answered out of order" in finding_of(r, "t-0").description
    back = next(f for f in r.violations if "sample 229 is below the earlier sample 237" in f.description)
    assert back.description.endswith("— the value consumer-1's auto-commit answered out of order wrote (seq 6)")
    assert "across a coordinator change (broker 2 loaded the group 0.03 s before)" in r.violations[0].description


def test_no_coordinator_change_logged_is_said():
    r = judge(history(start("consumer-1"), commit("consumer-1", 237), commit("consumer-1", 229)))
    assert "with no coordinator change logged before it" in r.violations[0].description


def test_only_one_member_process_s_own_auto_commits_are_called_out_of_order():
    another_member = history(start("consumer-0"), start("consumer-1"), commit("consumer-0", 237, member="m0"),
                             loading(2), commit("consumer-1", 229))
    restarted = history(start("consumer-1"), commit("consumer-1", 237), loading(2), start("consumer-1"),
                        commit("consumer-1", 229, member="m9"))
    manual = history(start("consumer-1"), commit("consumer-1", 237, auto=False), loading(2),
                     commit("consumer-1", 229, auto=False))
    for h in (another_member, restarted, manual):
        r = judge(h)
        assert r.valid is Validity.FALSE
        assert "out of order" not in r.violations[0].description, r.violations[0].description
        assert r.metrics["out_of_order_auto_commits"] == 0


def test_a_member_id_reset_between_the_answers_is_still_the_same_client():
    """librdkafka resets its member id when it loses its assignment, with older auto-commits still on their way
    (seen in the seed-502 run: 180 answered with the member id, 116 after the reset with none)."""
    r = judge(history(start("consumer-0"), commit("consumer-0", 180, member="m0"), loading(2),
                      commit("consumer-0", 116, member=None)))
    assert "consumer-0's auto-commits were answered out of order" in r.violations[0].description


def test_only_a_librdkafka_member_s_finding_names_librdkafka():
    r = judge(history(start("consumer-1", client="java"), commit("consumer-1", 237), commit("consumer-1", 229)))
    text = r.violations[0].description
    assert "consumer-1's auto-commits were answered out of order" in text and "librdkafka" not in text, text
