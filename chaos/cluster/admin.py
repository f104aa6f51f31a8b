"""Role lookups (controller, partition leader, group coordinator) over Kafka's admin API.

Roles are always *asked*, never computed: the coordinator of a group is the
leader of ``__consumer_offsets`` partition ``abs(hash(G)) % N`` only while
leadership is stable, and FindCoordinator gives the broker's current answer.
The admin client connects through the control lane's proxies like any other
client.

Why kafka-python and not confluent-kafka's AdminClient here: librdkafka's admin
code aborts the whole process (a C ``assert``) when a connection drops under a
request — ``rd_kafka_enq_once_del_source_return`` for coordinator requests
(confluentinc/librdkafka#4605, fix pending in PR #5397) and
``rd_kafka_admin_response_parse: rko_result`` for metadata requests, both seen
here while brokers start and die. A chaos tool provokes exactly that, and an
abort would take the driver and its cleanup with it; kafka-python is pure
Python and fails with exceptions instead.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.errors
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    Cancelled,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    TopicAlreadyExistsError,
    UnknownBrokerIdError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from chaos.errors import InfrastructureError, UsageError

# kafka-python 3 logs every refused connect of its IO thread at ERROR and adds no handler of its own, so in a
# process that configured no logging (the `chaos` command, a pytest session after its capture ended) Python's
# last-resort handler printed them to stderr: a wall of lines each time a fault killed a broker. The admin's
# failures reach this module as exceptions; the records still reach any handler the user configured.
logging.getLogger("kafka").addHandler(logging.NullHandler())

T = TypeVar("T")


#: Kafka error codes that describe a state on its way to settling, not a failure (Kafka's
#: ``org.apache.kafka.common.protocol.Errors``): a topic just created is not in every broker's
#: metadata cache at once, a partition between leaders has none, a coordinator is loading its
#: ``__consumer_offsets`` partition or has just moved.
TRANSIENT_CODES = {3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
                   14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR"}

#: how long a public role or metadata query waits through transient answers before it fails
SETTLE_S = 20.0


class MetadataPending(Exception):
    """The answer is not there *yet* (not an infrastructure failure): ask again."""


def _is_transient(exc: Exception) -> bool:
    """Transient unless Kafka answered a definite (non-retriable) error.

    kafka-python surfaces connections dropping under a request as assorted exceptions, not only
    retriable ``KafkaError`` subclasses; only an error the broker itself marks non-retriable (e.g.
    INVALID_REPLICATION_FACTOR) is definite.
    """
    return not isinstance(exc, KafkaError) or bool(exc.retriable)


def _describe(exc: Exception) -> str:
    code = getattr(exc, "errno", None)
    name = TRANSIENT_CODES.get(code) if isinstance(code, int) else None
    return f"{type(exc).__name__}{f' ({name})' if name else ''}: {exc}"[:300]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """One member as DescribeGroups lists it. ``assignment`` and ``subscription`` are decoded from the
    consumer protocol's bytes (the coordinator's copy of the leader's SyncGroup assignment and of the
    member's JoinGroup subscription); empty while the member has none, or when they are not the consumer
    protocol's."""

    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]
    subscription: tuple[str, ...]
    #: the member's group.instance.id (KIP-345; DescribeGroups v4+), None for a dynamic member
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A DescribeGroups answer for one classic group: ``state`` as Kafka names it (``Stable``,
    ``PreparingRebalance``, ``CompletingRebalance``, ``Empty``, ``Dead`` for a group the coordinator does not
    hold), ``protocol`` the assignor the generation chose (empty while there is none)."""

    group: str
    state: str
    protocol: str
    members: tuple[DescribedMember, ...]


def _decoded(decode: Callable[[bytes], Any], data: Any) -> Any:
    """A member's consumer-protocol bytes decoded, or None (empty, or another protocol's bytes)."""
    if not data:
        return None
    try:
        return decode(bytes(data))
    except (struct.error, ValueError, IndexError, KafkaError):
        return None


def group_description(described: Any) -> GroupDescription:
    """A ``DescribeGroupsResponse`` group as a :class:`GroupDescription`; its error (e.g.
    COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) raised as kafka-python's exception for the code."""
    if described.error_code:
        raise kafka.errors.for_code(described.error_code)(described.error_message or described.group_id)
    members = []
    for m in described.members:
        assignment = _decoded(ConsumerProtocolAssignment.decode, m.member_assignment)
        subscription = _decoded(ConsumerProtocolSubscription.decode, m.member_metadata)
        members.append(DescribedMember(
            member_id=m.member_id, client_id=m.client_id, host=m.client_host,
            assignment=tuple(sorted((t.topic, p) for t in (assignment.assigned_partitions if assignment else ())
                                    for p in t.partitions)),
            subscription=tuple(sorted(subscription.topics or ())) if subscription else (),
            instance_id=getattr(m, "group_instance_id", None)))
    return GroupDescription(described.group_id, described.group_state, described.protocol_data or "",
                            tuple(sorted(members, key=lambda m: m.member_id)))


