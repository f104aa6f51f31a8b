"""chaos.instrument for kafka-python: the hook, the generation it reads, the listener it wraps and the
commits it records — real ``kafka`` objects, no broker (bootstrap 127.0.0.1:1 is never reached;
``api_version`` given so the client does not probe it)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import kafka
import kafka.consumer
import orjson
import pytest
from kafka import ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.base import Generation
from kafka.errors import CommitFailedError, IllegalGenerationError, KafkaTimeoutError, NodeNotReadyError

import chaos.instrument
from chaos.errors import UsageError
from chaos.instrument import hook
from chaos.instrument.kafka_python import (
    KafkaConsumer,
    LibraryConsumer,
    RecordingListener,
    answer_of,
    assignor_of,
    generation_view,
    offsets_of,
)
from chaos.model.workload import Assignor
from chaos.outcome import Outcome

SITE = Path(chaos.instrument.__file__).parent / "site"
BASE = {"bootstrap_servers": "127.0.0.1:1", "api_version": (2, 8), "enable_auto_commit": False}


@pytest.fixture
def events_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "events" / "consumer-0.jsonl"
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(path))
    monkeypatch.setenv("KAFKA_CHAOS_GROUP", "g")
    return path


def events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_install_swaps_kafka_pythons_exported_class_and_uninstall_restores_it():
    original = kafka.KafkaConsumer
    swaps = hook.install()
    assert {(s.module, s.name) for s in swaps} >= {("kafka", "KafkaConsumer"), ("kafka.consumer", "KafkaConsumer")}
    from kafka import KafkaConsumer as Imported

    assert Imported is KafkaConsumer and kafka.consumer.KafkaConsumer is KafkaConsumer
    assert issubclass(Imported, original) and LibraryConsumer is original
    hook.uninstall()
    assert kafka.KafkaConsumer is original and kafka.consumer.KafkaConsumer is original


@pytest.mark.parametrize("flag, expected", [("1", "chaos.instrument.kafka_python"), ("", "kafka.consumer.group")])
def test_sitecustomize_gives_the_application_the_instrumented_kafka_consumer(flag, expected):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]),
           "KAFKA_CHAOS_INSTRUMENT": flag}
    out = subprocess.run([sys.executable, "-c", "from kafka import KafkaConsumer; print(KafkaConsumer.__module__)"],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == expected


def test_generation_is_read_where_kafka_python_keeps_it_and_never_invented():
    lock = threading.Condition()
    assert generation_view(SimpleNamespace(_lock=lock, _generation=Generation(7, "m-1", "range"))) == (7, "m-1")
    # reset_generation(): -1 and an empty member id mean the client cannot tell
    assert generation_view(SimpleNamespace(_lock=lock, _generation=Generation(-1, "", None))) == (None, None)
    assert generation_view(SimpleNamespace(_generation_id=3, _member_id="m-2")) == (3, "m-2")  # older releases
    assert generation_view(SimpleNamespace()) == (None, None)


def test_assignor_recorded_is_the_first_the_schema_names():
    assert assignor_of([RoundRobinPartitionAssignor, StickyPartitionAssignor]) == (Assignor.ROUNDROBIN, None)
    custom = SimpleNamespace(name="mine")
    assert assignor_of([custom, StickyPartitionAssignor]) == (Assignor.STICKY, "mine")
    assert assignor_of([custom]) == (Assignor.RANGE, "mine")


def test_commit_answers_classify_kafka_pythons_exceptions():
    tpos = (("t", 0, 5),)
    assert answer_of(tpos, None).outcome is Outcome.OK
    refused = answer_of(tpos, CommitFailedError(IllegalGenerationError()))
    assert (refused.outcome, refused.error_name) == (Outcome.FAIL, "IllegalGenerationError")
    assert answer_of(tpos, KafkaTimeoutError()).outcome is Outcome.UNKNOWN
    assert answer_of(tpos, NodeNotReadyError).error_name == "NodeNotReadyError"  # failed with the class
    assert offsets_of({TopicPartition("t", 1): OffsetAndMetadata(9, "", -1)}) == (("t", 1, 9),)
    assert offsets_of({TopicPartition("t", 1): 9}) is None  # the library's assertion will refuse it


def test_without_the_environment_it_is_the_library_and_records_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = KafkaConsumer(group_id="g", **BASE)
    c.subscribe(["t"])
    assert c._chaos is None and c._subscription.rebalance_listener is None and c.poll(50) == {}
    c.close()
    assert list(tmp_path.iterdir()) == []


def test_a_bad_member_name_is_refused_before_the_client_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(tmp_path / "x.jsonl"))
    monkeypatch.setenv("KAFKA_CHAOS_MEMBER", "a/b")
    with pytest.raises(UsageError, match="KAFKA_CHAOS_MEMBER"):
        KafkaConsumer(group_id="g", **BASE)


def test_member_start_listener_commits_and_stop(events_file: Path):
    calls: list[tuple[str, list]] = []

    class AppListener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            calls.append(("revoked", sorted(revoked)))

        def on_partitions_assigned(self, assigned):
            calls.append(("assigned", sorted(assigned)))

    c = KafkaConsumer(group_id="g", session_timeout_ms=6000, partition_assignment_strategy=(StickyPartitionAssignor,),
                      **BASE)
    side = KafkaConsumer(group_id="side", **BASE)  # another group: the application's own business
    assert c._chaos is not None and side._chaos is None
    with pytest.raises(TypeError, match="ConsumerRebalanceListener"):
        c.subscribe(["t"], listener=object())
    c.subscribe(["t"], listener=AppListener())
    listener = c._subscription.rebalance_listener
    assert isinstance(listener, RecordingListener)
    # what kafka-python's coordinator calls around a join (no broker: the coordinator's generation is -1)
    listener.on_partitions_revoked(set())  # before the first join: not a revocation
    listener.on_partitions_assigned({TopicPartition("t", 1), TopicPartition("t", 0)})
    listener.on_partitions_revoked({TopicPartition("t", 0)})
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)}
    c.commit_async(offsets)  # no coordinator: never answered before close
    with pytest.raises(KafkaTimeoutError):
        c.commit(offsets, timeout_ms=200)
    c.close(timeout_ms=200)
    side.close()
    c.close()  # a second close records nothing more
    out = events(events_file)
    assert [e["kind"] for e in out] == ["member_start", "assigned", "revoked", "commit", "commit", "member_stop"]
    start, assigned, revoked, *commits, stop = out
    assert {k: start[k] for k in ("source", "group", "client", "assignor", "protocol", "commit_mode",
                                  "session_timeout_ms", "auto_commit_interval_ms")} == {
        "source": "consumer-0", "group": "g", "client": "kafka-python", "assignor": "sticky", "protocol": "eager",
        "commit_mode": "sync", "session_timeout_ms": 6000, "auto_commit_interval_ms": None}
    assert calls == [("revoked", []), ("assigned", [TopicPartition("t", 0), TopicPartition("t", 1)]),
                     ("revoked", [TopicPartition("t", 0)])]
    assert assigned["partitions"] == [["t", 0], ["t", 1]] and revoked["partitions"] == [["t", 0]]
    assert assigned["generation"] is None and assigned["incremental"] is False
    # the asynchronous one either failed its coordinator lookup (nothing sent) or was never answered
    by_error = {c["error_name"]: c for c in commits}
    assert by_error["KafkaTimeoutError"]["outcome"] == "unknown"
    assert all(c["offsets"] == [["t", 0, 5]] and c["auto"] is False for c in commits)
    assert (stop["kind"], stop["clean"]) == ("member_stop", True)


def test_topics_given_to_the_constructor_are_recorded_too(events_file: Path):
    c = KafkaConsumer("t", group_id="g", enable_auto_commit=True, **{k: v for k, v in BASE.items()
                                                                     if k != "enable_auto_commit"})
    assert isinstance(c._subscription.rebalance_listener, RecordingListener)
    c.close(timeout_ms=200)
    start = events(events_file)[0]
    assert (start["commit_mode"], start["auto_commit_interval_ms"]) == ("auto", 5000)
