"""The instrumented confluent-kafka Consumer never asks librdkafka for the group metadata while closing.

librdkafka may run a revoke callback from ``close()`` after its group handler terminated (a revocation still
waiting for the application's poll when ``close`` began: it leaves first), and then never answers a group
metadata request: ``consumer_group_metadata()`` blocked the application forever, holding the GIL
(:meth:`chaos.instrument.consumer.Consumer._chaos_view`). Real ``confluent_kafka`` objects, no broker; the
library's ``close`` is replaced by one that runs the revocation, as librdkafka does there.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from confluent_kafka import TopicPartition

import chaos.instrument.consumer as instrumented
from chaos.instrument.consumer import Consumer, LibraryConsumer

BASE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "group.id": "g"}


def events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_events_recorded_during_close_carry_the_view_read_when_close_began(tmp_path, monkeypatch):
    path = tmp_path / "consumer-0.jsonl"
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(path))
    calls: list[str] = []
    given: dict[str, object] = {}
    library_callbacks = instrumented.rebalance_callbacks

    def keep(*args):  # the callbacks the instrumented consumer hands librdkafka
        given["assign"], given["revoke"], given["lost"] = callbacks = library_callbacks(*args)
        return callbacks

    class Library(LibraryConsumer):
        def consumer_group_metadata(self):
            calls.append("group metadata")
            return LibraryConsumer.consumer_group_metadata(self)

        def close(self):
            calls.append("close")
            given["revoke"](self, [TopicPartition("t", 0)])  # served by librdkafka's close
            calls.append("revoked")
            return LibraryConsumer.close(self)

    monkeypatch.setattr(instrumented, "rebalance_callbacks", keep)
    monkeypatch.setattr(instrumented, "LibraryConsumer", Library)
    c = Consumer(BASE)
    seen: list[list[int]] = []
    c.subscribe(["t"], on_revoke=lambda consumer, partitions: seen.append([p.partition for p in partitions]))
    c.close()
    # read once as close began; the revocation inside it asks librdkafka nothing
    assert calls == ["group metadata", "close", "revoked"] and seen == [[0]]
    kinds = [(e["kind"], e.get("partitions"), e.get("generation"), e.get("member_id")) for e in events(path)
             if e["kind"] != "error"]  # the absent broker's connection errors
    assert kinds == [("member_start", None, None, None), ("revoked", [["t", 0]], None, None),
                     ("member_stop", None, None, None)]
    assert events(path)[-1]["clean"] is True


def test_outside_close_the_view_is_read_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(tmp_path / "consumer-0.jsonl"))
    calls: list[str] = []

    class Library(LibraryConsumer):
        def consumer_group_metadata(self):
            calls.append("group metadata")
            return LibraryConsumer.consumer_group_metadata(self)

    monkeypatch.setattr(instrumented, "LibraryConsumer", Library)
    c = Consumer(BASE)
    assert c._chaos_view() == (None, None) and c._chaos_view() == (None, None)  # no broker: not joined
    assert calls == ["group metadata"] * 2
    c.close()
    assert calls == ["group metadata"] * 3  # the one read as close began
