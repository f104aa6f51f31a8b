"""What each worker process does, as validated frozen records.

A :class:`ConsumerSpec` describes one group member, a :class:`ProducerSpec`
one producer; :class:`WorkerConfig` is what a worker process receives (its
spec plus where to connect and where to write events). Experiments embed these
records; unknown fields are rejected at load time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from chaos.model.cluster import DEFAULT_KAFKA_VERSION
from chaos.model.share import ShareMemberSpec
from chaos.model.workload import (
    ConsumerSpec,
    ProducerSpec,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


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
    #: a share-group member (KIP-932) instead of ``consumer`` (the group's settings are set by the runner)
    share_member: ShareMemberSpec | None = None
    #: the share group's ``share.record.lock.duration.ms``: a share member's time to process a poll's records
    share_lock_ms: int | None = None
    producer: ProducerSpec | None = None
    #: a "module:function" the consumer calls per record (users' own processing logic)
    handler: str | None = None
    #: the cluster's Kafka version (the Java client runs that version's VerifiableConsumer)
    kafka_version: str = DEFAULT_KAFKA_VERSION
