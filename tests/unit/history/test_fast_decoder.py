"""The typed fast decoder (msgspec) against the reference path (orjson + ``from_dict``).

The fast path may refuse a line the reference path accepts (that line is then read by the reference
path), but it must never accept a line the reference path refuses, nor read one differently: values,
their Python types, interned names. ``read_history`` must give the same one-line errors whichever
path met the bad line first, and the same history.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.errors import UsageError
from chaos.history import EVENT_CLASS, Event, Kind, SchemaError, from_dict, read_history, reader, to_dict, write_history
from chaos.history import event as schema
from tests.simulation import SimulationSpec, simulate

EXTRA = {  # kinds the simulation does not write, and optional fields it leaves at their defaults
    "send_fail": {"topic": "t", "key": "k", "value": "v", "error_code": 19, "error_name": "NOT_ENOUGH_REPLICAS"},
    "send_unknown": {"topic": "t", "key": None, "value": "v", "error_name": "_MSG_TIMED_OUT"},
    "error": {"message": "boom", "error_code": None, "error_name": None, "fatal": False, "ts_uncertain_ns": 5,
              "log_ref": "workers/consumer-1.log:3"},
    "fault_start": {"fault_id": "f1", "fault_type": "pause", "target_role": "consumer", "node": "consumer-1",
                    "params": {"ms": 100, "nested": [1, {"a": None}]}, "trigger": "time",
                    "traits": ["takes_target_out"]},
    "group_state": {"group": "g", "state": "Reconciling", "coordinator": 2, "protocol": "uniform", "generation": 4,
                    "members": [{"member_id": "m", "instance_id": "i", "client_id": "c", "host": "",
                                 "assignment": [["t", 0]], "subscription": ["t"], "member_epoch": 3,
                                 "target_assignment": [["t", 0], ["t", 1]], "later_field": 1}],
                    "group_epoch": 4, "assignment_epoch": 3, "group_type": "consumer"},
    "fault_end": {"fault_id": "f1", "fault_type": "pause", "node": None},
    "fault_verified": {"fault_id": "f1", "stage": "effect", "ok": True, "evidence": "state T"},
    "lost": {"group": "g", "partitions": [["t", 2]], "generation": 3, "member_id": "m", "incremental": False,
             "ts_uncertain_ns": 7},
    "commit": {"group": "g", "offsets": [["t", 1, 7]], "generation": 3, "member_id": "m", "outcome": "ok",
               "error_code": None, "error_name": None, "auto": True, "answered_ns": 12, "ts_uncertain_ns": None},
    "stored_offsets": {"group": "g", "log_partition": 1, "stored": [["t", 1, 7, 4096, 1795938431951]]},
    # share groups (KIP-932): every optional field set
    "share_acquired": {"group": "g", "topic": "t", "partition": 1, "offsets": [4, 5], "delivery_count": 2,
                       "member_id": "m", "lock_duration_ms": 30000, "fetched_ns": 8, "ts_uncertain_ns": 3},
    "share_acknowledged": {"group": "g", "topic": "t", "partition": 1, "offsets": [4], "ack_type": "release",
                           "member_id": "m", "outcome": "fail", "error_code": 121,
                           "error_name": "INVALID_RECORD_STATE", "answered_ns": 14, "ts_uncertain_ns": 2},
    "share_lock_expired": {"group": "g", "topic": "t", "partition": 1, "offsets": [5], "delivery_count": None,
                           "member_id": None},
    "share_processed": {"group": "g", "topic": "t", "partition": 1, "offsets": [4], "delivery_count": 2,
                        "member_id": None, "started_ns": 6},
    "share_group_state": {"group": "g", "state": "Stable", "coordinator": 1, "group_epoch": 2, "assignment_epoch": 2,
                          "members": [{"member_id": "m", "instance_id": None, "client_id": "c", "host": "/127.0.0.1",
                                       "assignment": [["t", 1]], "subscription": ["t"], "member_epoch": 2}],
                          "start_offsets": [["t", 0, 3], ["t", 1, 4]], "delivery_count_limit": 5,
                          "record_lock_duration_ms": 30000},
}


def _samples() -> list[dict[str, Any]]:
    history = simulate(SimulationSpec(seed=3, events=3000, members=3, partitions=4))
    seen: dict[str, dict[str, Any]] = {}
    for e in history.events:
        seen.setdefault(e.kind.value, orjson.loads(orjson.dumps(to_dict(e))))
    out = list(seen.values())
    out += [{"seq": 1, "ts": 1.5, "mono_ns": 10, "source": "consumer-1", "kind": k, **v} for k, v in EXTRA.items()]
    return out


SAMPLES = _samples()


def _dumps(obj: Any) -> bytes:
    """JSON text of ``obj``; unlike orjson, writes integers past 64 bits (which orjson reads as floats)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def _fast(line: bytes) -> Event | None:
    data = line + b"\n"
    got = schema.decode_events(data, 0, len(data), data.count(b"\n"))
    return None if got is None else got[0]


