"""When a Java member's events happened (issue 18, item 1), and what the checkers make of it.

A Java worker stopped and resumed reads seconds-old lines from its JVM. Each event must keep the time
the JVM made it (JSON ``timestamp``, a ``@@log`` line's time); a line that carries no time is stamped at
the last JVM time before it with ``ts_uncertain_ns`` reaching to when it was read. The checker tests
replay the issue's false finding — committed-offsets saying "went back from 302 to 226 (commit by
consumer-1)" on a fault-free Kafka 3.9.1 — and show it cannot happen from these stamps, while the old
read-time stamps would have produced it.
"""

from __future__ import annotations

import json

import orjson
import pytest

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import Commit, ErrorEvent, MemberStop, read_history
from chaos.history.event import Kind
from chaos.history.merge import merge_run
from chaos.history.writer import EventWriter
from chaos.model.checker_name import CheckerName
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.clients.java import Translator

MS = 1_000_000
#: JVM wall ms of the run's first line; the fake clock maps wall ms w to mono ns (w - BASE_MS) * MS + MONO0
BASE_MS = 1_795_428_080_000  # 2026-11-23T10:01:20.000Z
MONO0 = 5_000 * MS
PAUSED_S = 10  # the worker (and the JVM) were stopped for 10 s: the lines are read that much later

SYNCED = ("@@log 2026-11-23T10:01:20.000+0000 INFO org.apache.kafka.clients.consumer.internals.ConsumerCoordinator "
          "[Consumer clientId=consumer-1, groupId=g] Successfully synced group in generation "
          "Generation{generationId=1, memberId='m1', protocol='range'}")


def mono(ms_after_base: int) -> int:
    return MONO0 + ms_after_base * MS


def batch(at_ms: int, offset: int, stamped: bool = True) -> list[str]:
    """records_consumed of t-0 up to ``offset`` - 1, then its commit (answered 5 ms later)."""
    def stamp(ms: int) -> str:
        return f'"timestamp":{BASE_MS + ms},' if stamped else ""
    return [
        f'{{{stamp(at_ms)}"name":"records_consumed","count":1,"partitions":[{{"topic":"t","partition":0,"count":1,'
        f'"minOffset":{offset - 1},"maxOffset":{offset - 1}}}]}}',
        f'{{{stamp(at_ms + 5)}"name":"offsets_committed","offsets":[{{"topic":"t","partition":0,"offset":{offset}}}],'
        '"success":true}',
    ]


class Reader:
    """A Translator read ``PAUSED_S`` after the lines were printed (the worker was stopped meanwhile)."""

    def __init__(self, run_dir, read_at_ms: int, log: ClientLog | None = None):
        self.now = mono(read_at_ms)
        self.writer = EventWriter.for_run(run_dir, "consumer-1")
        self.t = Translator("g", self.writer, clock=lambda ms: (ms - BASE_MS) * MS + MONO0, log=log,
                           now_ns=lambda: self.now, floor_ns=mono(0))

    def feed(self, lines: list[str]) -> None:
        for line in lines:
            self.t.feed(line + "\n")
        self.t.finish()
        self.writer.close()


def events(run_dir, source="consumer-1"):
    from chaos.history.reader import parse_line
    return [parse_line(raw, "x") for raw in (run_dir / "events" / f"{source}.jsonl").read_bytes().splitlines()]


def test_seconds_old_lines_keep_the_jvm_time_not_the_reading_time(tmp_path):
    r = Reader(tmp_path, read_at_ms=1_000 + PAUSED_S * 1000)
    r.feed([SYNCED, *batch(1_000, 226)])
    (c,) = [e for e in events(tmp_path) if type(e) is Commit]
    assert c.mono_ns == mono(1_000) and c.answered_ns == mono(1_005)  # sent and answered before the pause
    assert c.ts_uncertain_ns is None and c.generation == 1


def test_a_line_without_a_time_is_an_interval_from_the_last_jvm_time_to_its_reading(tmp_path):
    r = Reader(tmp_path, read_at_ms=1_000 + PAUSED_S * 1000)
    r.feed([SYNCED, *batch(900, 225), *batch(0, 226, stamped=False)])
    old, unstamped = [e for e in events(tmp_path) if type(e) is Commit]
    assert old.ts_uncertain_ns is None
    # the last JVM time seen: the previous offsets_committed (905 ms); read 10.095 s later
    assert unstamped.mono_ns == mono(905) and unstamped.ts_uncertain_ns == mono(11_000) - mono(905)
    assert unstamped.answered_ns == mono(11_000)  # the latest the answer can have come


