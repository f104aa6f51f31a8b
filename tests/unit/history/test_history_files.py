"""Writer, merge, reader and tail: crash tolerance, ordering, seq uniqueness."""

from __future__ import annotations

import os

import orjson
import pytest

from chaos.errors import UsageError
from chaos.history import (
    EventsDirTail,
    EventTail,
    EventWriter,
    Kind,
    merge_run,
    read_history,
)

HEADER = {"schema_version": 1, "run_id": "r1", "seed": 42, "experiment": {"name": "x"}, "versions": {},
          "configs": {}}


def send(w: EventWriter, offset: int, mono_ns: int):
    return w.emit(Kind.SEND_OK, mono_ns=mono_ns, topic="t", partition=0, offset=offset, key=None,
                  value=f"r1:p0:{offset}")


def phase(w: EventWriter, name: str, mono_ns: int):
    return w.emit(Kind.PHASE, mono_ns=mono_ns, name=name)


@pytest.fixture
def run(tmp_path):
    (tmp_path / "header.json").write_bytes(orjson.dumps(HEADER))
    return tmp_path


def test_writer_numbers_and_flushes_each_event(run):
    w = EventWriter.for_run(run, "producer-0")
    send(w, 0, 100)
    send(w, 1, 200)
    # Visible to a reader before close: one write per event, no buffering.
    lines = (run / "events" / "producer-0.jsonl").read_bytes().splitlines()
    assert [orjson.loads(x)["seq"] for x in lines] == [1, 2]
    w.close()


def test_writer_validates(run):
    w = EventWriter.for_run(run, "producer-0")
    with pytest.raises(ValueError, match="missing field 'value'"):
        w.emit(Kind.SEND_OK, topic="t", partition=0, offset=0, key=None)
    with pytest.raises(UsageError):
        EventWriter.for_run(run, "a/b")


def test_reopen_continues_seq_and_moves_torn_tail_aside(run):
    w = EventWriter.for_run(run, "consumer-0")
    phase(w, "setup", 1)
    w.close()
    path = run / "events" / "consumer-0.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"seq":2,"ts":1.0,"mono')  # killed mid-write
    w2 = EventWriter.for_run(run, "consumer-0")  # the runner writes member_stop on its behalf
    ev = w2.emit(Kind.MEMBER_STOP, mono_ns=5, group="g", clean=False, signal="SIGKILL")
    w2.close()
    assert ev.seq == 2
    assert (run / "events" / "consumer-0.jsonl.torn").read_bytes().startswith(b'{"seq":2')
    assert [orjson.loads(x)["kind"] for x in path.read_bytes().splitlines()] == ["phase", "member_stop"]


def test_merge_orders_by_mono_then_source_then_seq(run):
    a = EventWriter.for_run(run, "b-src")
    b = EventWriter.for_run(run, "a-src")
    send(a, 0, 300)
    send(a, 1, 100)  # a clock can only go forward, but merge must not rely on file order
    phase(b, "setup", 100)
    phase(b, "warmup", 200)
    a.close()
    b.close()
    out = merge_run(run)
    h = read_history(out)
    got = [(e.mono_ns, e.source) for e in h.events]
    assert got == [(100, "a-src"), (100, "b-src"), (200, "a-src"), (300, "b-src")]
    assert [e.seq for e in h.events] == [1, 2, 3, 4]
    assert h.header.run_id == "r1" and h.header.seed == 42
    # per-source files are kept; no temporary file is left behind
    assert sorted(p.name for p in (run / "events").iterdir()) == ["a-src.jsonl", "b-src.jsonl"]
    assert not (run / "history.jsonl.tmp").exists()


def test_merge_drops_torn_last_line_with_a_note(run):
    w = EventWriter.for_run(run, "consumer-0")
    phase(w, "setup", 1)
    w.close()
    with open(run / "events" / "consumer-0.jsonl", "ab") as f:
        f.write(b'{"seq":2,"ts"')
    h = read_history(merge_run(run))
    assert len(h.events) == 1
    assert any("torn last line" in n for n in h.notes)


def test_merge_rejects_corruption_in_the_middle(run):
    w = EventWriter.for_run(run, "consumer-0")
    phase(w, "setup", 1)
    w.close()
    with open(run / "events" / "consumer-0.jsonl", "ab") as f:
        f.write(b"garbage\n")
        f.write(orjson.dumps({"seq": 3, "ts": 1.0, "mono_ns": 9, "source": "consumer-0", "kind": "phase",
                              "name": "chaos"}) + b"\n")
    with pytest.raises(UsageError, match=r"consumer-0.jsonl:2: not valid JSON"):
        merge_run(run)


