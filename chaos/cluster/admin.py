"""Role lookups (controller, partition leader, group coordinator) over Kafka's admin API.

Roles are always *asked*, never computed: the coordinator of a group is the
leader of ``__consumer_offsets`` partition ``abs(hash(G)) % N`` only while
leadership is stable, and the admin API (FindCoordinator, KIP-699 for the
batched form) gives the broker's current answer. The admin client connects
through the control lane's proxies like any other client.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

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

    def describe_group(self, group: str):
        fut = self._client.describe_consumer_groups([group], request_timeout=self.timeout)[group]
        return fut.result(self.timeout + 1)

    def coordinator_id(self, group: str) -> int | None:
        """Broker id of ``group``'s coordinator (FindCoordinator); creates __consumer_offsets on first use."""
        coord = self.describe_group(group).coordinator
        return None if coord is None or coord.id < 0 else coord.id

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
        except Exception as exc:  # noqa: BLE001 - transient admin errors while nodes move
            last = exc
        if time.monotonic() >= deadline:
            detail = f": {type(last).__name__}: {last}" if last else ""
            raise InfrastructureError(f"timed out waiting for {what}{detail}")
        time.sleep(interval)