def test_log_lines_carry_their_time_and_errors_link_their_client_log_line(tmp_path):
    log = ClientLog(tmp_path, "consumer-1")
    r = Reader(tmp_path, read_at_ms=20_000, log=log)
    r.feed([SYNCED,
            "@@log 2026-11-23T10:01:21.500+0000 ERROR org.apache.kafka.tools.VerifiableConsumer Error during "
            "processing, terminating consumer process: ",
            "org.apache.kafka.common.errors.FencedInstanceIdException: The instance has been fenced.",
            "\tat org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.commitOffsetsSync(X.java:1)"])
    log.close()
    (err,) = [e for e in events(tmp_path) if type(e) is ErrorEvent]
    assert err.mono_ns == mono(1_500) and err.ts_uncertain_ns is None  # 10:01:21.500 is BASE_MS + 1.5 s
    assert err.log_ref == "workers/consumer-1.client.log:2"
    lines = (tmp_path / "workers" / "consumer-1.client.log").read_text().splitlines()
    assert lines[1].startswith("2026-11-23T10:01:21.500+0000 ERROR org.apache.kafka.tools.VerifiableConsumer")
    assert lines[2].startswith("org.apache.kafka.common.errors.FencedInstanceIdException")


def test_the_worker_stamps_the_jvm_end_as_an_interval(tmp_path):
    r = Reader(tmp_path, read_at_ms=30_000)
    r.writer = EventWriter.for_run(tmp_path, "consumer-1")
    r.t.events = r.writer
    r.t.feed(f'{{"timestamp":{BASE_MS + 2_000},"name":"shutdown_complete"}}\n')
    r.writer.emit(Kind.MEMBER_STOP, group="g", clean=True, signal=None, **r.t.unstamped())
    r.writer.close()
    (stop,) = [e for e in events(tmp_path) if type(e) is MemberStop]
    assert stop.mono_ns == mono(2_000) and stop.ts_uncertain_ns == mono(30_000) - mono(2_000)


# ------------------------------------------------------------------ the checker on the resulting history


def _run(tmp_path, java_lines: list[str], read_at_ms: int) -> Validity:
    """consumer-1 (Java) commits 226 at 1 s and is stopped 10 s; consumer-0 takes t-0 over and commits 302 at
    4 s, which the observer samples at 6 s; consumer-1's old lines are read at ``read_at_ms``."""
    (tmp_path / "header.json").write_text(json.dumps({"schema_version": 1, "run_id": "r", "seed": 1,
                                                      "experiment": {}, "versions": {"kafka": "3.9.1"},
                                                      "configs": {}}))
    Reader(tmp_path, read_at_ms).feed(java_lines)
    other = EventWriter.for_run(tmp_path, "consumer-0")
    other.emit(Commit, group="g", offsets=[["t", 0, 302]], generation=2, member_id="m0", outcome="ok",
               error_code=None, error_name=None, auto=False, mono_ns=mono(4_000), ts=4.0, answered_ns=mono(4_004))
    other.close()
    observer = EventWriter.for_run(tmp_path, "observer")
    for at, value in ((500, 225), (2_000, 226), (6_000, 302), (read_at_ms + 1_000, 302)):
        observer.emit(Kind.COMMITTED_OFFSETS, group="g", coordinator=1, offsets=[["t", 0, value]],
                      mono_ns=mono(at), ts=at / 1000)
    observer.close()
    history = read_history(merge_run(tmp_path))
    r = run_checkers(history, [CheckerName.COMMITTED_OFFSETS]).result(CheckerName.COMMITTED_OFFSETS)
    if r.valid is Validity.FALSE:
        assert "went back from 302 to 226 (commit by consumer-1)" in r.violations[0].description
    return r.valid


@pytest.mark.parametrize("stamped", [True, False], ids=["jvm-stamped", "no-timestamp-interval"])
def test_a_paused_java_member_read_late_gives_no_false_backward_move(tmp_path, stamped):
    lines = [SYNCED, *batch(1_000, 226, stamped=stamped)]
    if not stamped:  # a line with a time before them: the floor of the unstamped lines
        lines.insert(1, f'{{"timestamp":{BASE_MS + 990},"name":"partitions_assigned","partitions":[]}}')
    assert _run(tmp_path, lines, read_at_ms=1_000 + PAUSED_S * 1000) is Validity.TRUE


def test_stamped_when_read_the_same_commit_would_read_as_a_move_back(tmp_path):
    """The control: the Translator without a clock stamps lines when read (what the issue saw)."""
    (tmp_path / "header.json").write_text(json.dumps({"schema_version": 1, "run_id": "r", "seed": 1,
                                                      "experiment": {}, "versions": {}, "configs": {}}))
    read_at = mono(11_000)
    writer = EventWriter.for_run(tmp_path, "consumer-1")
    writer.emit(Commit, group="g", offsets=[["t", 0, 226]], generation=1, member_id="m1", outcome="ok",
                error_code=None, error_name=None, auto=False, mono_ns=read_at, ts=11.0)
    writer.close()
    observer = EventWriter.for_run(tmp_path, "observer")
    observer.emit(Kind.COMMITTED_OFFSETS, group="g", coordinator=1, offsets=[["t", 0, 302]],
                  mono_ns=mono(6_000), ts=6.0)
    observer.close()
    r = run_checkers(read_history(merge_run(tmp_path)), [CheckerName.COMMITTED_OFFSETS])
    assert r.valid is Validity.FALSE
    assert "went back from 302 to 226" in orjson.dumps([f.description for f in r.results[0].violations]).decode()