def test_merge_requires_header(tmp_path):
    (tmp_path / "events").mkdir()
    with pytest.raises(UsageError, match="header.json: missing"):
        merge_run(tmp_path)
    with pytest.raises(UsageError, match="no such run directory"):
        merge_run(tmp_path / "nope")


def history_file(tmp_path, lines: list[bytes], trailing_newline: bool = True):
    p = tmp_path / "history.jsonl"
    p.write_bytes(b"\n".join(lines) + (b"\n" if trailing_newline else b""))
    return p


def ev_line(seq: int, mono: int) -> bytes:
    return orjson.dumps({"seq": seq, "ts": 1.0, "mono_ns": mono, "source": "runner", "kind": "phase",
                         "name": "chaos"})


HEADER_LINE = orjson.dumps({"header": True, **HEADER})


def test_read_tolerates_torn_last_line(tmp_path):
    p = history_file(tmp_path, [HEADER_LINE, ev_line(1, 1), ev_line(2, 2)[:20]], trailing_newline=False)
    h = read_history(p)
    assert len(h.events) == 1 and "history.jsonl:3: dropped a torn last line" in h.notes[0]


def test_read_rejects_malformed_line_elsewhere(tmp_path):
    p = history_file(tmp_path, [HEADER_LINE, ev_line(1, 1)[:20], ev_line(2, 2)])
    with pytest.raises(UsageError, match=r"^history.jsonl:2: not valid JSON"):
        read_history(p)
    # a complete (newline-terminated) last line that is broken is corruption, not a crash
    p = history_file(tmp_path, [HEADER_LINE, ev_line(1, 1), b"{"])
    with pytest.raises(UsageError, match=r"^history.jsonl:3:"):
        read_history(p)


@pytest.mark.parametrize("lines, message", [
    ([], "history.jsonl:1: missing header"),
    ([b"{}"], 'history.jsonl:1: the first line must be the header'),
    ([b"nope"], "history.jsonl:1: header is not valid JSON"),
    ([HEADER_LINE, ev_line(1, 1), ev_line(1, 2)], "history.jsonl:3: seq 1 does not increase"),
    ([HEADER_LINE, ev_line(1, 5), ev_line(2, 2)], "history.jsonl:3: mono_ns goes backwards"),
    ([HEADER_LINE, orjson.dumps({"seq": 1, "kind": "phase"})], "history.jsonl:2: phase event is missing field"),
])
def test_read_rejects_bad_files(tmp_path, lines, message):
    p = history_file(tmp_path, lines)
    with pytest.raises(UsageError, match=message):
        read_history(p)


def test_read_missing_file(tmp_path):
    with pytest.raises(UsageError, match="no such history file"):
        read_history(tmp_path / "history.jsonl")


def test_tail_yields_complete_events_as_the_file_grows(tmp_path):
    path = tmp_path / "events" / "consumer-0.jsonl"
    tail = EventTail(path)
    assert tail.poll() == []  # file does not exist yet
    path.parent.mkdir()
    with open(path, "ab", buffering=0) as f:
        f.write(ev_line(1, 1) + b"\n" + ev_line(2, 2)[:10])
        assert [e.seq for e in tail.poll()] == [1]
        assert tail.poll() == []
        f.write(ev_line(2, 2)[10:] + b"\n")
        assert [e.seq for e in tail] == [2]
        f.write(b"junk\n")
        with pytest.raises(UsageError, match="consumer-0.jsonl:3"):
            tail.poll()


def test_dir_tail_picks_up_new_sources_in_time_order(run):
    tail = EventsDirTail(run / "events")
    assert tail.poll() == []
    a = EventWriter.for_run(run, "consumer-0")
    phase(a, "setup", 50)
    b = EventWriter.for_run(run, "nemesis")
    phase(b, "chaos", 10)
    assert [e.source for e in tail.poll()] == ["nemesis", "consumer-0"]
    phase(a, "heal", 60)
    assert [e.mono_ns for e in tail.poll()] == [60]
    a.close()
    b.close()


def test_seq_unique_after_merge_of_many_sources(run):
    writers = [EventWriter.for_run(run, f"consumer-{i}") for i in range(4)]
    for n in range(50):
        for i, w in enumerate(writers):
            phase(w, "chaos", (n * 7 + i * 3) % 40)
    for w in writers:
        w.close()
    h = read_history(merge_run(run))
    seqs = [e.seq for e in h.events]
    assert seqs == list(range(1, 201))
    monos = [e.mono_ns for e in h.events]
    assert monos == sorted(monos)
    assert os.path.getsize(run / "history.jsonl") > 0
