"""The service's consumer configuration, read from the environment only.

kafka-chaos starts each member with these variables (``chaos.model.workload.MEMBER_ENV``); in
production the same names would come from the deployment. Nothing here knows about kafka-chaos.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Where to connect and how the group is run, as the environment gives it."""

    bootstrap_servers: str
    group_id: str
    topic: str
    client_id: str
    session_timeout_ms: int
    max_poll_interval_ms: int
    group_protocol: str
    assignment_strategy: str
    group_instance_id: str | None

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> ConsumerSettings:
        """Read ``KAFKA_*``; a missing required variable is a ``KeyError`` naming it (the process exits at once,
        which kafka-chaos reports as a member that exited during the warm-up)."""
        e = os.environ if env is None else env
        return cls(bootstrap_servers=e["KAFKA_BOOTSTRAP_SERVERS"], group_id=e["KAFKA_GROUP_ID"],
                   topic=e["KAFKA_TOPIC"], client_id=e.get("KAFKA_CLIENT_ID", "orders"),
                   session_timeout_ms=int(e.get("KAFKA_SESSION_TIMEOUT_MS", "45000")),
                   max_poll_interval_ms=int(e.get("KAFKA_MAX_POLL_INTERVAL_MS", "300000")),
                   group_protocol=e.get("KAFKA_GROUP_PROTOCOL", "classic"),
                   assignment_strategy=e.get("KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "range"),
                   group_instance_id=e.get("KAFKA_GROUP_INSTANCE_ID") or None)

    def confluent(self) -> dict[str, Any]:
        """librdkafka properties (CONFIGURATION.md). The commit policy is the service's, not the environment's:
        no auto-commit (the service commits what it has processed), and a new group starts from the earliest
        record (``latest`` would let a commit cover records nobody processed)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers, "group.id": self.group_id, "client.id": self.client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "max.poll.interval.ms": self.max_poll_interval_ms, "group.protocol": self.group_protocol,
        }
        if self.group_protocol == "classic":
            # KIP-848 (group.protocol=consumer) moves these to the coordinator: librdkafka refuses them there.
            # A heartbeat every third of the session timeout is the usual ratio (Kafka's defaults 3 s / 10 s).
            conf.update({"session.timeout.ms": self.session_timeout_ms,
                         "heartbeat.interval.ms": max(100, self.session_timeout_ms // 3),
                         "partition.assignment.strategy": self.assignment_strategy})
        if self.group_instance_id is not None:
            conf["group.instance.id"] = self.group_instance_id  # KIP-345 static membership
        return conf
