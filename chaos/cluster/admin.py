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
from typing import Any, Callable, TypeVar

from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.errors import (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, NodeNotReadyError,
                          TopicAlreadyExistsError)

from chaos.errors import InfrastructureError

T = TypeVar("T")

#: protocol level to speak: every broker this project runs (2.8-3.9) supports it,
#: and fixing it avoids kafka-python's version probing against dying nodes.
API_VERSION = (2, 8)


#: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE: transient while a topic is being created
_NOT_YET = {3, 5}


class MetadataPending(Exception):
    """The metadata is not there *yet* (not an infrastructure failure): ask again."""


class ClusterAdmin:
    """Admin operations against one cluster; each request is bounded by ``timeout``.

    Thread-safe (one lock): the observer and the nemesis may share it.
    """

    def __init__(self, bootstrap: str, timeout: float = 5.0):
        self.timeout = timeout
        self._bootstrap = bootstrap.split(",")
        self._client: KafkaAdminClient | None = None
        self._lock = threading.Lock()

    def _call(self, fn: Callable[[KafkaAdminClient], T], attempts: int = 3) -> T:
        """Run ``fn`` on a (fresh if needed) client; connection-level failures are retried, bounded."""
        for attempt in range(attempts):
            try:
                return self._call_once(fn)
            except (KafkaConnectionError, NodeNotReadyError, NoBrokersAvailable, KafkaTimeoutError):
                if attempt == attempts - 1:
                    raise
                time.sleep(0.3 * (attempt + 1))
        raise AssertionError("unreachable")

    def _call_once(self, fn: Callable[[KafkaAdminClient], T]) -> T:
        with self._lock:
            try:
                if self._client is None:
                    self._client = KafkaAdminClient(
                        bootstrap_servers=self._bootstrap, client_id="chaos-admin", api_version=API_VERSION,
                        request_timeout_ms=int(self.timeout * 1000), reconnect_backoff_max_ms=500,
                        metadata_max_age_ms=1000,
                    )
                return fn(self._client)
            except Exception:
                # a failed request can leave the client pinned to a dead node;
                # a fresh one re-bootstraps through the proxies
                self._close_client()
                raise

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

    def _metadata(self, topics: list[str] | None) -> dict[str, Any]:
        return self._call(lambda c: c._get_cluster_metadata(topics=topics).to_object())

    def controller_id(self) -> int | None:
        """The broker id the cluster names as controller, or None if there is none."""
        cid = self._metadata([])["controller_id"]
        return None if cid is None or cid < 0 else cid

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
            future = c._send_request_to_node(broker_id, MetadataRequest[1](topics=[]))
            c._wait_for_futures([future])
            return sorted(b["node_id"] for b in future.value.to_object()["brokers"])

        return self._call(ask)

    def cluster(self) -> tuple[int | None, list[int]]:
        md = self._metadata([])
        cid = md["controller_id"]
        return (None if cid is None or cid < 0 else cid), sorted(b["node_id"] for b in md["brokers"])

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """Partition metadata of ``topic``: dicts with partition, leader, replicas, isr."""
        md = self._metadata([topic])
        for t in md["topics"]:
            if t["topic"] == topic:
                if t["error_code"] in _NOT_YET:
                    # a topic just created is not in every broker's metadata cache at once: callers retry
                    raise MetadataPending(f"metadata for topic {topic}: error code {t['error_code']}")
                if t["error_code"] != 0:
                    raise InfrastructureError(f"metadata for topic {topic}: error code {t['error_code']}")
                return sorted(t["partitions"], key=lambda p: p["partition"])
        raise InfrastructureError(f"no metadata for topic {topic}")

    def leader_id(self, topic: str, partition: int) -> int | None:
        """Leader of ``topic``-``partition``, None while it has none (offline)."""
        for p in self.partitions(topic):
            if p["partition"] == partition:
                return None if p["leader"] < 0 else p["leader"]
        raise InfrastructureError(f"topic {topic} has no partition {partition}")

    def coordinator_id(self, group: str) -> int | None:
        """Broker id of ``group``'s coordinator (FindCoordinator); creates __consumer_offsets on first use."""
        coord = self._call(lambda c: c._find_coordinator_ids([group])[group])
        return None if coord is None or coord < 0 else coord

    def describe_group(self, group: str, coordinator: int | None = None):
        """DescribeGroups at the coordinator (kafka-python ``GroupInformation``)."""
        return self._call(lambda c: c.describe_consumer_groups([group], group_coordinator_id=coordinator)[0])

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """OffsetFetch for every partition the group committed: {(topic, partition): next offset}."""
        res = self._call(lambda c: c.list_consumer_group_offsets(group))
        return {(tp.topic, tp.partition): om.offset for tp, om in res.items()}

    def create_topic(self, topic: str, partitions: int, replication: int, configs: dict[str, str] | None = None) -> None:
        try:
            self._call(lambda c: c.create_topics(
                [NewTopic(topic, partitions, replication, topic_configs=configs or {})],
                timeout_ms=int(self.timeout * 1000)))
        except TopicAlreadyExistsError:
            pass

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
        except InfrastructureError:
            raise  # definite (a node died): waiting longer cannot help
        except Exception as exc:  # noqa: BLE001 - transient admin errors while nodes move
            last = exc
        if time.monotonic() >= deadline:
            detail = f": {type(last).__name__}: {last}" if last else ""
            raise InfrastructureError(f"timed out waiting for {what}{detail}")
        time.sleep(interval)