def _reference(line: bytes) -> Event | str:
    try:
        return from_dict(orjson.loads(line))
    except (orjson.JSONDecodeError, SchemaError) as exc:
        return f"refused: {exc}"


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same Python types all the way down (1 == 1.0 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Event) or hasattr(a, "__dataclass_fields__"):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b) or (a != a and b != b)


def _agree(line: bytes) -> Event | None:
    fast, ref = _fast(line), _reference(line)
    if fast is not None:
        assert not isinstance(ref, str), f"fast path accepted what the reference refuses ({ref}): {line!r}"
        assert _same(fast, ref), (fast, ref)
    return fast


def test_every_kind_is_sampled():
    assert {s["kind"] for s in SAMPLES} == {k.value for k in Kind}
    assert set(schema._WIRE_STRUCTS) >= set(EVENT_CLASS.values())


@pytest.mark.parametrize("obj", SAMPLES, ids=lambda s: s["kind"])
def test_valid_lines_read_the_same_on_both_paths(obj):
    line = _dumps(obj)
    fast = _agree(line)
    assert fast is not None, f"the fast path refused a valid line: {line!r}"
    assert fast.source is sys.intern(obj["source"])  # names are interned, as the reference path does
    # kind anywhere in the object
    moved = _dumps({**{k: v for k, v in obj.items() if k != "kind"}, "kind": obj["kind"]})
    assert _same(_agree(moved), fast)
    _agree(b"  " + moved + b" \r")  # whitespace around it: left to the reference path


def test_shared_topic_partitions():
    line = _dumps(next(s for s in SAMPLES if s["kind"] == "assigned"))
    a, b = _fast(line), _fast(line)
    assert a is not None and b is not None and a.partitions[0] is b.partitions[0]  # type: ignore[attr-defined]


BAD_VALUES: list[Any] = [None, True, False, 0, -1, 1.5, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, "", "x", [], [1], ["t", 0],
                         [["t", 0]], [["t", 0, 1]], {}, {"a": 1}, "Stable", "ok", "java"]


@pytest.mark.parametrize("obj", SAMPLES, ids=lambda s: s["kind"])
def test_wrong_values_missing_and_unknown_fields(obj):
    for name in obj:
        for value in BAD_VALUES:
            _agree(_dumps({**obj, name: value}))
        _agree(_dumps({k: v for k, v in obj.items() if k != name}))
    _agree(_dumps({**obj, "typo_field": 1}))
    _agree(_dumps({**obj, "kind": "no_such_kind"}))
    for k in Kind:
        _agree(_dumps({**obj, "kind": k.value}))


@pytest.mark.parametrize("line", [
    b"", b" ", b"[]", b"null", b"{", b'{"seq":1}', b'{"kind":"phase"}', b'{"kind":"phase","name":"chaos","seq":1,"ts":1,'
    b'"mono_ns":1,"source":"s"} x', b'{"kind":"phase","name":"chaos","seq":1,"ts":1,"mono_ns":1,"source":"\xff"}',
    b'{"kind":"phase","name":"chaos","seq":1,"ts":1e400,"mono_ns":1,"source":"s"}',
    b'{"kind":"phase","name":"chaos","seq":1,"ts":1,"mono_ns":1,"source":"\\ud800"}',
    b'{"kind":"phase","name":"chaos","seq":1,"ts":NaN,"mono_ns":1,"source":"s"}',
    b'{"kind":"phase","kind":"phase","name":"chaos","seq":1,"seq":2,"ts":1,"mono_ns":1,"source":"s"}',
    b'{"kind":"fault_start","seq":1,"ts":1,"mono_ns":1,"source":"s","fault_id":"f","fault_type":"t","target_role":"r",'
    b'"node":null,"trigger":"x","params":{"a":' + b"[" * 2000 + b"]" * 2000 + b"}}",
    b'{"kind":"fault_start","seq":1,"ts":1,"mono_ns":1,"source":"s","fault_id":"f","fault_type":"t","target_role":"r",'
    b'"node":null,"trigger":"x","params":{"a":123456789012345678901234567890}}',
])
def test_malformed_lines(line):
    _agree(line)


