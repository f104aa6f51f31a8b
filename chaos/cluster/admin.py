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

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import (
    Cancelled,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    NodeNotReadyError,
    TopicAlreadyExistsError,
)
from kafka.protocol.metadata import MetadataRequest

from chaos.errors import InfrastructureError, UsageError

T = TypeVar("T")

#: protocol level to speak: every broker this project runs (2.8-3.9) supports it,
#: and fixing it avoids kafka-python's version probing against dying nodes.
API_VERSION = (2, 8)


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
            # Cancelled: the connection a request was in flight on closed (its broker was just killed)
            except (KafkaConnectionError, NodeNotReadyError, NoBrokersAvailable, KafkaTimeoutError, Cancelled):
                if attempt == attempts - 1:
                    raise
                time.sleep(0.3 * (attempt + 1))
        raise AssertionError("unreachable")

    def _call_once(self, fn: Callable[[KafkaAdminClient], T]) -> T:
        with self._lock:
            try:
                if self._client is None:
                    self._client = KafkaAdminClient(
                        bootstrap_servers=self._servers(), client_id="chaos-admin", api_version=API_VERSION,
                        request_timeout_ms=int(self.timeout * 1000), reconnect_backoff_max_ms=500,
                        metadata_max_age_ms=1000,
                    )
                return fn(self._client)
            except Exception:
                # a failed request can leave the client pinned to a dead node;
                # a fresh one re-bootstraps through the proxies
                self._close_client()
                raise

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

    def _metadata(self, topics: list[str] | None) -> dict[str, Any]:
        return self._call(lambda c: c._get_cluster_metadata(topics=topics).to_object())

    def controller_id(self, wait: bool = True) -> int | None:
        """The broker id the cluster names as controller.

        With ``wait`` (default) an election in progress (no controller yet) is waited through,
        bounded; without, None means "none right now".
        """
        def ask() -> int | None:
            cid = self._metadata([])["controller_id"]
            return None if cid is None or cid < 0 else cid

        return self.settled(ask, "the cluster to name a controller") if wait else ask()

    def broker_ids(self) -> list[int]:
        """Brokers registered now (the metadata cache follows ZooKeeper's /brokers/ids)."""
        return sorted(b["node_id"] for b in self._metadata([])["brokers"])

    def brokers_seen_by(self, broker_id: int) -> list[int]:
        """The live brokers in ``broker_id``'s own metadata cache.

        In ZooKeeper mode each broker learns who is alive only from the
        controller's UpdateMetadata requests, and CreateTopics is judged on the
        controller's cache ("Replication factor: 3 larger than available
        brokers: 2"). Asking one broker tells nothing about another's view, so
        a cluster is whole only when every broker sees every broker.
        """
        def ask(c: KafkaAdminClient) -> list[int]:
            # v4: every broker of 1.0+ answers it; Kafka 4.0 removed v0-v3 (KIP-896)
            future = c._send_request_to_node(broker_id, MetadataRequest[4](topics=[], allow_auto_topic_creation=False))
            c._wait_for_futures([future])
            return sorted(b["node_id"] for b in future.value.to_object()["brokers"])

        return self._call(ask)

    def cluster(self) -> tuple[int | None, list[int]]:
        md = self._metadata([])
        cid = md["controller_id"]
        return (None if cid is None or cid < 0 else cid), sorted(b["node_id"] for b in md["brokers"])

    def _partitions_once(self, topic: str) -> list[dict[str, Any]]:
        md = self._metadata([topic])
        for t in md["topics"]:
            if t["topic"] == topic:
                code = t["error_code"]
                if code in TRANSIENT_CODES:
                    raise MetadataPending(f"topic {topic}: {TRANSIENT_CODES[code]} ({code})")
                if code != 0:
                    raise InfrastructureError(f"metadata for topic {topic}: error code {code}")
                return sorted(t["partitions"], key=lambda p: p["partition"])
        raise MetadataPending(f"topic {topic} missing from the metadata answer")

    def partitions(self, topic: str, wait: bool = True) -> list[dict[str, Any]]:
        """Partition metadata of ``topic``: dicts with partition, leader, replicas, isr.

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
            coord = self._call(lambda c: c._find_coordinator_ids([group])[group])
            return None if coord is None or coord < 0 else coord

        return self.settled(ask, f"the coordinator of group {group}") if wait else ask()

    def describe_group(self, group: str, coordinator: int | None = None, wait: bool = True):
        """DescribeGroups at the coordinator (kafka-python ``GroupInformation``).

        With ``wait`` COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR are waited through, bounded
        (a coordinator that moved is asked again by FindCoordinator when none was given).
        """
        def ask():
            return self._call(lambda c: c.describe_consumer_groups([group], group_coordinator_id=coordinator)[0])

        return self.settled(ask, f"a description of group {group}") if wait else ask()

    def committed_offsets(self, group: str, wait: bool = True,
                          coordinator: int | None = None) -> dict[tuple[str, int], int]:
        """OffsetFetch for every partition the group committed: {(topic, partition): next offset}; at broker
        ``coordinator`` when given (else at the one FindCoordinator names)."""
        def ask() -> dict[tuple[str, int], int]:
            res = self._call(lambda c: c.list_consumer_group_offsets(group, group_coordinator_id=coordinator))
            return {(tp.topic, tp.partition): om.offset for tp, om in res.items()}

        return self.settled(ask, f"the committed offsets of group {group}") if wait else ask()

    def create_topic(self, topic: str, partitions: int, replication: int, configs: dict[str, str] | None = None,
                     wait: bool = True) -> None:
        """Create ``topic`` (an existing one is kept) and, with ``wait``, return only once the metadata
        lists all ``partitions`` with a leader — what a producer or consumer needs next."""
        try:
            self._call(lambda c: c.create_topics(
                [NewTopic(topic, partitions, replication, topic_configs=configs or {})],
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

        This is the one admin call made with confluent-kafka's AdminClient (kafka-python 2.2 has no
        IncrementalAlterConfigs): a client per call, meant for run setup on a healthy cluster — see
        the module docstring for librdkafka admin requests aborting the process when a connection
        drops under them. Transient errors are retried, bounded (:meth:`settled`); a definite refusal
        (out of bounds, unknown config, a broker without group configs) is one :class:`InfrastructureError`
        line naming the configs and Kafka's reason.
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
        self._call(lambda c: c.create_partitions({topic: NewPartitions(total)}, timeout_ms=int(self.timeout * 1000)))


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
