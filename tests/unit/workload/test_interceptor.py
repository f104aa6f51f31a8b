"""The interceptor's lines -> our events (chaos.workload.interceptor), without a JVM or a cluster.

Lines are written as RecordingConsumerInterceptor writes them. The fake clocks: a JVM whose
``System.nanoTime()`` is this machine's CLOCK_MONOTONIC has ``wall_ms * 1e6 - nano == OFFSET``; the
translator is told the same OFFSET, so ``nano`` is used as ``mono_ns`` as it is.
"""

from __future__ import annotations

import json
import shutil

import pytest

from chaos.errors import UsageError
from chaos.history.event import Commit, Consumed, ErrorEvent, Event
from chaos.history.reader import parse_line
from chaos.history.writer import EventWriter
from chaos.workload import interceptor, maven_build
from chaos.workload.interceptor import Translator, translate_file

MS = 1_000_000
BASE_MS = 1_795_428_080_000  # 2026-11-23T10:01:20.000Z
MONO0 = 5_000 * MS
OFFSET = BASE_MS * MS - MONO0  # CLOCK_REALTIME - CLOCK_MONOTONIC


class Stream:
    """Lines of one interceptor instance, numbered and stamped like the Java side."""

    def __init__(self, name: str = "4242-1", group: str | None = "g", auto_commit: bool = False, skew_ns: int = 0,
                 pid: int = 4242):
        self.name, self.group, self.auto, self.skew, self.pid, self.n = name, group, auto_commit, skew_ns, pid, 0

    def line(self, event: str, at_ms: int, **fields) -> str:
        self.n += 1
        return json.dumps({"v": 1, "event": event, "stream": self.name, "n": self.n, "wall_ms": BASE_MS + at_ms,
                           "nano": MONO0 + at_ms * MS + self.skew, "client_id": "consumer-1", "group_id": self.group,
                           "group_instance_id": None, **fields})

    def start(self, at_ms: int = 0) -> str:
        return self.line("start", at_ms, auto_commit=self.auto, kafka_clients="3.9.1", pid=self.pid)

    def consumed(self, at_ms: int, **parts: list[int]) -> str:
        return self.line("consumed", at_ms, partitions=[{"topic": "t", "partition": int(p.removeprefix("p")),
                                                         "offsets": offs} for p, offs in parts.items()])

    def commit(self, at_ms: int, **parts: int) -> str:
        return self.line("commit", at_ms, offsets=[{"topic": "t", "partition": int(p.removeprefix("p")), "offset": o}
                                                   for p, o in parts.items()])

    def close(self, at_ms: int) -> str:
        return self.line("close", at_ms)


def mono(ms: int) -> int:
    return MONO0 + ms * MS


def translate(tmp_path, lines: list[str], **kw) -> tuple[Translator, list[Event]]:
    writer = EventWriter.for_run(tmp_path, "consumer-1")
    t = Translator(writer, clock_offset_ns=OFFSET, wall_clock=lambda ms: (ms - BASE_MS) * MS + MONO0 + 7,
                   now_ns=lambda: mono(60_000), **kw)
    for line in lines:
        t.feed(line)
    t.finish()
    writer.close()
    path = tmp_path / "events" / "consumer-1.jsonl"
    return t, [parse_line(raw, "x") for raw in path.read_bytes().splitlines()] if path.exists() else []


def test_consumed_lines_become_one_event_per_partition_stamped_with_the_jvms_monotonic_clock(tmp_path):
    s = Stream()
    t, events = translate(tmp_path, [s.start(), s.consumed(100, p0=[0, 1, 2], p1=[5]), s.close(200)])
    c0, c1 = events
    assert type(c0) is Consumed and (c0.group, c0.topic, c0.partition, c0.offsets) == ("g", "t", 0, (0, 1, 2))
    assert (c1.partition, c1.offsets) == (1, (5,))
    assert c0.mono_ns == mono(100) and c0.ts == (BASE_MS + 100) / 1000 and c0.ts_uncertain_ns is None
    # the interceptor cannot know them: null, "the client could not tell"
    assert c0.generation is None and c0.member_id is None
    assert t.streams["4242-1"].nano_trusted and not t.notes