_json_leaf = (st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.floats(allow_nan=False)
              | st.sampled_from(["t", "", "Stable", "ok", "range"]))
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["a", "member_id", "assignment"]), inner, max_size=2),
                     max_leaves=8)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=st.sampled_from(SAMPLES), data=st.data())
def test_any_value_in_any_field(obj, data):
    name = data.draw(st.sampled_from(sorted(obj)))
    _agree(_dumps({**obj, name: data.draw(_json)}))


CHUNK = 1 << 16  # bytes: a few hundred events per chunk, so that a test history has many


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(reader, "_CHUNK_BYTES", CHUNK)


def _write(tmp_path: Path, n: int) -> tuple[Path, list[bytes]]:
    path = tmp_path / "history.jsonl"
    write_history(path, simulate(SimulationSpec(seed=5, events=n, members=3, partitions=4)))
    return path, path.read_bytes().split(b"\n")


def test_history_reads_the_same_on_both_paths(tmp_path, monkeypatch):
    path, _ = _write(tmp_path, 3000)
    fast = read_history(path)
    monkeypatch.setattr(reader, "decode_events", lambda *args: None)  # every chunk on the reference path
    ref = read_history(path)
    assert len(fast.events) == len(ref.events) > 2000
    assert all(_same(a, b) for a, b in zip(fast.events, ref.events, strict=True))
    assert fast.notes == ref.notes


@pytest.mark.parametrize("where", [0.1, 0.6, 0.999])
@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:-1] + b',"typo":1}', "unknown field(s) 'typo'"),
    (lambda raw: raw.replace(b'"seq":', b'"seq":"', 1).replace(b',"ts"', b'","ts"', 1), "'seq' must be an integer"),
    (lambda raw: b"", "empty line"),
    (lambda raw: raw[:20], "not valid JSON"),
])
def test_an_error_in_any_chunk_names_its_line(tmp_path, where, damage, message):
    path, lines = _write(tmp_path, 3000)
    i = int(len(lines) * where)
    lines[i] = damage(lines[i])
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UsageError, match=rf"^history\.jsonl:{i + 1}: .*{re.escape(message)}"):
        read_history(path)


def test_order_errors_across_chunks(tmp_path):
    path, lines = _write(tmp_path, 2000)
    data = path.read_bytes()
    first_end = data.index(b"\n", len(lines[0]) + 1 + CHUNK) + 1  # where the reader ends its first chunk
    i = data.count(b"\n", 0, first_end)  # index in ``lines`` of the second chunk's first line
    lines[i - 1], lines[i] = lines[i], lines[i - 1]  # the first chunk still reads in order, the second does not
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UsageError, match=rf"^history\.jsonl:{i + 1}: seq \d+ does not increase"):
        read_history(path)


def test_a_valid_line_the_fast_path_refuses_is_still_read(tmp_path):
    path, lines = _write(tmp_path, 2000)
    i = next(n for n in range(len(lines) // 2, len(lines)) if b'"kind":"send_ok"' in lines[n])
    obj = orjson.loads(lines[i])
    obj["offset"] = 2**63 + 5  # orjson reads it as an int; msgspec's bound stops at 2^63 - 1
    lines[i] = orjson.dumps(obj)
    path.write_bytes(b"\n".join(lines))
    assert _fast(lines[i]) is None
    history = read_history(path)
    assert history.events[i - 1].offset == 2**63 + 5  # type: ignore[attr-defined]


def test_torn_last_line_is_still_dropped(tmp_path):
    path, lines = _write(tmp_path, 1010)
    path.write_bytes(b"\n".join(lines[:-1]) + b"\n" + lines[-2][:30])
    history = read_history(path)
    assert len(history.events) == len(lines) - 2
    assert any("dropped a torn last line" in n for n in history.notes)


def test_line_structure_is_kept_when_values_could_be_regrouped(tmp_path):
    """msgspec reads a stream of values: two events on one line plus one event split over two lines
    make as many values as lines. The fast path must refuse that chunk; the reference path names the line."""
    path, lines = _write(tmp_path, 40)
    a, b, c = lines[10], lines[11], lines[12]
    cut = c.index(b',"ts"') + 1
    lines[10:13] = [a + b, c[:cut], c[cut:]]  # same line count, same value count
    data = b"\n".join(lines)
    body = data.index(b"\n") + 1
    assert schema.decode_events(data, body, len(data), data.count(b"\n", body)) is None
    path.write_bytes(data)
    with pytest.raises(UsageError, match=r"^history\.jsonl:11: not valid JSON"):
        read_history(path)
