"""chaos.instrument for kafka-python: the hook, the generation it reads, the listener it wraps and the
commits it records — real ``kafka`` objects (kafka-python 3.0.12), no broker (bootstrap 127.0.0.1:1 is
never reached; ``api_version`` given so the client does not bootstrap). Rebalances are driven through
the coordinator's own join steps on its IO loop, as a JoinGroup/SyncGroup answer would drive them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import kafka
import kafka.consumer
import orjson
import pytest
from kafka import AsyncConsumerRebalanceListener, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.base import Generation
from kafka.errors import CommitFailedError, IllegalGenerationError, KafkaError, KafkaTimeoutError, NodeNotReadyError
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.structs import MemberState

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


def joined(consumer, generation: int, member: str, protocol: str = "sticky") -> None:
    """The coordinator's state after a JoinGroup answer and SyncGroup, set where kafka-python keeps it
    (``BaseCoordinator._handle_join_group_response`` / ``join_group_async``)."""
    coordinator = consumer._coordinator
    with coordinator._lock:
        coordinator._generation = Generation(generation, member, protocol)
        coordinator.state = MemberState.STABLE


def assignment(*tps: tuple[str, int]) -> bytes:
    """SyncGroup's assignment bytes for ``tps``, as the group leader encodes them."""
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    return ConsumerProtocolAssignment(assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
        topic=t, partitions=ps) for t, ps in topics.items()], user_data=None, version=0).encode()


def rebalance(consumer, assigned: list[tuple[str, int]], generation: int = 7, member: str = "m-1",
              protocol: str = "sticky") -> None:
    """One rebalance as kafka-python's ``join_group_async`` runs it, on its IO loop: the join's prepare step
    (revocation, or loss when the generation was reset), the new generation, then the join's completion
    (assignment) — the listener called by the coordinator itself."""
    c = consumer._coordinator
    old = c._generation
    c._net.run(c._on_join_prepare_async, old.generation_id, old.member_id)
    joined(consumer, generation, member, protocol)
    c._net.run(c._on_join_complete_async, generation, member, protocol, assignment(*assigned))


def test_generation_is_read_where_kafka_python_keeps_it_and_never_invented():
    c = KafkaConsumer(group_id="g", **BASE)  # no events file: the library's class, the library's coordinator
    try:
        coordinator = c._coordinator
        assert generation_view(coordinator) == (None, None)  # never joined
        joined(c, 7, "m-1")
        assert generation_view(coordinator) == (7, "m-1")
        # ... the generation an OffsetCommit sent now carries (ConsumerCoordinator._send_offset_commit_request)
        stamped = coordinator.generation_if_stable()
        assert (stamped.generation_id, stamped.member_id) == generation_view(coordinator)
        coordinator.reset_generation(member_id="m-1")  # fenced, keeping its id (MemberIdRequired path)
        assert generation_view(coordinator) == (None, "m-1")
        coordinator.reset_generation()  # fell out of the group: -1 and '' mean the client cannot tell
        assert generation_view(coordinator) == (None, None)
        assert generation_view(SimpleNamespace()) == (None, None)  # nowhere to read it: not guessed
    finally:
        c.close(timeout_ms=200)


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
    assert isinstance(c._subscription.rebalance_listener, RecordingListener)
    rebalance(c, [("t", 1), ("t", 0)], generation=7)  # the first join: an empty revocation first, not recorded
    rebalance(c, [("t", 1)], generation=8)
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)}
    c.commit_async(offsets)  # no coordinator: never answered before close
    with pytest.raises(KafkaTimeoutError):
        c.commit(offsets, timeout_ms=200)
    c.close(timeout_ms=200)
    side.close()
    c.close()  # a second close records nothing more
    out = events(events_file)
    # the synchronous commit where it ran; the asynchronous one when its coordinator lookup failed, or, never
    # answered, once close returned
    commits = [e for e in out if e["kind"] == "commit"]
    assert len(commits) == 2 and out.index(commits[0]) == 4
    assert [e["kind"] for e in out if e["kind"] != "commit"] == ["member_start", "assigned", "revoked", "assigned",
                                                                 "revoked", "member_stop"]
    start, assigned, revoked, reassigned, closing, stop = [e for e in out if e["kind"] != "commit"]
    assert {k: start[k] for k in ("source", "group", "client", "assignor", "protocol", "commit_mode",
                                  "session_timeout_ms", "auto_commit_interval_ms", "instance_id")} == {
        "source": "consumer-0", "group": "g", "client": "kafka-python", "assignor": "sticky", "protocol": "eager",
        "commit_mode": "sync", "session_timeout_ms": 6000, "auto_commit_interval_ms": None, "instance_id": None}
    T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
    # kafka-python 3's close revokes through the listener too (as Java's onLeavePrepare)
    assert calls == [("revoked", []), ("assigned", [T0, T1]), ("revoked", [T0, T1]), ("assigned", [T1]),
                     ("revoked", [T1])]
    # each stamped with the generation the coordinator held when it called the listener
    assert [(e["partitions"], e["generation"], e["member_id"], e["incremental"]) for e in
            (assigned, revoked, reassigned, closing)] == [
        ([["t", 0], ["t", 1]], 7, "m-1", False), ([["t", 0], ["t", 1]], 7, "m-1", False),
        ([["t", 1]], 8, "m-1", False), ([["t", 1]], 8, "m-1", False)]
    # the asynchronous one either failed its coordinator lookup (nothing sent) or was never answered
    by_error = {c["error_name"]: c for c in commits}
    assert by_error["KafkaTimeoutError"]["outcome"] == "unknown"
    assert all(c["offsets"] == [["t", 0, 5]] and c["auto"] is False and c["generation"] == 8 for c in commits)
    assert (stop["kind"], stop["clean"]) == ("member_stop", True)


