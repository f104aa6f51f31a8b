"""chaos.instrument's recorder and callback wrapping, judged by the real delivery checker.

Events are written by the real EventWriter into a run directory, merged with the real merge and read
back; the delivery checker (invariant 4) then decides whether the recorded loop kept at-least-once.
The client's view is a plain function standing in for librdkafka's group metadata.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from confluent_kafka import TopicPartition

from chaos.checkers import delivery
from chaos.checkers.bounds import CheckerBounds, resolve
from chaos.checkers.result import Validity
from chaos.history import EventWriter, merge_run, read_history
from chaos.history.event import Assigned, Commit, Consumed, Kind, MemberStart, Revoked
from chaos.instrument.consumer import rebalance_callbacks
from chaos.instrument.destination import Destination
from chaos.instrument.recorder import Recorder, commit_answer, processed
from chaos.outcome import Outcome


@pytest.fixture(autouse=True)
def no_open_recorders():
    """The registry of open recorders is process-wide: each test starts and ends without any."""
    Recorder._open.clear()
    yield
    Recorder._open.clear()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    (tmp_path / "header.json").write_bytes(orjson.dumps({"schema_version": 1, "run_id": "t", "seed": 0,
                                                          "experiment": {}, "versions": {}, "configs": {}}))
    producer = EventWriter.for_run(tmp_path, "producer-0")
    for offset in range(4):
        producer.emit(Kind.SEND_OK, topic="t", partition=0, offset=offset, key=None, value=f"v{offset}")
    producer.close()
    return tmp_path


def open_recorder(run: Path, view=lambda: (5, "m-1")) -> Recorder:
    rec = Recorder.open(Destination(run / "events" / "consumer-0.jsonl", "consumer-0", "g"), "g", view)
    assert rec is not None
    rec.start(client="confluent-kafka", client_version="x", instance_id=None, assignor="range", protocol="eager",
              commit_mode="sync", session_timeout_ms=6000, max_poll_interval_ms=30000, auto_commit_interval_ms=None,
              wrong_mode=None)
    return rec


def judge(run: Path):
    history = read_history(merge_run(run))
    starts = [e for e in history.events if isinstance(e, MemberStart)]
    return history, delivery.check(history, resolve(CheckerBounds(), history, starts))


def test_poll_process_commit_poll_orders_the_batch_before_its_commit(run: Path):
    rec = open_recorder(run)
    rec.hand_over([("t", 0, o) for o in range(4)])   # poll returned 0..3
    sent = rec.sent()                                 # the application processed them, then commits 4
    rec.commit(commit_answer([("t", 0, 4)], None, None), sent)
    time.sleep(0.001)
    rec.settle()                                      # ... and polls again: the batch was processed
    rec.stop(clean=True)
    history, result = judge(run)
    assert result.valid is Validity.TRUE, result.findings
    consumed = [e for e in history.events if isinstance(e, Consumed)]
    commit = next(e for e in history.events if isinstance(e, Commit))
    assert consumed[0].offsets == (0, 1, 2, 3) and consumed[0].generation == 5
    assert consumed[0].seq < commit.seq and consumed[0].ts_uncertain_ns


def test_killed_between_commit_and_next_poll_is_a_commit_ahead_of_processing(run: Path):
    rec = open_recorder(run)
    rec.hand_over([("t", 0, o) for o in range(4)])
    rec.commit(commit_answer([("t", 0, 4)], None, None), rec.sent())  # commit first (a commit-before-process app)
    rec._writer.close()  # SIGKILL: nothing more is written (no next poll, no member_stop)
    _, result = judge(run)
    assert result.valid is Validity.FALSE
    assert "committed t-0 at offset 4" in result.violations[0].description


def test_explicit_marks_are_what_delivery_counts(run: Path):
    rec = open_recorder(run)
    rec.hand_over([("t", 0, o) for o in range(4)])

    class Msg:  # kafka-python's ConsumerRecord shape: plain fields
        def __init__(self, offset):
            self.topic, self.partition, self.offset = "t", 0, offset

    assert processed(Msg(0)) and processed(Msg(1))
    assert not processed(Msg(1))  # once
    rec.commit(commit_answer([("t", 0, 4)], None, None), rec.sent())  # 2 and 3 never marked
    rec.settle()
    rec.stop(clean=True)
    _, result = judge(run)
    assert result.valid is Validity.FALSE
    assert "offset 2" in result.violations[0].description


def test_callbacks_run_in_order_around_the_recording(run: Path):
    rec = open_recorder(run)
    path = run / "events" / "consumer-0.jsonl"
    seen: list[tuple[str, list[str]]] = []

    def kinds() -> list[str]:
        return [orjson.loads(line)["kind"] for line in path.read_bytes().splitlines()]

    def on_assign(consumer, partitions):
        seen.append(("assign", kinds()))

    def on_revoke(consumer, partitions):
        seen.append(("revoke", kinds()))
        if len(seen) == 2:
            rec.commit(commit_answer([("t", 0, 2)], None, None), rec.sent())  # commits while it still owns them
            raise RuntimeError("the application's callback failed")

    assigned, revoked, lost = rebalance_callbacks(rec, False, on_assign, on_revoke, None)
    tps = [TopicPartition("t", 0)]
    assigned(None, tps)
    with pytest.raises(RuntimeError):
        revoked(None, tps)
    lost(None, tps)  # no on_lost: the application's on_revoke gets lost partitions, as confluent-kafka does
    assert seen[0] == ("assign", ["member_start", "assigned"])             # recorded before on_assign
    assert seen[1] == ("revoke", ["member_start", "assigned"])             # on_revoke before the record
    assert seen[2] == ("revoke", ["member_start", "assigned", "commit", "revoked", "lost"])  # lost recorded first
    assert kinds() == ["member_start", "assigned", "commit", "revoked", "lost"]  # revoked recorded despite the raise
    rec.stop(clean=True)
    history = read_history(merge_run(run))
    revoked_ev = next(e for e in history.events if isinstance(e, Revoked))
    assigned_ev = next(e for e in history.events if isinstance(e, Assigned))
    assert (assigned_ev.partitions, assigned_ev.generation, revoked_ev.incremental) == ((("t", 0),), 5, False)


def test_a_second_open_consumer_of_the_file_is_not_recorded_and_says_so(run: Path):
    rec = open_recorder(run)
    again = Recorder.open(rec.destination, "g", lambda: (None, None))
    assert again is None
    other_group = Recorder.open(rec.destination, "other", lambda: (None, None))
    assert other_group is None
    rec.stop(clean=True)
    lines = [orjson.loads(x) for x in (run / "events" / "consumer-0.jsonl").read_bytes().splitlines()]
    assert [x["kind"] for x in lines] == ["member_start", "error", "member_stop"]
    assert "second consumer of group g" in lines[1]["message"]
    assert Recorder.active() == []


def test_unanswered_and_failed_commits_keep_their_outcomes(run: Path):
    rec = open_recorder(run)
    sent = rec.sent()
    rec.commit(commit_answer([("t", 0, 1)], 22, "ILLEGAL_GENERATION"), sent)
    rec.commit(commit_answer([("t", 0, 2)], None, "_NO_COMMIT_CALLBACK"), sent, answered=False)
    rec.stop(clean=True)
    history = read_history(merge_run(run))
    commits = [e for e in history.events if isinstance(e, Commit)]
    assert [(c.outcome, c.error_name) for c in commits] == [(Outcome.FAIL, "ILLEGAL_GENERATION"),
                                                            (Outcome.UNKNOWN, "_NO_COMMIT_CALLBACK")]
    assert commits[0].answered_ns is not None and commits[1].answered_ns is None


def test_handovers_reuse_a_recent_view_until_the_assignment_changes(run: Path):
    reads = []

    def view():
        reads.append(1)
        return (len(reads), "m-1")

    rec = open_recorder(run, view)
    rec.hand_over([("t", 0, 0)])
    rec.hand_over([("t", 0, 1)])          # within VIEW_REUSE_NS: the same view
    rec.ownership(Kind.REVOKED, [("t", 0)], False)  # read fresh, and the reused view is dropped
    rec.hand_over([("t", 0, 2)])
    rec.settle()
    rec.stop(clean=True)
    history = read_history(merge_run(run))
    # one view for both handovers (so one event), a fresh one after the revocation
    assert [(e.offsets, e.generation) for e in history.events if isinstance(e, Consumed)] == [
        ((0, 1), 1), ((2,), 3)]
    assert next(e for e in history.events if isinstance(e, Revoked)).generation == 2


def test_a_poll_per_record_loop_writes_one_event_per_run_of_a_partition_before_any_commit(run: Path):
    rec = open_recorder(run)
    path = run / "events" / "consumer-0.jsonl"
    for offset in range(3):
        rec.settle()                       # poll() again: the previous record was processed
        rec.hand_over([("t", 0, offset)])  # poll() returned one record
    rec.settle()
    assert [orjson.loads(x)["kind"] for x in path.read_bytes().splitlines()] == ["member_start"]  # buffered
    rec.commit(commit_answer([("t", 0, 3)], None, None), rec.sent())  # the buffer is written first
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [x["kind"] for x in lines] == ["member_start", "consumed", "commit"]
    consumed = lines[1]
    assert consumed["offsets"] == [0, 1, 2] and consumed["mono_ns"] + consumed["ts_uncertain_ns"] < lines[2]["mono_ns"]
    rec.stop(clean=True)
    _, result = judge(run)
    assert result.metrics["consumed_records"] == 3


def test_coalescing_keeps_generations_and_exact_marks_apart():
    from chaos.instrument.ledger import ProcessedBatch, coalesce

    def b(offset, gen=1, at=0, unc=10, partition=0):
        return ProcessedBatch("t", partition, (offset,), gen, "m", at, 0.0, unc)

    out = coalesce([b(0, at=0), b(1, at=20, unc=5), b(2, gen=2, at=30), b(3, gen=2, at=40, unc=None),
                    b(4, gen=2, at=50), b(5, gen=2, at=60, partition=1)])
    assert [(x.offsets, x.generation, x.mono_ns, x.ts_uncertain_ns) for x in out] == [
        ((0, 1), 1, 0, 25), ((2,), 2, 30, 10), ((3,), 2, 40, None), ((4,), 2, 50, 10), ((5,), 2, 60, 10)]


def test_an_idle_poll_loop_writes_what_waits_once_it_is_old_enough(run: Path, monkeypatch):
    import chaos.instrument.recorder as recorder

    rec = open_recorder(run)
    rec.hand_over([("t", 0, 0)])
    rec.settle()
    path = run / "events" / "consumer-0.jsonl"
    assert b'"consumed"' not in path.read_bytes()
    monkeypatch.setattr(recorder, "BUFFER_NS", 0)
    rec.settle()  # a poll that returned nothing
    assert b'"consumed"' in path.read_bytes()
    rec.stop(clean=True)
