"""The kafka-python 2.x worker adapter against a 2.x release's own coordinator, no broker.

Not collected by the suite (the project's environment has kafka-python 3): ``test_kafka_python2_adapter.py`` runs
this file with pytest in a subprocess whose ``PYTHONPATH`` starts with a prepared 2.x release
(``KAFKA_PYTHON_RELEASE`` names it), as a worker with ``client_version`` runs.

The consumer is real (bootstrap 127.0.0.1:1 is never reached; ``api_version`` is given so it does not probe the
broker); a rebalance is driven through the coordinator's own join steps (``_on_join_prepare``, the JoinGroup
answer's generation, ``_on_join_complete``) as ``join_group`` runs them inside ``poll``. What is under test: the
generation the adapter reads, revocations of a member out of the group reported as lost, the auto-commit hook's
view of the generation each attempt was sent with, close, and what each release lacks.
"""

from __future__ import annotations

import functools
import inspect
import os

import kafka
import pytest
from kafka import OffsetAndMetadata, TopicPartition
from kafka.coordinator import protocol
from kafka.coordinator.base import Generation, MemberState

from chaos.model.workload import ConsumerSpec
from chaos.outcome import Outcome
from chaos.workload.clients import kafka_python2
from chaos.workload.clients.kafka_python2 import KafkaPython2Client, sent_view
from chaos.workload.clients.kafka_python_common import _offsets, commit_error
from chaos.workload.consumer import CommitResult, make_client
from chaos.workload.spec import WorkerConfig

#: whether the release's synchronous commit can be bounded (2.0.0's retries without end when no broker answers)
BOUNDED_COMMIT = "timeout_ms" in inspect.signature(kafka.KafkaConsumer.commit).parameters


def config(**spec) -> WorkerConfig:
    return WorkerConfig(role="consumer", name="consumer-0", run_id="r", run_dir="/nonexistent",
                        bootstrap="127.0.0.1:1", topic="t", group="g",
                        consumer=ConsumerSpec(client="kafka-python", client_version=kafka.__version__, **spec))


@pytest.fixture
def make(monkeypatch):
    # no broker: the consumer must not probe one, and a commit must give up quickly
    monkeypatch.setattr(kafka_python2, "KafkaConsumer", functools.partial(kafka.KafkaConsumer, api_version=(2, 5)))
    monkeypatch.setattr(kafka_python2, "COMMIT_TIMEOUT_MS", 300)
    made: list[KafkaPython2Client] = []

    def make(**spec) -> KafkaPython2Client:
        made.append(KafkaPython2Client(config(**spec)))
        return made[-1]

    yield make
    for c in made:
        c._consumer.close(autocommit=False)


def joined(client: KafkaPython2Client, generation: int, member: str) -> None:
    """The coordinator's state after a JoinGroup answer and SyncGroup, where kafka-python 2.x keeps it."""
    coordinator = client._coordinator
    with coordinator._lock:
        coordinator._generation = Generation(generation, member, "range")
        coordinator.state = MemberState.STABLE


def assignment(partitions: list[int]) -> bytes:
    """A SyncGroup answer's member assignment of topic t (ConsumerProtocol is a list of versions from 2.3)."""
    proto = protocol.ConsumerProtocol
    schema = (proto[0] if isinstance(proto, list) else proto).ASSIGNMENT
    struct = schema(0, [("t", partitions)], b"")  # kept: its encode is bound through a weak reference
    return struct.encode()


def rebalance(client: KafkaPython2Client, assigned: list[int], generation: int, member: str = "m-1") -> None:
    """One eager rebalance as ``join_group`` runs it: prepare (revocation), the new generation, completion."""
    c = client._coordinator
    c._on_join_prepare(c._generation.generation_id, c._generation.member_id)
    joined(client, generation, member)
    c._on_join_complete(generation, member, "range", assignment(assigned))


