"""Event schema: round-trips, and rejection of what a worker could get wrong."""

from __future__ import annotations

import orjson
import pytest

from chaos.history import (
    EVENT_CLASS,
    Assigned,
    Commit,
    GroupStateSample,
    Kind,
    SchemaError,
    from_dict,
    header_from_dict,
    to_dict,
    to_json,
)
from chaos.outcome import Outcome

SAMPLES = {
    "send_ok": {"topic": "t", "partition": 0, "offset": 5, "key": None, "value": "r:p0:5"},
    "send_fail": {"topic": "t", "key": "k", "value": "r:p0:6", "error_code": 19, "error_name": "NOT_ENOUGH_REPLICAS"},
    "send_unknown": {"topic": "t", "key": None, "value": "r:p0:7", "error_name": "_MSG_TIMED_OUT"},
    "member_start": {"group": "g", "client": "java", "client_version": "3.9.1", "instance_id": "i0",
                     "assignor": "cooperative-sticky", "protocol": "cooperative", "commit_mode": "async",
                     "session_timeout_ms": 6000, "max_poll_interval_ms": 30000, "auto_commit_interval_ms": None,
                     "wrong_mode": "skip_records"},
    "assigned": {"group": "g", "partitions": [["t", 0], ["t", 1]], "generation": 3, "member_id": "m",
                 "incremental": True},
    "revoked": {"group": "g", "partitions": [], "generation": None, "member_id": None, "incremental": False},
    "lost": {"group": "g", "partitions": [["t", 2]], "generation": 3, "member_id": "m", "incremental": False},
    "consumed": {"group": "g", "topic": "t", "partition": 1, "offsets": [4, 5, 6], "generation": 3, "member_id": "m"},
    "commit": {"group": "g", "offsets": [["t", 1, 7]], "generation": 3, "member_id": "m", "outcome": "unknown",
               "error_code": 7, "error_name": "REQUEST_TIMED_OUT", "auto": False},
    "error": {"message": "boom", "error_code": None, "error_name": None, "fatal": False},
    "member_stop": {"group": "g", "clean": False, "signal": "SIGKILL"},
    "group_state": {"group": "g", "state": "Stable", "coordinator": 2, "protocol": "range", "generation": 4,
                    "members": [{"member_id": "m", "instance_id": None, "client_id": "c", "host": "/127.0.0.1",
                                 "assignment": [["t", 0]]}]},
    "broker_log": {"broker": 1, "group": "g", "event": "preparing_rebalance", "generation": 3, "member_id": None,
                   "line": "Preparing to rebalance group g ... with old generation 3"},
    "committed_offsets": {"group": "g", "coordinator": None, "offsets": [["t", 0, 12]]},
    "fault_start": {"fault_id": "f1", "fault_type": "pause", "target_role": "consumer", "node": "consumer-1",
                    "params": {"ms": 100}, "trigger": "state:PreparingRebalance"},
    "fault_end": {"fault_id": "f1", "fault_type": "pause", "node": None},
    "fault_verified": {"fault_id": "f1", "stage": "effect", "ok": True, "evidence": "state T"},
    "phase": {"name": "quiesce"},
    "final_read": {"group": None, "topic": "t", "records": [[0, 1], [0, 2]]},
    "stored_offsets": {"group": "g", "log_partition": 3, "stored": [["t", 0, 12, 4096, 1795938431951]]},
    # share groups (KIP-932): required fields only (tests/unit/checkers/test_share_checkers.py sets the others)
    "share_acquired": {"group": "g", "topic": "t", "partition": 0, "offsets": [3, 4], "delivery_count": 1,
                       "member_id": "m"},
    "share_acknowledged": {"group": "g", "topic": "t", "partition": 0, "offsets": [3], "ack_type": "accept",
                           "member_id": "m", "outcome": "ok", "error_code": None, "error_name": None},
    "share_lock_expired": {"group": "g", "topic": "t", "partition": 0, "offsets": [4], "delivery_count": 1,
                           "member_id": "m"},
    "share_processed": {"group": "g", "topic": "t", "partition": 0, "offsets": [3], "delivery_count": 1,
                        "member_id": None, "started_ns": 5},
    "share_group_state": {"group": "g", "state": "Stable", "coordinator": 1, "group_epoch": 2, "assignment_epoch": 2,
                          "members": [], "start_offsets": None},
}