def test_the_auto_commit_before_a_rebalance_is_recorded_with_the_generation_it_was_sent_in(events_file: Path):
    # kafka-python 3 runs it inside the join (ConsumerCoordinator._on_join_prepare_async), not through
    # commit_offsets_sync; no broker: it times out (request_timeout_ms) and the join goes on
    c = KafkaConsumer(group_id="g", partition_assignment_strategy=(StickyPartitionAssignor,), request_timeout_ms=300,
                      fetch_max_wait_ms=100, **{**BASE, "enable_auto_commit": True})
    c.subscribe(["t"])
    rebalance(c, [("t", 0)], generation=7)
    c._subscription.seek(TopicPartition("t", 0), 42)  # the application consumed up to 41
    rebalance(c, [("t", 0)], generation=8)
    c.close(autocommit=False, timeout_ms=200)
    out = [e for e in events(events_file) if e["kind"] in ("commit", "revoked", "assigned")]
    assert [(e["kind"], e["generation"]) for e in out] == [("assigned", 7), ("commit", 7), ("revoked", 7),
                                                            ("assigned", 8), ("revoked", 8)]
    commit = out[1]
    assert (commit["offsets"], commit["auto"], commit["outcome"], commit["error_name"]) == (
        [["t", 0, 42]], True, "unknown", "KafkaTimeoutError")


def test_a_member_out_of_the_group_records_its_partitions_lost_and_the_application_hears_of_it(events_file: Path):
    calls: list[tuple[str, list]] = []

    class AppListener(AsyncConsumerRebalanceListener):  # an asynchronous one: awaited, as the library would
        async def on_partitions_revoked(self, revoked):
            calls.append(("revoked", sorted(revoked)))

        async def on_partitions_assigned(self, assigned):
            calls.append(("assigned", sorted(assigned)))

        async def on_partitions_lost(self, lost):
            calls.append(("lost", sorted(lost)))

    c = KafkaConsumer(group_id="g", partition_assignment_strategy=(StickyPartitionAssignor,), **BASE)
    c.subscribe(["t"], listener=AppListener())
    rebalance(c, [("t", 0)], generation=3)
    c._coordinator.reset_generation()  # a heartbeat answered UNKNOWN_MEMBER_ID: out of the group
    rebalance(c, [("t", 0)], generation=5, member="m-2")  # the rejoin: lost, not revoked
    c.close(timeout_ms=200)
    kinds = [(e["kind"], e.get("partitions"), e.get("generation")) for e in events(events_file)]
    assert kinds[1:-1] == [("assigned", [["t", 0]], 3), ("lost", [["t", 0]], None), ("assigned", [["t", 0]], 5),
                           ("revoked", [["t", 0]], 5)]
    T0 = TopicPartition("t", 0)
    assert calls == [("revoked", []), ("assigned", [T0]), ("lost", [T0]), ("assigned", [T0]), ("revoked", [T0])]


def test_a_raising_application_listener_still_has_its_revocation_recorded(events_file: Path):
    failures = ["flush failed"]

    class AppListener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            if revoked and failures:
                raise ValueError(failures.pop())

        def on_partitions_assigned(self, assigned):
            pass

    c = KafkaConsumer(group_id="g", partition_assignment_strategy=(StickyPartitionAssignor,), **BASE)
    c.subscribe(["t"], listener=AppListener())
    rebalance(c, [("t", 0)], generation=3)
    with pytest.raises(KafkaError, match="rebalance callback"):  # the library raises it again (from poll)
        rebalance(c, [("t", 0)], generation=4)
    c.close(timeout_ms=200)
    assert [e["kind"] for e in events(events_file)][1:3] == ["assigned", "revoked"]


def test_a_cooperative_application_is_recorded_as_such(events_file: Path):
    c = KafkaConsumer(group_id="g", partition_assignment_strategy=(CooperativeStickyAssignor,), **BASE)
    c.subscribe(["t"])
    rebalance(c, [("t", 0), ("t", 1)], generation=1, protocol="cooperative-sticky")
    rebalance(c, [("t", 1)], generation=2, protocol="cooperative-sticky")  # t-0 moves away: only it is revoked
    c.close(timeout_ms=200)
    start, *changes, _ = events(events_file)
    assert (start["assignor"], start["protocol"]) == ("cooperative-sticky", "cooperative")
    assert [(e["kind"], e["partitions"], e["incremental"]) for e in changes] == [
        ("assigned", [["t", 0], ["t", 1]], True), ("revoked", [["t", 0]], True), ("revoked", [["t", 1]], True)]


def test_topics_given_to_the_constructor_are_recorded_too(events_file: Path):
    c = KafkaConsumer("t", group_id="g", enable_auto_commit=True, **{k: v for k, v in BASE.items()
                                                                     if k != "enable_auto_commit"})
    assert isinstance(c._subscription.rebalance_listener, RecordingListener)
    c.close(timeout_ms=200)
    start = events(events_file)[0]
    assert (start["commit_mode"], start["auto_commit_interval_ms"]) == ("auto", 5000)
