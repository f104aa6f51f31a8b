"""The group's offset commits as ``__consumer_offsets`` stores them: evidence of what the store held.

A coordinator answers an OffsetCommit once the commit's record is in its ``__consumer_offsets`` partition and,
with the replication the topic asks for, on the in-sync replicas. What the group's coordinator later *answers*
an OffsetFetch with can lag that store for a moment (a new coordinator serves reads at its high watermark,
which trails its log after a failover: docs/architecture.md, "Committed offsets across coordinator failover").
The records themselves settle what the answers cannot: a commit whose record is in the partition at the end of
the run, appended before the commit was answered, was never lost — the line of leaders that followed kept it
(a leader that lacked it would have made every later replica truncate it away).

The runner reads, after the run, the group's partition from the run's start to its high watermark and
records every offset commit of the group (:class:`chaos.history.StoredOffsets`).

Why decoded here rather than by a library: no maintained Python package reads ``__consumer_offsets``
records, and the part needed is small. Kafka's record formats (``OffsetCommitKey``: version 0 or 1 — 2 is a
group's metadata, 3 and up the KIP-848 and share records — then the group, the topic and the partition;
``OffsetCommitValue``: its version, then the committed offset first in every version 0-4; a null value is
a deleted offset) are in ``group-coordinator/src/main/resources/common/message/OffsetCommit{Key,Value}.json``
(Kafka 3.x/4.x; ``GroupMetadataManager.scala`` before). The append time is the record's timestamp: the
coordinator stamps the batch with its clock when it stores the commit.
"""

from __future__ import annotations

import struct
import time

#: the internal topic's name
OFFSETS_TOPIC = "__consumer_offsets"
#: OffsetCommitKey versions (2 is GroupMetadataKey; 3+ are KIP-848 / share-group records)
_OFFSET_COMMIT_KEYS = (0, 1)


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` of Java: over UTF-16 code units, with int32 overflow."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``: ``Utils.abs(groupId.hashCode) % partitions``
    (``GroupCoordinatorService.topicPartitionFor``; ``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    if n < 0 or pos + 2 + n > len(buf):
        raise struct.error(f"a string of {n} bytes at {pos} overruns the record's {len(buf)}")
    return buf[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def decode(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int | None] | None:
    """(group, topic, partition, committed offset — None for a deleted one) of an offset-commit record, else
    None (another record type, or bytes that do not parse as one)."""
    if key is None or len(key) < 2:
        return None
    try:
        (version,) = struct.unpack_from(">h", key, 0)
        if version not in _OFFSET_COMMIT_KEYS:
            return None
        group, pos = _string(key, 2)
        topic, pos = _string(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        if value is None:
            return group, topic, partition, None
        (offset,) = struct.unpack_from(">q", value, 2)
    except (struct.error, UnicodeDecodeError):
        return None
    return group, topic, partition, offset


def read_stored(bootstrap: str, group: str, since_ms: int, timeout: float = 30.0) -> tuple[int, list[list]]:
    """The group's ``__consumer_offsets`` partition and its offset commits appended from ``since_ms`` (wall ms)
    up to the partition's high watermark now: ``[topic, partition, offset, log offset, append ms]`` each, a
    deleted offset left out. Bounded by ``timeout``; raises ``TimeoutError`` when the read did not reach the
    high watermark (the caller records nothing: a partial read would be taken for a complete one)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"stored-offsets-{group}", "enable.auto.commit": False,
                  "log_level": 0})
    deadline = time.monotonic() + timeout
    try:
        meta = c.list_topics(OFFSETS_TOPIC, timeout=timeout).topics.get(OFFSETS_TOPIC)
        if meta is None or meta.error is not None or not meta.partitions:
            raise TimeoutError(f"{OFFSETS_TOPIC} has no partitions in the cluster's metadata")
        part = partition_for(group, len(meta.partitions))
        _lo, high = c.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, part), timeout=timeout)
        [start] = c.offsets_for_times([TopicPartition(OFFSETS_TOPIC, part, since_ms)], timeout=timeout)
        first = start.offset if start.offset >= 0 else high
        out: list[list] = []
        if first >= high:
            return part, out
        tp = TopicPartition(OFFSETS_TOPIC, part, first)
        c.assign([tp])
        position = first
        # the position, not the last record: transaction markers take offsets and are never handed out
        while position < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{OFFSETS_TOPIC}-{part}: read up to {position} of {high} in {timeout:g}s")
            for msg in c.consume(1000, 0.2):
                offset = msg.offset()
                if msg.error() is not None or offset is None or offset >= high:
                    continue
                got = decode(msg.key(), msg.value())
                if got is not None and got[0] == group and got[3] is not None:
                    out.append([got[1], got[2], got[3], offset, msg.timestamp()[1]])
            [at] = c.position([tp])
            position = max(position, at.offset)
        return part, out
    finally:
        c.close()


__all__ = ["OFFSETS_TOPIC", "decode", "java_string_hash", "partition_for", "read_stored"]
