"""The event records are the schema: converters are derived from their field types.

These tests fail when a field added to a record has no converter, when a hand-tuned converter
disagrees with what the type says, and when importing the history pulls in Spark.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.history import EVENT_CLASS, Event, GroupMember, Kind, SchemaError, from_dict, to_json
from chaos.history import event as schema
from chaos.history.event import Int32, Name, converter_for, event_field_types, field_hints


def test_every_field_of_every_kind_has_a_converter():
    for kind, cls in EVENT_CLASS.items():
        _, steps, allowed = schema._PLANS[kind.value]
        assert [name for name, _, _ in steps] == [f.name for f in fields(cls)], kind
        assert allowed == {f.name for f in fields(cls)} | {"kind"}
        for name, conv, _ in steps:
            assert conv is converter_for(field_hints(cls)[name]), (kind, name)


def test_event_field_types_is_the_union_of_the_records_fields():
    union = {f.name for cls in EVENT_CLASS.values() for f in fields(cls)}
    types = event_field_types()
    assert set(types) == union
    assert list(types)[:4] == list(schema.COMMON_FIELDS)
    assert len(types["offsets"]) == 2  # consumed: offsets; commit/committed_offsets: [topic, partition, offset]


def test_a_new_field_is_converted_and_written_without_listing_it_anywhere():
    @dataclass(frozen=True, slots=True)
    class Probe(Event):
        brokers: tuple[Int32, ...]
        leader: Name | None
        where: tuple[Name, int]
        member: GroupMember
        extra: Mapping[str, Any]
        since: int | None = None
        kind: ClassVar[Kind] = Kind.PHASE  # a kind is needed to be an Event; not registered

    steps = schema._steps(Probe)
    assert [name for name, _, _ in steps] == [f.name for f in fields(Probe)]
    conv = {name: c for name, c, _ in steps}
    assert conv["brokers"]([1, 2], "brokers") == (1, 2)
    assert conv["where"](["t", 3], "where") == ("t", 3)
    member = conv["member"]({"member_id": "m", "instance_id": None, "client_id": "c", "host": "h",
                             "assignment": [["t", 0]]}, "member")
    assert member == GroupMember("m", None, "c", "h", (("t", 0),))
    with pytest.raises(SchemaError, match="'where' must be a list"):
        conv["where"](["t"], "where")
    with pytest.raises(SchemaError, match=r"'brokers\[1\]' must be an integer"):
        conv["brokers"]([1, "2"], "brokers")
    with pytest.raises(SchemaError, match="member is missing host"):
        conv["member"]({"member_id": "m", "instance_id": None, "client_id": "c", "assignment": []}, "member")
    encoded = schema._record_encoder(Probe)(Probe(1, 1.0, 1, "s", (1,), None, ("t", 0), member, {}))
    assert "since" not in encoded and encoded["member"] == {
        "member_id": "m", "instance_id": None, "client_id": "c", "host": "h", "assignment": (("t", 0),)}


def test_a_field_type_without_a_json_form_fails_at_import_time():
    @dataclass(frozen=True, slots=True)
    class Bad(Event):
        tags: frozenset[str]
        kind: ClassVar[Kind] = Kind.PHASE

    with pytest.raises(TypeError, match="has no converter"):
        schema._steps(Bad)


# Each hand-tuned converter must say exactly what the generic walk says for its type.
FAST_CASES: list[Any] = [
    [], [1, 2, 3], [0], [1, True], [1, 2.0], [1, None], ["1"], [["t", 0]], [["t", 0], ["u", 7]], [["t", 0, 5]],
    [["t", 0, 5], ["u", 1, 9]], [["t"]], [["t", True]], [["t", 1.0]], [[1, 0]], [[0, 1], [2, 3]], [[0, 1, 2]],
    [[0, True]], [[0, "1"]], [["t", 0, "5"]], [[None, 0]], [["t", 0], 3], ["ab"], ["abc"], [{"a": 1, "b": 2}],
    {}, {"t": 0}, "t", "", 5, None, True, 1.5,
]


def _agree(hint: Any, value: Any) -> None:
    fast, generic = converter_for(hint), converter_for(hint, fast=False)
    assert fast is not generic
    try:
        want = generic(value, "f")
    except SchemaError:
        with pytest.raises(SchemaError, match="'f'"):
            fast(value, "f")
        return
    assert fast(value, "f") == want


@pytest.mark.parametrize("hint", list(schema._FAST), ids=repr)
@pytest.mark.parametrize("value", FAST_CASES, ids=repr)
def test_fast_converters_agree_with_the_type(hint, value):
    _agree(hint, value)


_json_leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.sampled_from(["t", ""])
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2), max_leaves=12)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hint=st.sampled_from(list(schema._FAST)), value=_json)
def test_fast_converters_agree_with_the_type_on_any_json(hint, value):
    _agree(hint, value)


def test_written_lines_are_unchanged_by_derivation():
    """Bytes as the hand-kept schema wrote them (answered_ns and subscription left out at their defaults)."""
    member = GroupMember("m", None, "c", "/127.0.0.1", (("t", 0),))
    line = to_json(from_dict({"seq": 1, "ts": 1.5, "mono_ns": 10, "source": "observer", "kind": "group_state",
                              "group": "g", "state": "Stable", "coordinator": 2, "protocol": "range",
                              "generation": 4, "members": [{"member_id": "m", "instance_id": None, "client_id": "c",
                                                            "host": "/127.0.0.1", "assignment": [["t", 0]]}]}))
    assert line == (b'{"seq":1,"ts":1.5,"mono_ns":10,"source":"observer","kind":"group_state","group":"g",'
                    b'"state":"Stable","coordinator":2,"protocol":"range","generation":4,"members":[{"member_id":'
                    b'"m","instance_id":null,"client_id":"c","host":"/127.0.0.1","assignment":[["t",0]]}]}')
    assert from_dict(orjson.loads(line)).members == (member,)


def test_importing_the_history_does_not_import_spark():
    code = "import sys, chaos.history; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0
