"""Reading ``__consumer_offsets`` records (chaos.workload.offsets_log): the partition of a group and the decoding.
The read itself runs against a real cluster in tests/integration/test_workload.py."""

from __future__ import annotations

import struct

import pytest

from chaos.workload.offsets_log import decode, java_string_hash, partition_for


def _str(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _key(version: int, group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", version) + _str(group) + _str(topic) + struct.pack(">i", partition)


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("hello", 99162322),                      # Java's "hello".hashCode()
    ("polygenelubricants", -(2**31)),                   # the String whose hashCode is Integer.MIN_VALUE
    ("é", 233), ("😀", 55357 * 31 + 56832),                       # UTF-16 code units: a surrogate pair counts twice
])
def test_java_string_hash_is_javas(text, expected):
    assert java_string_hash(text) == expected


def test_the_partition_of_a_group_is_kafkas():
    assert partition_for("group-61d195e4b0", 5) == 1      # read from a 4.4.0 cluster's logs (partition=1)
    assert partition_for("polygenelubricants", 50) == 0   # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_an_offset_commit_record_decodes_to_group_topic_partition_and_offset():
    value_v3 = struct.pack(">hqi", 3, 4211, 7) + _str("") + struct.pack(">q", 1_795_938_431_951)
    assert decode(_key(1, "g", "t", 11), value_v3) == ("g", "t", 11, 4211)
    value_v1 = struct.pack(">hq", 1, 65) + _str("meta") + struct.pack(">qq", 1, 2)
    assert decode(_key(0, "g", "t", 0), value_v1) == ("g", "t", 0, 65)
    assert decode(_key(1, "g", "t", 3), None) == ("g", "t", 3, None)   # a deleted offset


@pytest.mark.parametrize("key, value", [
    (struct.pack(">h", 2) + _str("g"), b"\x00\x03"),                     # group metadata, not an offset commit
    (struct.pack(">h", 5) + _str("g"), b""),                              # a KIP-848 record
    (None, b"x"), (b"\x00", b""),                                          # no key, a key too short
    (struct.pack(">h", 1) + struct.pack(">h", 40) + b"g", b""),           # a string longer than the key
    (_key(1, "g", "t", 0), b"\x00\x01\x00"),                              # a value too short
])
def test_anything_else_is_not_an_offset_commit(key, value):
    assert decode(key, value) is None