def test_a_commit_is_ok_answered_at_on_commit_and_sent_after_the_poll_that_returned_what_it_commits(tmp_path):
    s = Stream()
    _, events = translate(tmp_path, [s.start(), s.consumed(100, p0=[0, 1], p1=[7]), s.consumed(300, p0=[2, 3]),
                                     s.commit(310, p0=4, p1=8), s.close(400)])
    (c,) = [e for e in events if type(e) is Commit]
    assert c.outcome.value == "ok" and c.error_name is None and c.auto is False
    assert c.offsets == (("t", 0, 4), ("t", 1, 8)) and c.generation is None and c.member_id is None
    # next offset 4 of p0 needs offset 3, first returned at 300 ms (p1's 7 at 100 ms is earlier)
    assert c.mono_ns == mono(300) and c.ts == (BASE_MS + 300) / 1000
    assert c.answered_ns == mono(310) and c.ts_uncertain_ns == 10 * MS


def test_a_commit_of_offsets_never_polled_is_bounded_by_the_consumers_start_only(tmp_path):
    s = Stream(auto_commit=True)
    _, events = translate(tmp_path, [s.start(50), s.consumed(100, p0=[0]), s.commit(900, p0=40)])
    (c,) = [e for e in events if type(e) is Commit]
    assert c.mono_ns == mono(50) and c.answered_ns == mono(900) and c.auto is True


def test_without_commits_follow_polls_every_commit_is_bounded_by_the_start(tmp_path):
    s = Stream()
    _, events = translate(tmp_path, [s.start(50), s.consumed(100, p0=[0]), s.commit(110, p0=1)],
                          commits_follow_polls=False)
    (c,) = [e for e in events if type(e) is Commit]
    assert c.mono_ns == mono(50) and c.ts_uncertain_ns == 60 * MS


def test_re_consumed_offsets_keep_the_first_poll_that_returned_them_as_the_bound(tmp_path):
    s = Stream()
    # a rebalance made the member read 0..2 again at 500 ms; the commit of 3 may have been sent before that
    _, events = translate(tmp_path, [s.start(), s.consumed(100, p0=[0, 1, 2]), s.consumed(500, p0=[0, 1, 2]),
                                     s.commit(510, p0=3)])
    (c,) = [e for e in events if type(e) is Commit]
    assert c.mono_ns == mono(100)


def test_a_nano_time_that_is_not_clock_monotonic_falls_back_to_the_wall_clock(tmp_path):
    s = Stream(skew_ns=3_600 * 1000 * MS)  # another clock: an hour off
    t, events = translate(tmp_path, [s.start(), s.consumed(100, p0=[0])])
    (c,) = events
    assert c.mono_ns == mono(100) + 7  # the wall_clock mapping, not nano
    assert not t.streams["4242-1"].nano_trusted and "not this machine's CLOCK_MONOTONIC" in t.notes[0]


def test_lost_lines_become_an_error_event_spanning_the_gap(tmp_path):
    s = Stream()
    first = [s.start(), s.consumed(100, p0=[0])]
    s.n += 2  # lines 3 and 4 could not be written
    t, events = translate(tmp_path, [*first, s.consumed(400, p0=[3])])
    err = next(e for e in events if type(e) is ErrorEvent)
    assert "lines 3..4" in err.message and not err.fatal
    assert err.mono_ns == mono(100) and err.ts_uncertain_ns == 300 * MS
    assert any("missing" in n for n in t.notes)


