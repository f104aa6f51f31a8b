"""The Java share member's lines -> our events (chaos.workload.clients.java_share): canned lines in the format
``java/share-member``'s ShareMember prints (the real JVM runs in tests/integration/test_share_groups.py)."""

from __future__ import annotations

import json
import time

import orjson

from chaos.history.writer import EventWriter
from chaos.model.share import ShareMemberSpec
from chaos.workload.clients.java_share import Translator, properties
from chaos.workload.consumer import InflightCommits, inflight_path
from chaos.workload.spec import WorkerConfig


def _line(**obj) -> str:
    return orjson.dumps(obj).decode() + "\n"


def _start() -> str:
    return _line(e="start", nano=time.monotonic_ns(), wall_ms=time.time_ns() // 1_000_000)


def _events(tmp_path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "events" / "consumer-0.jsonl").read_text().splitlines()]


def test_a_poll_becomes_acquired_processed_and_acknowledged_with_the_jvms_stamps(tmp_path):
    events = EventWriter.for_run(tmp_path, "consumer-0")
    (tmp_path / "workers").mkdir()  # the worker's directory, made by the runner
    inflight = InflightCommits(inflight_path(tmp_path, "consumer-0"))
    t = Translator("g", events, inflight)
    t.feed(_start())
    now = time.monotonic_ns()
    t.feed("@@ a log line of the client, not the member's\n")
    t.feed(_line(e="acquired", nano=now, topic="t", partition=0, offsets=[3, 4, 5], dc=2, lock_ms=5000))
    t.feed(_line(e="processed", nano=now + 20, started=now + 10, topic="t", partition=0, offset=3, dc=2))
    t.feed(_line(e="ack_sent", nano=now + 30, acks=[["t", 0, [3], "accept"], ["t", 0, [4, 5], "release"],
                                                     ["t", 1, [9], "accept"]]))
    # sent and not answered yet: in the in-flight file, for the runner if the member is killed now
    assert [e["partitions"] for e in InflightCommits.read(inflight_path(tmp_path, "consumer-0"))] == [
        [["t", 0, [3], "accept"], ["t", 0, [4, 5], "release"], ["t", 1, [9], "accept"]]]
    t.feed(_line(e="ack_answer", nano=now + 40, answers=[["t", 0, None, None]], failed=None))
    t.feed(_line(e="shutdown_complete", nano=now + 50))
    events.close(fsync=False)
    got = _events(tmp_path)
    acquired, processed, *acks = got
    assert (acquired["kind"], acquired["mono_ns"], acquired["offsets"], acquired["delivery_count"],
            acquired["lock_duration_ms"]) == ("share_acquired", now, [3, 4, 5], 2, 5000)
    assert (processed["kind"], processed["mono_ns"], processed["started_ns"]) == ("share_processed", now + 20, now + 10)
    # partition 1 had no answer: unknown; partition 0's answer covers both its types
    assert [(a["partition"], a["ack_type"], a["outcome"], a.get("answered_ns")) for a in acks] == [
        (0, "accept", "ok", now + 40), (0, "release", "ok", now + 40), (1, "accept", "unknown", None)]
    assert all(a["mono_ns"] == now + 30 for a in acks)
    assert t.shutdown and not InflightCommits.read(inflight_path(tmp_path, "consumer-0"))


def test_a_refusal_names_the_error_and_a_commit_that_threw_is_unknown(tmp_path):
    events = EventWriter.for_run(tmp_path, "consumer-0")
    t = Translator("g", events)
    t.feed(_start())
    now = time.monotonic_ns()
    t.feed(_line(e="ack_sent", nano=now, acks=[["t", 0, [3], "accept"]]))
    t.feed(_line(e="ack_answer", nano=now + 5, answers=[["t", 0, "INVALID_RECORD_STATE", 121]], failed=None))
    t.feed(_line(e="ack_sent", nano=now + 10, acks=[["t", 0, [4], "accept"]]))
    t.feed(_line(e="ack_answer", nano=now + 15, answers=[], failed="TimeoutException: commit timed out"))
    t.feed(_line(e="ack_sent", nano=now + 20, acks=[["t", 0, [5], "accept"]]))
    t.feed(_line(e="ack_answer", nano=now + 25, answers=[["t", 0, "REQUEST_TIMED_OUT", 7]], failed=None))
    events.close(fsync=False)
    refused, expired, lost, timed_out = _events(tmp_path)
    # the refusal is also the lock expiry the client sees, when the answer came; the others are not
    assert (expired["kind"], expired["offsets"], expired["mono_ns"]) == ("share_lock_expired", [3], now + 5)
    # a timeout is no refusal: the leader may have applied it
    assert (timed_out["outcome"], timed_out["error_name"]) == ("unknown", "REQUEST_TIMED_OUT")
    assert (refused["outcome"], refused["error_name"], refused["error_code"]) == ("fail", "INVALID_RECORD_STATE", 121)
    assert lost["outcome"] == "unknown" and "answered_ns" not in lost


