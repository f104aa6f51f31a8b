"""Role lookups (controller, partition leader, group coordinator) over Kafka's admin API.

Roles are always *asked*, never computed: the coordinator of a group is the
leader of ``__consumer_offsets`` partition ``abs(hash(G)) % N`` only while
leadership is stable, and the admin API (FindCoordinator) gives the broker's
current answer. The admin clients connect through the control lane's proxies
like any other client.

Two client libraries, on purpose: cluster and topic metadata go through
confluent-kafka's AdminClient; *coordinator-targeted* requests (FindCoordinator,
DescribeGroups) go through kafka-python, because librdkafka aborts the whole
process when a connection drops under such a request
(confluentinc/librdkafka#4605, fix pending in PR #5397) — exactly what a
chaos tool provokes. An abort would take the driver and its cleanup with it.
"""

from __future__ import annotations

import time

import threading

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from chaos.errors import InfrastructureError


class ClusterAdmin:
    """Admin operations against one cluster; every call is bounded by ``timeout``."""

    def __init__(self, bootstrap: str, timeout: float = 5.0):
        self.timeout = timeout
        self._client = AdminClient({
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(timeout * 1000),
            "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0,
        })
        self._bootstrap = bootstrap
        self._groups: KafkaAdminClient | None = None
        self._groups_lock = threading.Lock()

    def _group_admin(self) -> KafkaAdminClient:
        if self._groups is None:
            self._groups = KafkaAdminClient(
                bootstrap_servers=self._bootstrap.split(","),
                request_timeout_ms=int(self.timeout * 1000),
                reconnect_backoff_max_ms=500,
                metadata_max_age_ms=1000,
                client_id="chaos-admin",
            )
        return self._groups

    def close(self) -> None:
        with self._groups_lock:
            if self._groups is not None:
                self._groups.close()
                self._groups = None

    def describe_cluster(self):
        return self._client.describe_cluster(request_timeout=self.timeout).result(self.timeout + 1)

    def controller_id(self) -> int | None:
        """The broker id the cluster names as controller, or None if there is none."""
        ctl = self.describe_cluster().controller
        return None if ctl is None or ctl.id < 0 else ctl.id

    def broker_ids(self) -> list[int]:
        return sorted(n.id for n in self.describe_cluster().nodes)

    def leader_id(self, topic: str, partition: int) -> int | None:
        """Leader of ``topic``-``partition``, None while it has none (offline)."""
        fut = self._client.describe_topics(TopicCollection([topic]), request_timeout=self.timeout)[topic]
        desc = fut.result(self.timeout + 1)
        for p in desc.partitions:
            if p.id == partition:
                return None if p.leader is None or p.leader.id < 0 else p.leader.id
        raise InfrastructureError(f"topic {topic} has no partition {partition}")

    def describe_topic(self, topic: str):
        fut = self._client.describe_topics(TopicCollection([topic]), request_timeout=self.timeout)[topic]
        return fut.result(self.timeout + 1)

    def describe_group(self, group: str, coordinator: int | None = None):
        """DescribeGroups at the coordinator (kafka-python ``GroupInformation``)."""
        with self._groups_lock:
            try:
                return self._group_admin().describe_consumer_groups([group], group_coordinator_id=coordinator)[0]
            except Exception:
                self._reset_group_admin()
                raise

    def coordinator_id(self, group: str) -> int | None:
        """Broker id of ``group``'s coordinator (FindCoordinator); creates __consumer_offsets on first use."""
        with self._groups_lock:
            try:
                coord = self._group_admin()._find_coordinator_ids([group])[group]
            except Exception:
                self._reset_group_admin()
                raise
        return None if coord is None or coord < 0 else coord

    def _reset_group_admin(self) -> None:
        # a failed request can leave kafka-python's client pointing at a dead
        # node; a fresh client re-bootstraps through the proxies.
        if self._groups is not None:
            try:
                self._groups.close()
            except Exception:  # noqa: BLE001
                pass
            self._groups = None

    def create_topic(self, topic: str, partitions: int, replication: int, configs: dict[str, str] | None = None) -> None:
        fut = self._client.create_topics(
            [NewTopic(topic, partitions, replication, config=configs or {})], request_timeout=self.timeout
        )[topic]
        try:
            fut.result(self.timeout + 1)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise

    def create_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions
        self._client.create_partitions([NewPartitions(topic, total)], request_timeout=self.timeout)[topic].result(self.timeout + 1)


def retry(fn, deadline: float, what: str, interval: float = 0.2):
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