def test_a_stream_without_close_is_noted_and_a_consumer_without_group_writes_nothing(tmp_path):
    s, anon = Stream(), Stream(name="4242-2", group=None)
    t, events = translate(tmp_path, [s.start(), anon.start(10), anon.consumed(20, p0=[0]), anon.commit(30, p0=1),
                                     anon.close(40)])
    assert events == []
    assert any("without group.id" in n for n in t.notes) and any("4242-1" in n and "no close" in n for n in t.notes)


def test_two_open_consumers_of_one_group_in_one_file_are_refused(tmp_path):
    a, b = Stream(), Stream(name="4242-2")
    with pytest.raises(UsageError, match="give each consumer its own kafka.chaos.events.path"):
        translate(tmp_path, [a.start(), b.start(10)])
    # one after the other is fine: a consumer re-created after the first closed
    a2, b2 = Stream(), Stream(name="4242-2")
    _, events = translate(tmp_path / "seq", [a2.start(), a2.close(5), b2.start(10), b2.consumed(20, p0=[0])])
    assert [type(e) for e in events] == [Consumed]
    # and so is the process that replaced a killed one (its stream never closed), appending to the same file
    killed, replacement = Stream(), Stream(name="4343-1", pid=4343)
    t, events = translate(tmp_path / "kill", [killed.start(), killed.consumed(5, p0=[0]), replacement.start(10),
                                              replacement.consumed(20, p0=[0])])
    assert [type(e) for e in events] == [Consumed, Consumed] and any("4242-1" in n and "no close" in n for n in t.notes)


def test_translate_file_leaves_out_a_torn_last_line_and_refuses_a_malformed_one_inside(tmp_path):
    s = Stream()
    path = tmp_path / "interceptor.jsonl"
    path.write_text("\n".join([s.start(), s.consumed(100, p0=[0])]) + "\n" + s.commit(110, p0=1)[:40])
    writer = EventWriter.for_run(tmp_path, "consumer-1")
    t = translate_file(path, writer)
    writer.close()
    assert any("torn last line" in n for n in t.notes) and t.lines == 2
    # the process that replaced a killed one ended its torn line before writing its own
    glued = tmp_path / "glued.jsonl"
    glued.write_text(s.start() + "\n" + s.consumed(100, p0=[0])[:30] + "\n" + Stream(name="9-1", pid=9).start(200) + "\n")
    t = translate_file(glued, EventWriter.for_run(tmp_path, "consumer-4"))
    assert t.lines == 2 and any("glued.jsonl:2: torn line left out" in n for n in t.notes)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(s.start() + "\n{\"v\": 1}\n" + s.close(5) + "\n")
    with pytest.raises(UsageError, match=r"bad.jsonl:2: not a kafka-chaos interceptor line"):
        translate_file(bad, EventWriter.for_run(tmp_path, "consumer-2"))
    with pytest.raises(UsageError, match="no interceptor events file"):
        translate_file(tmp_path / "absent.jsonl", EventWriter.for_run(tmp_path, "consumer-3"))


def test_the_consumer_config_names_the_interceptor_and_its_file():
    assert interceptor.properties_lines("/tmp/a b\\c.jsonl") == [
        "interceptor.classes=io.kafkachaos.interceptor.RecordingConsumerInterceptor",
        "kafka.chaos.events.path=/tmp/a b\\\\c.jsonl"]


def test_the_jar_is_keyed_by_the_sources(tmp_path):
    src = tmp_path / "interceptor"
    shutil.copytree(interceptor.sources_dir(), src, ignore=shutil.ignore_patterns("target"))
    before = maven_build.source_hash(src)
    assert before == maven_build.source_hash(interceptor.sources_dir())
    java = next((src / "src").rglob("*.java"))
    java.write_text(java.read_text() + "\n")
    assert maven_build.source_hash(src) != before


def test_a_missing_maven_is_one_line_naming_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path))
    monkeypatch.setattr(maven_build.shutil, "which", lambda name: None)
    with pytest.raises(UsageError, match=r"^mvn not found on PATH: install Maven 3.6\+ \(apt-get install maven\)"):
        interceptor.ensure_interceptor()