class ClusterAdmin:
    """Admin operations against one cluster; each request is bounded by ``timeout``.

    Thread-safe (one lock): the observer and the nemesis may share it.
    """

    def __init__(self, bootstrap: str | Callable[[], str], timeout: float = 5.0):
        """``bootstrap`` may be a callable, asked when the first request is sent (a cluster not started yet)."""
        self.timeout = timeout
        self._bootstrap = bootstrap
        self._client: KafkaAdminClient | None = None
        self._lock = threading.Lock()

    def _call(self, fn: Callable[[KafkaAdminClient], T], attempts: int = 3) -> T:
        """Run ``fn`` on a (fresh if needed) client; connection-level failures are retried, bounded."""
        for attempt in range(attempts):
            try:
                return self._call_once(fn)
            # Cancelled: the connection a request was in flight on closed (its broker was just killed);
            # KafkaTimeoutError also when no bootstrap server answered (kafka-python 3: "Unable to bootstrap")
            except (KafkaConnectionError, NodeNotReadyError, KafkaTimeoutError, Cancelled):
                if attempt == attempts - 1:
                    raise
                time.sleep(0.3 * (attempt + 1))
        raise AssertionError("unreachable")

    def _call_once(self, fn: Callable[[KafkaAdminClient], T]) -> T:
        with self._lock:
            try:
                if self._client is None:
                    self._client = self._open()
                return fn(self._client)
            except Exception:
                # a failed request can leave the client pinned to a dead node;
                # a fresh one re-bootstraps through the proxies
                self._close_client()
                raise

    def _open(self) -> KafkaAdminClient:
        """A client bootstrapped through the proxies within ``timeout``.

        kafka-python 3 starts the client's IO thread before it bootstraps and leaves it running when
        bootstrapping fails (the constructor raises, no client to close): it is stopped here. Request
        versions are negotiated per connection (ApiVersions), so no ``api_version`` is fixed."""
        ms = int(self.timeout * 1000)
        client = KafkaAdminClient.__new__(KafkaAdminClient)
        try:
            client.__init__(bootstrap_servers=self._servers(), client_id="chaos-admin", request_timeout_ms=ms,
                            bootstrap_timeout_ms=ms, reconnect_backoff_max_ms=500, metadata_max_age_ms=1000)
        except BaseException:
            for stop in (lambda: client._client.close(), lambda: client._net.stop(timeout_ms=ms)):
                try:
                    stop()
                except Exception:  # noqa: BLE001 - a half-built client: stop what was started
                    pass
            raise
        return client

    @staticmethod
    def _send(c: KafkaAdminClient, request: Any, node_id: int | None = None) -> Any:
        """``request``'s response from broker ``node_id`` (any broker when None), run on the client's IO
        thread; an error the request itself failed with (connection lost, timeout) is raised. A broker
        this client's metadata does not list yet (just restarted, just named coordinator) is
        ``NodeNotReadyError``, retried with a fresh client, not kafka-python's definite
        ``UnknownBrokerIdError``."""
        try:
            return c._manager.run(c._manager.send, request, node_id)
        except UnknownBrokerIdError:
            raise NodeNotReadyError(node_id) from None

    def _servers(self) -> list[str]:
        return (self._bootstrap() if callable(self._bootstrap) else self._bootstrap).split(",")

    def _close_client(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a broken client
                pass
            self._client = None

    def close(self) -> None:
        with self._lock:
            self._close_client()

    def settled(self, ask: Callable[[], T | None], what: str, wait_s: float | None = None) -> T:
        """Ask until the answer is definite, bounded by ``wait_s`` (default :data:`SETTLE_S`).

        ``ask`` returns None, raises :class:`MetadataPending` or a retriable Kafka error while the
        cluster is in a transient state; those are asked again. A definite failure (a non-retriable
        error, :class:`InfrastructureError`) is raised at once. When time runs out, one
        :class:`InfrastructureError` line says what was waited for and what was seen last.
        """
        deadline = time.monotonic() + (SETTLE_S if wait_s is None else wait_s)
        last = "no answer"
        while True:
            try:
                value = ask()
                if value is not None:
                    return value
                last = "no answer yet"
            except InfrastructureError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted below: transient or definite
                if not _is_transient(exc):
                    raise InfrastructureError(f"{what}: {_describe(exc)}") from None
                last = _describe(exc)
            if time.monotonic() >= deadline:
                raise InfrastructureError(f"waited {SETTLE_S if wait_s is None else wait_s:.0f} s for {what}; "
                                          f"last saw {last}")
            time.sleep(0.2)

    def _metadata(self, topics: list[str], node_id: int | None = None, attempts: int = 3) -> Any:
        """A ``MetadataResponse`` for ``topics`` ([]: brokers and controller only), from ``node_id`` if given."""
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)
        return self._call(lambda c: self._send(c, request, node_id), attempts)

    def controller_id(self, wait: bool = True) -> int | None:
        """The broker id the cluster names as controller.

        With ``wait`` (default) an election in progress (no controller yet) is waited through,
        bounded; without, None means "none right now".
        """
        def ask() -> int | None:
            cid = self._metadata([]).controller_id
            return None if cid is None or cid < 0 else cid

        return self.settled(ask, "the cluster to name a controller") if wait else ask()

    def broker_ids(self) -> list[int]:
        """Brokers registered now (the metadata cache follows ZooKeeper's /brokers/ids)."""
        return sorted(b.node_id for b in self._metadata([]).brokers)

    def brokers_seen_by(self, broker_id: int) -> list[int]:
        """The live brokers in ``broker_id``'s own metadata cache.

        In ZooKeeper mode each broker learns who is alive only from the
        controller's UpdateMetadata requests, and CreateTopics is judged on the
        controller's cache ("Replication factor: 3 larger than available
        brokers: 2"). Asking one broker tells nothing about another's view, so
        a cluster is whole only when every broker sees every broker.
        """
        # the version is negotiated with that broker (ApiVersions): Kafka 4.0 removed Metadata v0-v3 (KIP-896)
        return sorted(b.node_id for b in self._metadata([], broker_id).brokers)

    def cluster(self, attempts: int = 3) -> tuple[int | None, list[int]]:
        """(controller id or None, registered broker ids); ``attempts`` bounds the connection-level retries
        (each up to the client's bootstrap timeout)."""
        md = self._metadata([], attempts=attempts)
        cid = md.controller_id
        return (None if cid is None or cid < 0 else cid), sorted(b.node_id for b in md.brokers)

    def _partitions_once(self, topic: str) -> list[dict[str, Any]]:
        md = self._metadata([topic])
        for t in md.topics:
            if t.name == topic:
                code = t.error_code
                if code in TRANSIENT_CODES:
                    raise MetadataPending(f"topic {topic}: {TRANSIENT_CODES[code]} ({code})")
                if code != 0:
                    raise InfrastructureError(f"metadata for topic {topic}: error code {code}")
                return sorted(({"partition": p.partition_index, "leader": p.leader_id, "replicas": list(p.replica_nodes),
                                "isr": list(p.isr_nodes), "error_code": p.error_code} for p in t.partitions),
                              key=lambda p: p["partition"])
        raise MetadataPending(f"topic {topic} missing from the metadata answer")

    def partitions(self, topic: str, wait: bool = True) -> list[dict[str, Any]]:
        """Partition metadata of ``topic``: dicts with partition, leader (-1: none), replicas, isr, error_code.

        A topic just created answers UNKNOWN_TOPIC_OR_PARTITION from a broker whose metadata cache
        the controller has not updated yet (ZooKeeper mode: UpdateMetadata is asynchronous); that is
        waited through, bounded, unless ``wait`` is False (then :class:`MetadataPending` is raised).
        """
        if not wait:
            return self._partitions_once(topic)
        return self.settled(lambda: self._partitions_once(topic), f"metadata of topic {topic}")

    def leader_id(self, topic: str, partition: int, wait: bool = False) -> int | None:
        """Leader of ``topic``-``partition``.

        Without ``wait`` None means the partition has no leader right now (offline or between
        leaders); with it, a leaderless partition is waited through, bounded.
        """
        def ask() -> int | None:
            for p in self.partitions(topic):
                if p["partition"] == partition:
                    return None if p["leader"] < 0 else p["leader"]
            raise InfrastructureError(f"topic {topic} has no partition {partition}")

        return self.settled(ask, f"a leader of {topic}-{partition}") if wait else ask()

    def coordinator_id(self, group: str, wait: bool = True) -> int | None:
        """Broker id of ``group``'s coordinator (FindCoordinator); creates __consumer_offsets on first use.

        With ``wait`` (default) COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and a lost connection are
        waited through, bounded; without, one attempt (the observer: a coordinator that is down is an
        observation).
        """
        def ask() -> int | None:
            coord = self._call(lambda c: self._find_coordinator(c, group))
            return None if coord is None or coord < 0 else coord

        return self.settled(ask, f"the coordinator of group {group}") if wait else ask()

    def _find_coordinator(self, c: KafkaAdminClient, group: str) -> int:
        """FindCoordinator for ``group``, asked every time (kafka-python's admin caches the answer, and a
        coordinator that moved must be seen): the batched form (v4+, KIP-699, Kafka 3.0+) where the broker
        has it, else v0-v3. An error answer (COORDINATOR_NOT_AVAILABLE while ``__consumer_offsets`` is
        created or its leader moves) is raised."""
        if c._manager.broker_version_data.api_version(FindCoordinatorRequest) >= 4:
            answer = self._send(c, FindCoordinatorRequest(key_type=0, coordinator_keys=[group], min_version=4))
            found = next(x for x in answer.coordinators if x.key == group)
        else:
            found = self._send(c, FindCoordinatorRequest(key=group, key_type=0, max_version=3))
        if found.error_code:
            raise kafka.errors.for_code(found.error_code)(found.error_message or group)
        return int(found.node_id)

    def describe_group(self, group: str, coordinator: int | None = None, wait: bool = True) -> GroupDescription:
        """DescribeGroups at the coordinator (``coordinator``, or the one FindCoordinator names now).

        With ``wait`` COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR are waited through, bounded
        (a coordinator that moved is asked again by FindCoordinator when none was given).
        """
        def once(c: KafkaAdminClient) -> GroupDescription:
            node = coordinator if coordinator is not None else self._find_coordinator(c, group)
            # at most v5: from v6 (Kafka 4.0) a group that is not classic, or absent, is an error
            # (GROUP_ID_NOT_FOUND) instead of state Dead, which the observer reads (chaos.workload.observer)
            answer = self._send(c, DescribeGroupsRequest(groups=[group], include_authorized_operations=False,
                                                         max_version=5), node)
            return group_description(next(g for g in answer.groups if g.group_id == group))

        def ask() -> GroupDescription:
            return self._call(once)

        return self.settled(ask, f"a description of group {group}") if wait else ask()

    def committed_offsets(self, group: str, wait: bool = True,
                          coordinator: int | None = None) -> dict[tuple[str, int], int]:
        """OffsetFetch for every partition the group committed: {(topic, partition): next offset}; at broker
        ``coordinator`` when given (else at the one FindCoordinator names)."""
        def once(c: KafkaAdminClient) -> dict[tuple[str, int], int]:
            node = coordinator if coordinator is not None else self._find_coordinator(c, group)
            # the admin's own OffsetFetch (the batched v8+ form where the broker has it), sent to ``node``:
            # its list_group_offsets asks only the coordinator FindCoordinator names
            ((_, request),) = c._list_group_offsets_requests({group: None})
            res = c._list_group_offsets_process_response(self._send(c, request, node), group_id=group)[group]
            return {(tp.topic, tp.partition): om.offset for tp, om in res.items()}

        def ask() -> dict[tuple[str, int], int]:
            return self._call(once)

        return self.settled(ask, f"the committed offsets of group {group}") if wait else ask()

    def create_topic(self, topic: str, partitions: int, replication: int, configs: dict[str, str] | None = None,
                     wait: bool = True) -> None:
        """Create ``topic`` (an existing one is kept) and, with ``wait``, return only once the metadata
        lists all ``partitions`` with a leader — what a producer or consumer needs next."""
        try:
            self._call(lambda c: c.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": replication, "configs": configs or {}}},
                timeout_ms=int(self.timeout * 1000)))
        except TopicAlreadyExistsError:
            pass
        except KafkaError as exc:
            if not exc.retriable:  # e.g. INVALID_REPLICATION_FACTOR: asking again gives the same answer
                raise InfrastructureError(f"creating topic {topic}: {_describe(exc)}") from None
            raise
        if wait:
            self.settled(lambda: True if (len(ps := self._partitions_once(topic)) >= partitions
                                          and all(p["leader"] >= 0 for p in ps)) else None,
                         f"topic {topic} to list {partitions} partitions, each with a leader")

    def topics(self) -> set[str]:
        """The names of every topic the cluster lists (internal ones included)."""
        return set(self._call(lambda c: c.list_topics()))

    def delete_topics(self, topics: Iterable[str]) -> set[str]:
        """DeleteTopics for ``topics``; returns the names still there: those the controller refused, or all of
        them when it did not answer. A topic already gone counts as deleted. The controller answers once the
        deletion is decided; each broker renames the logs and removes them ``log.segment.delete.delay.ms``
        later (1 s in this project's brokers, a minute by default), and a broker started before that loads
        them again (measured: bench/broker_restart.py)."""
        names = sorted(topics)
        if not names:
            return set()
        try:
            res = self._call(lambda c: c.delete_topics(names, timeout_ms=int(self.timeout * 1000), raise_errors=False))
        except KafkaError:
            return set(names)
        answered = {t["name"]: t["error_code"] for t in res["topics"]}  # a name left out: not deleted
        return {n for n in names if answered.get(n) not in (0, UnknownTopicOrPartitionError.errno)}

    def set_group_config(self, group: str, configs: dict[str, str]) -> None:
        """Set ``configs`` on consumer group ``group`` (IncrementalAlterConfigs SET on the GROUP resource).

        KIP-848 moved a consumer group's session timeout and heartbeat interval from the members to
        the coordinator: per group, the dynamic group configs ``consumer.session.timeout.ms`` and
        ``consumer.heartbeat.interval.ms`` (Kafka 4.0+; ``GroupConfig``), otherwise the brokers'
        ``group.consumer.session.timeout.ms`` (45 s) and ``group.consumer.heartbeat.interval.ms`` (5 s).
        A group config is bounded by the brokers' ``group.consumer.min.session.timeout.ms`` (45 s) /
        ``group.consumer.max.session.timeout.ms`` (60 s) and ``group.consumer.min.heartbeat.interval.ms``
        (5 s) / ``group.consumer.max.heartbeat.interval.ms`` (15 s): second-scale values need those
        lowered on the brokers first. Out of bounds the call is refused (seen on 4.4.0: INVALID_CONFIG
        "consumer.session.timeout.ms must be in the range 1000 to 60000 inclusive"); a value stored
        before the bounds changed is applied capped to them, with a WARN (``GroupConfig``). A
        group may be configured before it exists: members joining afterwards get the values with
        their first heartbeat (seen: a 3000 ms session fenced a member frozen for 8 s).

        This is the one admin call made with confluent-kafka's AdminClient (written when kafka-python,
        then 2.2, had no IncrementalAlterConfigs; 3.0 has one, not adopted here): a client per call,
        meant for run setup on a healthy cluster — see the module docstring for librdkafka admin
        requests aborting the process when a connection drops under them. Transient errors are retried,
        bounded (:meth:`settled`); a definite refusal (out of bounds, unknown config, a broker without
        group configs) is one :class:`InfrastructureError` line naming the configs and Kafka's reason.
        """
        if not configs:
            return
        # imported here: the rest of this module runs without librdkafka's admin code loaded
        from confluent_kafka import KafkaError as RdKafkaError
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                   for name, value in sorted(configs.items())]

        def ask() -> bool:
            client = AdminClient({"bootstrap.servers": ",".join(self._servers()), "client.id": "chaos-admin",
                                  "reconnect.backoff.max.ms": 500, "log_level": 0})
            resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
            future = client.incremental_alter_configs([resource], request_timeout=self.timeout)[resource]
            try:
                future.result(timeout=self.timeout + 1.0)
            except KafkaException as exc:
                err: RdKafkaError = exc.args[0]
                if err.retriable() or err.code() in (RdKafkaError._TIMED_OUT, RdKafkaError._TRANSPORT):
                    raise MetadataPending(f"{err.name()}: {err.str()}") from None
                hint = ("values must lie within the brokers' group.consumer.min/max.session.timeout.ms and "
                        "group.consumer.min/max.heartbeat.interval.ms" if err.code() == RdKafkaError.INVALID_CONFIG
                        else "group configs need Kafka 4.0+ (KRaft) with the consumer protocol")
                raise InfrastructureError(
                    f"setting {', '.join(f'{k}={v}' for k, v in sorted(configs.items()))} on group {group}: "
                    f"{err.name()}: {err.str()} ({hint})"
                ) from None
            return True

        self.settled(ask, f"the configs of group {group}")

    def create_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions, the brokers placing the new ones (no assignment: null)."""
        self._call(lambda c: c.create_partitions({topic: total}, timeout_ms=int(self.timeout * 1000)))


def retry(fn: Callable[[], T | None], deadline: float, what: str, interval: float = 0.2) -> T:
    """Call ``fn`` until it returns a non-None value or ``deadline`` (monotonic) passes."""
    last: Exception | None = None
    while True:
        try:
            value = fn()
            if value is not None:
                return value
        except (InfrastructureError, UsageError):
            raise  # definite (a node died, the input is wrong): waiting longer cannot help
        except Exception as exc:  # noqa: BLE001 - transient admin errors while nodes move
            last = exc
        if time.monotonic() >= deadline:
            detail = f": {type(last).__name__}: {last}" if last else ""
            raise InfrastructureError(f"timed out waiting for {what}{detail}")
        time.sleep(interval)