def test_a_jvm_clock_that_is_not_ours_records_nothing_but_the_error(tmp_path):
    events = EventWriter.for_run(tmp_path, "consumer-0")
    t = Translator("g", events)
    # a nanoTime 100 s away from CLOCK_MONOTONIC (its wall clock agreeing with ours)
    t.feed(_line(e="start", nano=time.monotonic_ns() - 100_000_000_000, wall_ms=time.time_ns() // 1_000_000))
    t.feed(_line(e="acquired", nano=1, topic="t", partition=0, offsets=[1], dc=1, lock_ms=None))
    events.close(fsync=False)
    (error,) = _events(tmp_path)
    assert error["kind"] == "error" and error["fatal"] and "not this machine's CLOCK_MONOTONIC" in error["message"]
    assert not t.clock_ok


def test_the_member_config_carries_the_loop_settings_apart_from_the_consumers():
    cfg = WorkerConfig(role="consumer", name="consumer-2", run_id="r", run_dir="/tmp/r", bootstrap="127.0.0.1:1",
                       topic="t", group="g", share_member=ShareMemberSpec(client="java", processing_delay_ms=2.5,
                                                                          max_records=50), share_lock_ms=3000)
    lines = properties(cfg)
    assert {"client.id=consumer-2", "group.id=g", "max.poll.records=50", "kafka.chaos.topic=t",
            "kafka.chaos.processing.delay.ms=2.5", "kafka.chaos.lock.ms=3000", "kafka.chaos.renew=false"} <= set(lines)
    renewing = cfg.model_copy(update={"share_member": ShareMemberSpec(client="java", renew_locks=True)})
    assert "kafka.chaos.renew=true" in properties(renewing)


def test_a_renewal_is_recorded_as_an_acknowledgement_of_type_renew(tmp_path):
    # KIP-1222: the member acknowledges RENEW what it could not begin in time; the record comes back from a later
    # poll without a new acquired line, and is accepted then
    events = EventWriter.for_run(tmp_path, "consumer-0")
    t = Translator("g", events)
    t.feed(_start())
    now = time.monotonic_ns()
    t.feed(_line(e="acquired", nano=now, topic="t", partition=0, offsets=[3, 4], dc=1, lock_ms=3000))
    t.feed(_line(e="processed", nano=now + 20, started=now + 10, topic="t", partition=0, offset=3, dc=1))
    t.feed(_line(e="ack_sent", nano=now + 30, acks=[["t", 0, [3], "accept"], ["t", 0, [4], "renew"]]))
    t.feed(_line(e="ack_answer", nano=now + 40, answers=[["t", 0, None, None]], failed=None))
    t.feed(_line(e="processed", nano=now + 60, started=now + 50, topic="t", partition=0, offset=4, dc=1))
    t.feed(_line(e="ack_sent", nano=now + 70, acks=[["t", 0, [4], "accept"]]))
    t.feed(_line(e="ack_answer", nano=now + 80, answers=[["t", 0, "INVALID_RECORD_STATE", 121]], failed=None))
    events.close(fsync=False)
    got = [(e["kind"], e.get("offsets"), e.get("ack_type"), e.get("outcome")) for e in _events(tmp_path)]
    assert got == [("share_acquired", [3, 4], None, None), ("share_processed", [3], None, None),
                   ("share_acknowledged", [3], "accept", "ok"), ("share_acknowledged", [4], "renew", "ok"),
                   ("share_processed", [4], None, None), ("share_acknowledged", [4], "accept", "fail"),
                   # the refusal is the lock expiry the client sees
                   ("share_lock_expired", [4], None, None)]
