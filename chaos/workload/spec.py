"""What each worker process does, as validated frozen records.

A :class:`ConsumerSpec` describes one group member, a :class:`ProducerSpec`
one producer; :class:`WorkerConfig` is what a worker process receives (its
spec plus where to connect and where to write events). Experiments embed these
records; unknown fields are rejected at load time.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chaos.cluster.runtime import DEFAULT_KAFKA_VERSION
from chaos.history.event import Assignor, Client, CommitMode, RebalanceProtocol, WrongMode


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class ConsumerSpec(_Frozen):
    """One member of the group under test."""

    client: Client = Client.CONFLUENT_KAFKA
    assignor: Assignor = Assignor.RANGE
    #: group.instance.id for KIP-345 static membership; None = dynamic member
    instance_id: str | None = None
    session_timeout_ms: Annotated[int, Field(ge=500)] = 6000
    heartbeat_interval_ms: Annotated[int, Field(ge=100)] = 1000
    max_poll_interval_ms: Annotated[int, Field(ge=1000)] = 30000
    commit_mode: CommitMode = CommitMode.SYNC
    auto_commit_interval_ms: Annotated[int, Field(ge=100)] = 1000
    #: simulated processing time per record (slow-consumer faults)
    processing_delay_ms: Annotated[float, Field(ge=0)] = 0.0
    #: records per poll
    max_records: Annotated[int, Field(ge=1, le=10000)] = 200
    #: records processed between two polls (None = the whole poll). Smaller chunks keep records
    #: queued across polls, where rebalance callbacks run (needed by wrong_mode ignore_revoke)
    process_chunk: Annotated[int, Field(ge=1)] | None = None
    #: deliberately wrong behaviour for checker validation; off by default
    wrong_mode: WrongMode | None = None
    #: skip_records: drop every n-th record unprocessed (but commit past it)
    skip_every: Annotated[int, Field(ge=2)] = 10
    #: client lane (its own proxies) — one lane per member lets it be cut off alone
    lane: str = "lane0"

    @model_validator(mode="after")
    def _check(self) -> "ConsumerSpec":
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below session_timeout_ms (a third of it is usual)")
        if self.client is Client.CONFLUENT_KAFKA and self.max_poll_interval_ms < self.session_timeout_ms:
            raise ValueError(f"max_poll_interval_ms={self.max_poll_interval_ms} is below session_timeout_ms="
                             f"{self.session_timeout_ms}: librdkafka refuses that; lower the session timeout")
        # what each client library can do, checked at load time (not when the worker starts)
        if self.client is Client.CONFLUENT_KAFKA and self.assignor is Assignor.STICKY:
            raise ValueError("confluent-kafka (librdkafka) has no eager sticky assignor: use cooperative-sticky, "
                             "or client kafka-python / java")
        if self.client is Client.KAFKA_PYTHON and self.assignor is Assignor.COOPERATIVE_STICKY:
            raise ValueError("kafka-python has no cooperative-sticky assignor (KIP-429): use client confluent-kafka or java")
        if self.client is Client.KAFKA_PYTHON and self.instance_id:
            raise ValueError("kafka-python 2.2 has no group.instance.id (KIP-345): use client confluent-kafka or java")
        if self.client is Client.JAVA:
            if self.commit_mode is not CommitMode.SYNC:
                raise ValueError("the Java VerifiableConsumer commits synchronously after each poll only: use commit_mode sync")
            if self.wrong_mode is not None:
                raise ValueError("the Java VerifiableConsumer has no wrong_mode: use a Python client for checker validation")
            if self.processing_delay_ms:
                raise ValueError("the Java VerifiableConsumer has no processing delay: use a Python client for slow consumers")
        return self

    @property
    def protocol(self) -> RebalanceProtocol:
        """Cooperative for cooperative-sticky (KIP-429), eager for every other assignor."""
        return RebalanceProtocol.COOPERATIVE if self.assignor is Assignor.COOPERATIVE_STICKY else RebalanceProtocol.EAGER


class ProducerSpec(_Frozen):
    """One producer writing unique, checkable values with acks=all and idempotence."""

    #: records per second (0 = as fast as possible)
    rate: Annotated[float, Field(ge=0)] = 200.0
    #: total records (None = until stopped)
    count: Annotated[int, Field(ge=1)] | None = None
    delivery_timeout_ms: Annotated[int, Field(ge=1000)] = 30000
    lane: str = "lane0"


class WorkerConfig(_Frozen):
    """Everything a worker process needs; serialized to JSON on its command line."""

    role: Literal["consumer", "producer"]
    name: str
    run_id: str
    run_dir: str
    bootstrap: str
    topic: str
    group: str
    consumer: ConsumerSpec | None = None
    producer: ProducerSpec | None = None
    #: a "module:function" the consumer calls per record (users' own processing logic)
    handler: str | None = None
    #: the cluster's Kafka version (the Java client runs that version's VerifiableConsumer)
    kafka_version: str = DEFAULT_KAFKA_VERSION