def make(kind: str, **over) -> dict:
    return {"seq": 1, "ts": 1.5, "mono_ns": 10, "source": "consumer-1", "kind": kind, **SAMPLES[kind], **over}


def test_every_kind_has_a_sample():
    assert set(SAMPLES) == {k.value for k in Kind}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_round_trip(kind):
    d = make(kind)
    ev = from_dict(d)
    assert type(ev) is EVENT_CLASS[Kind(kind)]
    assert orjson.loads(to_json(ev)) == d
    assert from_dict(orjson.loads(to_json(ev))) == ev


def test_typed_fields():
    c = from_dict(make("commit"))
    assert isinstance(c, Commit) and c.outcome is Outcome.UNKNOWN and c.offsets == (("t", 1, 7),)
    a = from_dict(make("assigned"))
    assert isinstance(a, Assigned) and a.partitions == (("t", 0), ("t", 1))
    s = from_dict(make("group_state"))
    assert isinstance(s, GroupStateSample) and s.members[0].assignment == (("t", 0),)
    assert list(to_dict(s)) [:5] == ["seq", "ts", "mono_ns", "source", "kind"]


def test_events_are_frozen():
    ev = from_dict(make("send_ok"))
    with pytest.raises(AttributeError):
        ev.offset = 3  # type: ignore[misc]


@pytest.mark.parametrize("bad, message", [
    ({"kind": "sent"}, "unknown kind 'sent'"),
    ({"kind": None}, "no 'kind'"),
    ({"offset": "5"}, "'offset' must be an integer"),
    ({"offset": True}, "'offset' must be an integer"),
    ({"partition": 1.0}, "'partition' must be an integer"),
    ({"valeu": "x"}, "unknown field(s) 'valeu'"),
])
def test_rejects_bad_send_ok(bad, message):
    d = {**make("send_ok"), **bad}
    if d["kind"] is None:
        del d["kind"]
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_dict(d)


def test_rejects_missing_field_and_bad_enum():
    d = make("commit")
    del d["auto"]
    with pytest.raises(SchemaError, match="missing field 'auto'"):
        from_dict(d)
    with pytest.raises(SchemaError, match="ok|fail|unknown"):
        from_dict(make("commit", outcome="maybe"))
    with pytest.raises(SchemaError, match="topic, partition"):
        from_dict(make("assigned", partitions=[["t"]]))
    with pytest.raises(SchemaError, match="members\\[0\\] is missing"):
        from_dict(make("group_state", members=[{"member_id": "m"}]))


def test_header():
    h = header_from_dict({"header": True, "schema_version": 1, "run_id": "r", "seed": 3, "experiment": {},
                          "versions": {}, "configs": {}})
    assert h.run_id == "r" and h.notes == ()
    with pytest.raises(SchemaError, match="schema_version 2"):
        header_from_dict({"header": True, "schema_version": 2, "run_id": "r", "seed": 3, "experiment": {},
                          "versions": {}, "configs": {}})
    with pytest.raises(SchemaError, match="missing field 'configs'"):
        header_from_dict({"header": True, "schema_version": 1, "run_id": "r", "seed": 3, "experiment": {},
                          "versions": {}})


def test_commit_answer_time_is_optional_and_round_trips():
    old = from_dict(make("commit"))
    assert old.answered_ns is None
    d = make("commit", answered_ns=99)
    ev = from_dict(d)
    assert ev.answered_ns == 99 and orjson.loads(to_json(ev)) == d
    with pytest.raises(SchemaError, match="answered_ns"):
        from_dict(make("commit", answered_ns="soon"))


def test_group_member_subscription_is_optional_and_validated():
    sample = make("group_state")
    member = dict(sample["members"][0])
    assert from_dict(sample).members[0].subscription == ()
    ev = from_dict({**sample, "members": [{**member, "subscription": ["t", "x"]}]})
    assert ev.members[0].subscription == ("t", "x")
    assert orjson.loads(to_json(ev))["members"][0]["subscription"] == ["t", "x"]
    with pytest.raises(SchemaError, match="subscription"):
        from_dict({**sample, "members": [{**member, "subscription": "t"}]})
