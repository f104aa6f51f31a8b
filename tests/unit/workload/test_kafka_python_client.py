"""The kafka-python worker adapter against kafka-python 3.0.12's own coordinator, no broker.

The consumer is real (bootstrap 127.0.0.1:1 is never reached; ``api_version`` is given so it does not
bootstrap); a rebalance is driven through the coordinator's own join steps on its IO loop, as a
JoinGroup/SyncGroup answer would drive them. What is under test: the generation the adapter reads, that
the member's callbacks run off the IO loop (where a blocking commit is refused), the auto-commit
hook's view of the generation each attempt was sent with, and that a join runs to its end.
"""

from __future__ import annotations

import functools
import threading

import kafka
import kafka.coordinator.base
import pytest
from kafka import OffsetAndMetadata, TopicPartition
from kafka.coordinator.base import Generation
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.structs import MemberState

from chaos.model.workload import ConsumerSpec
from chaos.outcome import Outcome
from chaos.workload.clients import kafka_python
from chaos.workload.clients.kafka_python import KafkaPythonClient
from chaos.workload.consumer import CommitResult
from chaos.workload.spec import WorkerConfig


@pytest.fixture
def make_client(monkeypatch):
    # no broker: the consumer must not bootstrap, and a commit must give up quickly
    monkeypatch.setattr(kafka_python, "KafkaConsumer",
                        functools.partial(kafka.KafkaConsumer, api_version=(2, 8), request_timeout_ms=300,
                                          fetch_max_wait_ms=100))
    monkeypatch.setattr(kafka_python, "COMMIT_TIMEOUT_MS", 300)
    made: list[KafkaPythonClient] = []

    def make(**spec) -> KafkaPythonClient:
        cfg = WorkerConfig(role="consumer", name="consumer-0", run_id="r", run_dir="/nonexistent",
                           bootstrap="127.0.0.1:1", topic="t", group="g",
                           consumer=ConsumerSpec(client="kafka-python", **spec))
        made.append(KafkaPythonClient(cfg))
        return made[-1]

    yield make
    for c in made:
        c._consumer.close(autocommit=False, timeout_ms=200)


def joined(client: KafkaPythonClient, generation: int, member: str) -> None:
    """The coordinator's state after a JoinGroup answer and SyncGroup, where kafka-python keeps it."""
    coordinator = client._coordinator
    with coordinator._lock:
        coordinator._generation = Generation(generation, member, "range")
        coordinator.state = MemberState.STABLE


def rebalance(client: KafkaPythonClient, assigned: list[int], generation: int, member: str = "m-1") -> None:
    """One eager rebalance as ``join_group_async`` runs it on the IO loop: prepare (revocation), the new
    generation, completion (assignment)."""
    c = client._coordinator
    c._net.run(c._on_join_prepare_async, c._generation.generation_id, c._generation.member_id)
    joined(client, generation, member)
    data = ConsumerProtocolAssignment(assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
        topic="t", partitions=assigned)], user_data=None, version=0).encode()
    c._net.run(c._on_join_complete_async, generation, member, "range", data)


class Recorded:
    """The member's callbacks: what each saw, on which thread, and a synchronous commit on revocation (as
    :class:`chaos.workload.consumer.Member` makes)."""

    def __init__(self, client: KafkaPythonClient):
        self.client = client
        self.seen: list[tuple] = []

    def error(self, message, code, name, fatal):
        self.seen.append(("error", message))

    def assigned(self, partitions, incremental):
        self.seen.append(("assigned", partitions, self.client.group_view(), threading.current_thread().name))

    def revoked(self, partitions, incremental):
        result = self.client.commit_sync([("t", p, 5) for _, p in partitions])
        self.seen.append(("revoked", partitions, self.client.group_view(), result.outcome, result.error_name))

    def lost(self, partitions):
        self.seen.append(("lost", partitions, self.client.group_view()))

    def auto_committed(self, offsets, result: CommitResult):
        self.seen.append(("auto", offsets, self.client.group_view(), result.outcome, result.error_name))