class Recorded:
    """The member's callbacks: what each saw, and a synchronous commit on revocation (as
    :class:`chaos.workload.consumer.Member` makes) where the release can bound it."""

    def __init__(self, client: KafkaPython2Client):
        self.client = client
        self.seen: list[tuple] = []

    def error(self, message, code, name, fatal):
        self.seen.append(("error", message))

    def assigned(self, partitions, incremental):
        self.seen.append(("assigned", partitions, self.client.group_view()))

    def revoked(self, partitions, incremental):
        view = self.client.group_view()
        if BOUNDED_COMMIT:
            result = self.client.commit_sync([("t", p, 5) for _, p in partitions])
            self.seen.append(("revoked", partitions, view, result.outcome, result.error_name))
        else:
            self.seen.append(("revoked", partitions, view))

    def lost(self, partitions):
        self.seen.append(("lost", partitions, self.client.group_view()))

    def auto_committed(self, offsets, result: CommitResult):
        self.seen.append(("auto", offsets, self.client.group_view(), result.outcome, result.error_name))


def stable_generation(client: KafkaPython2Client):
    """What the library stamps on an OffsetCommit now: ``generation()`` (2.0.x) / ``generation_if_stable()``."""
    c = client._coordinator
    return c.generation_if_stable() if hasattr(c, "generation_if_stable") else c.generation()


def test_the_release_under_test_is_imported_and_gets_the_2x_adapter(monkeypatch):
    assert kafka.__version__ == os.environ["KAFKA_PYTHON_RELEASE"]
    assert kafka.__file__.startswith(os.environ["KAFKA_PYTHON_SITE"])
    monkeypatch.setattr(kafka_python2, "KafkaConsumer", functools.partial(kafka.KafkaConsumer, api_version=(2, 5)))
    client = make_client(config())
    try:
        assert type(client) is KafkaPython2Client and client.version == kafka.__version__
    finally:
        client._consumer.close(autocommit=False)


def test_the_generation_is_read_from_the_coordinator_and_never_invented(make):
    client = make()
    assert client.group_view() == (None, None)  # never joined
    joined(client, 7, "m-1")
    assert client.group_view() == (7, "m-1")
    stamped = stable_generation(client)  # the very generation kafka-python stamps on an OffsetCommit sent now
    assert (stamped.generation_id, stamped.member_id) == client.group_view()
    client._coordinator.state = MemberState.REBALANCING  # a rejoin under way: the library's accessor goes blind
    assert stable_generation(client) is None and client.group_view() == (7, "m-1")
    client._coordinator.reset_generation()  # out of the group: -1
    assert client.group_view() == (None, None) and not client.in_group()


def test_rebalances_record_the_coordinators_generations_and_a_fenced_member_loses(make):
    client = make()
    member = Recorded(client)
    client.subscribe(["t"], member)
    rebalance(client, [0, 1], generation=3)
    rebalance(client, [1], generation=4)
    client._coordinator.reset_generation()  # fenced: the next rejoin's revocation is a loss
    rebalance(client, [0], generation=6, member="m-2")
    assigned, revoked, reassigned, lost, last = member.seen
    assert assigned == ("assigned", [("t", 0), ("t", 1)], (3, "m-1"))
    # revoked in the generation it belongs to; the commit in it ran (no broker: it timed out, unknown)
    assert revoked[:3] == ("revoked", [("t", 0), ("t", 1)], (3, "m-1"))
    if BOUNDED_COMMIT:
        assert revoked[3:] == (Outcome.UNKNOWN, "KafkaTimeoutError")
    assert reassigned == ("assigned", [("t", 1)], (4, "m-1"))
    assert lost == ("lost", [("t", 1)], (None, None))
    assert last == ("assigned", [("t", 0)], (6, "m-2"))