def test_the_generation_is_read_from_the_coordinator_and_never_invented(make_client):
    client = make_client()
    assert client.group_view() == (None, None)  # never joined
    joined(client, 7, "m-1")
    assert client.group_view() == (7, "m-1")
    # the very generation kafka-python stamps on an OffsetCommit sent now
    stamped = client._coordinator.generation_if_stable()
    assert (stamped.generation_id, stamped.member_id) == client.group_view()
    client._coordinator.reset_generation()  # out of the group: -1 and ''
    assert client.group_view() == (None, None)


def test_callbacks_run_off_the_io_loop_so_a_revocation_can_commit(make_client):
    client = make_client()
    member = Recorded(client)
    client.subscribe(["t"], member)
    rebalance(client, [0, 1], generation=3)
    rebalance(client, [1], generation=4)
    client._coordinator.reset_generation()  # fenced: the next rejoin loses what it held
    rebalance(client, [0], generation=6, member="m-2")
    assigned, revoked, reassigned, lost, last = member.seen
    io_thread = client._consumer._net._io_thread.name
    assert assigned[:3] == ("assigned", [("t", 0), ("t", 1)], (3, "m-1")) and assigned[3] != io_thread
    # the commit on revocation ran (no broker: it timed out, unknown) instead of being refused on the IO thread
    assert revoked == ("revoked", [("t", 0), ("t", 1)], (3, "m-1"), Outcome.UNKNOWN, "KafkaTimeoutError")
    assert reassigned[:3] == ("assigned", [("t", 1)], (4, "m-1"))
    assert lost == ("lost", [("t", 1)], (None, None))
    assert last[:3] == ("assigned", [("t", 0)], (6, "m-2"))


def test_auto_commit_attempts_report_the_generation_they_were_sent_with(make_client):
    client = make_client(commit_mode="auto")
    member = Recorded(client)
    client.subscribe(["t"], member)
    joined(client, 7, "m-1")
    coordinator = client._coordinator
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(9, "", -1)}
    # one attempt, on the IO loop where kafka-python runs it (no coordinator known: it fails before sending,
    # a definite failure)
    with pytest.raises(kafka.errors.CoordinatorNotAvailableError):
        coordinator._net.run(coordinator._send_offset_commit_request, offsets)
    coordinator.state = MemberState.REBALANCING  # between JoinGroup and SyncGroup: no generation to send
    with pytest.raises(kafka.errors.CoordinatorNotAvailableError):
        coordinator._net.run(coordinator._send_offset_commit_request, offsets)
    assert member.seen == [
        ("auto", [("t", 0, 9)], (7, "m-1"), Outcome.FAIL, "CoordinatorNotAvailableError"),
        ("auto", [("t", 0, 9)], (None, None), Outcome.FAIL, "CoordinatorNotAvailableError")]
    assert client.group_view() == (7, "m-1")  # the pin lasts the callback only


def test_a_join_poll_starts_is_waited_for_to_its_end_not_to_the_polls_timeout(make_client, monkeypatch):
    # kafka-python 3.0.12 drops a join a poll gave up on (chaos.workload.clients.kafka_python, "Joins")
    asked: list[int | None] = []
    monkeypatch.setattr(kafka.coordinator.base.BaseCoordinator, "ensure_active_group",
                        lambda self, timeout_ms=None: asked.append(timeout_ms) or True)
    client = make_client(max_poll_interval_ms=20_000, session_timeout_ms=6000)
    coordinator = client._coordinator
    coordinator.ensure_active_group(timeout_ms=200)  # what poll(timeout_ms=200) asks while a rebalance is due
    coordinator.ensure_active_group(timeout_ms=60_000)
    coordinator.ensure_active_group()
    assert asked == [26_000, 60_000, None]


@pytest.mark.parametrize("spec", [{"assignor": "cooperative-sticky"}, {"instance_id": "i-1"}])
def test_what_the_worker_does_not_wire_is_refused_at_load_time(make_client, spec):
    # kafka-python 3 has both (KIP-429, KIP-345); the worker does not drive them yet
    with pytest.raises(ValueError, match="the kafka-python worker has no .* wired yet"):
        make_client(**spec)