def test_auto_commit_attempts_report_the_generation_they_were_sent_with(make):
    client = make(commit_mode="auto")
    member = Recorded(client)
    client.subscribe(["t"], member)
    joined(client, 7, "m-1")
    coordinator = client._coordinator
    offsets = {TopicPartition("t", 0): _offsets([("t", 0, 9)])[TopicPartition("t", 0)]}
    # one attempt (no coordinator known: it fails before sending, a definite failure)
    assert coordinator._send_offset_commit_request(offsets).failed()
    coordinator.state = MemberState.REBALANCING  # between JoinGroup and SyncGroup: no generation to send
    assert coordinator._send_offset_commit_request(offsets).failed()
    coordinator.state = MemberState.STABLE
    # the heartbeat thread resets the generation while the attempt is built: what it carried is not known
    coordinator.coordinator = lambda: coordinator.reset_generation()
    assert coordinator._send_offset_commit_request(offsets).failed()
    first, second, third = member.seen
    for seen, view in ((first, (7, "m-1")), (second, (None, None)), (third, (None, None))):
        assert seen[:3] == ("auto", [("t", 0, 9)], view) and seen[3] is Outcome.FAIL, seen
        assert seen[4].endswith("CoordinatorNotAvailableError"), seen
    del coordinator.coordinator
    joined(client, 8, "m-1")
    assert client.group_view() == (8, "m-1")  # the pin lasts the callback only


def test_the_sent_view_is_the_one_read_on_both_sides_or_none():
    assert sent_view((7, "m-1"), (7, "m-1")) == (7, "m-1")
    assert sent_view((7, "m-1"), (None, None)) == (None, None)
    assert sent_view((7, "m-1"), (None, "m-1")) == (None, "m-1")
    assert sent_view((None, None), (None, None)) == (None, None)


@pytest.mark.parametrize("fenced", [False, True], ids=["in-group", "fenced"])
def test_close_reports_the_revocation_before_it_leaves(make, fenced):
    client = make()
    member = Recorded(client)
    client.subscribe(["t"], member)
    rebalance(client, [0, 1], generation=3)
    if fenced:
        client._coordinator.reset_generation()
    client.close()
    assert member.seen[0] == ("assigned", [("t", 0), ("t", 1)], (3, "m-1"))
    if fenced:
        assert member.seen[1:] == [("lost", [("t", 0), ("t", 1)], (None, None))]
    else:
        assert member.seen[1][:3] == ("revoked", [("t", 0), ("t", 1)], (3, "m-1")) and len(member.seen) == 2
    assert client._consumer._closed


def test_commit_failures_are_classified_by_the_coordinators_answer():
    errors = kafka.errors
    answer = errors.IllegalGenerationError()
    wrapped = errors.CommitFailedError(answer)
    if wrapped.args[0] is answer:  # 2.2+: the coordinator's answer inside (_handle_offset_commit_response)
        fenced = commit_error(wrapped)
        assert (fenced.outcome, fenced.error_code, fenced.error_name) == (Outcome.FAIL, 22, "IllegalGenerationError")
    # 2.0.0 fails a fenced commit with a bare CommitFailedError(): a failure, its cause not told
    bare = commit_error(errors.CommitFailedError())
    assert (bare.outcome, bare.error_name) == (Outcome.FAIL, "CommitFailedError")
    assert commit_error(errors.KafkaTimeoutError()).outcome is Outcome.UNKNOWN
    assert commit_error(errors.RebalanceInProgressError).error_code == 27  # passed as a class


def test_the_offsets_sent_are_the_releases_own_shape():
    [(tp, om)] = _offsets([("t", 2, 40)]).items()
    assert tp == TopicPartition("t", 2) and isinstance(om, OffsetAndMetadata) and om.offset == 40
    assert getattr(om, "leader_epoch", -1) == -1  # unknown where the release has the field (not 2.0.0)


def test_what_the_release_lacks_is_refused_in_one_line(make):
    with pytest.raises(ValueError, match="needs request_timeout_ms above session_timeout_ms"):
        make(request_timeout_ms=6000, session_timeout_ms=6000)
    try:
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor  # noqa: F401
    except ImportError:  # 2.0.0
        with pytest.raises(ValueError, match=f"kafka-python {kafka.__version__} has no sticky assignor"):
            make(assignor="sticky")
    else:
        assert make(assignor="sticky")._coordinator.config["assignors"][0].name == "sticky"
