"""A share-group workload (KIP-932, "Queues for Kafka"; production-ready in Kafka 4.2): its members and the group's
settings, validated when an experiment is loaded.

A workload is either a consumer group (``workload.consumers``) or a share group (``workload.share``): one group per
run, as the checkers judge it. Share-group members do not take partitions from each other; each record is acquired
by one member under a time-limited lock and acknowledged (docs/share-groups.md, "What Kafka does"). The group's
settings are *group configs* (``GroupConfig``: ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.session.timeout.ms``, ``share.heartbeat.interval.ms``, ``share.auto.offset.reset``) set on the GROUP
resource before the members start, each bounded by the brokers' ``group.share.min.*`` / ``group.share.max.*``
(``ShareGroupConfig``), which the cluster lowers for second-scale experiments
(:data:`chaos.cluster.settings.SHARE_GROUP_SETTINGS`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chaos.model.clients import Client, parse_client_release, release
from chaos.model.limits import MAX_CONSUMERS

#: confluent-kafka's ``ShareConsumer`` (librdkafka's KIP-932 consumer) first ships in 2.15.0 (2.14.0 has none)
CONFLUENT_SHARE_CONSUMER = (2, 15, 0)
#: Kafka's ``KafkaShareConsumer`` as the Java member uses it (``acquisitionLockTimeoutMs``, KIP-1222): 4.2
JAVA_SHARE_CONSUMER = (4, 2, 0)
#: the clients a share member runs on
SHARE_CLIENTS = (Client.CONFLUENT_KAFKA, Client.JAVA)
#: share groups are production-ready from Kafka 4.2 (early access 4.0, preview 4.1; KIP-932)
SHARE_KAFKA_RELEASE = (4, 2)
#: the group config ``share.delivery.count.limit``: Kafka 4.2.2 refuses it ("Unknown group config name"), 4.4.0
#: takes it (both measured; 4.3 not tried, taken as the first with it); below, the brokers'
#: ``group.share.delivery.count.limit`` (5 by default) applies to every group
GROUP_DELIVERY_LIMIT_RELEASE = (4, 3)
#: Kafka's default delivery count limit (``ShareGroupConfig.SHARE_GROUP_DELIVERY_COUNT_LIMIT_DEFAULT``)
KAFKA_DELIVERY_COUNT_LIMIT = 5


class ShareWrongMode(StrEnum):
    """Deliberately wrong share consumers the share-processing checker must catch (docs/share-groups.md, "A wrong
    share consumer").

    - ``accept_before_processing``: each poll's records are accepted (and committed) first, processed after: a
      member that dies between the two has had records accepted (final, KIP-932) that nobody processed.
    - ``process_past_lock``: every record of a poll is processed, however long it takes, and accepted after: past
      the acquisition lock the record is no longer the member's, another member may be handed it meanwhile.
    """

    ACCEPT_BEFORE_PROCESSING = "accept_before_processing"
    PROCESS_PAST_LOCK = "process_past_lock"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class ShareMemberSpec(_Frozen):
    """One member of the share group: kafka-chaos's own loop over the client's share consumer. Each poll's records
    are processed while their lock leaves time for it, the processed ones acknowledged ACCEPT and the rest RELEASE
    (explicit acknowledgement, ``share.acknowledgement.mode``), committed synchronously, so every acknowledgement
    has its answer in the history (:mod:`chaos.workload.share_member`)."""

    #: confluent-kafka's ``ShareConsumer`` (kafka-chaos's loop in Python) or ``java``: Kafka's
    #: ``KafkaShareConsumer`` (the same loop in Java, ``java/share-member``)
    client: Client = Client.CONFLUENT_KAFKA
    #: the client library's release (None: the project's pinned confluent-kafka, or the cluster's own Kafka release
    #: for java); confluent-kafka 2.15.0 or newer, kafka-clients 4.2.0 or newer
    client_version: str | None = None
    #: simulated processing time per record
    processing_delay_ms: Annotated[float, Field(ge=0)] = 0.0
    #: client lane (its own proxies): one lane per member lets it be cut off alone
    lane: str = "lane0"
    #: how long the client waits for one answer (librdkafka ``socket.timeout.ms``); None: the client's default
    request_timeout_ms: Annotated[int, Field(ge=1000, le=300000)] | None = None
    #: ``max.poll.records``: at most this many records per poll (librdkafka asks the broker to acquire no more per
    #: ShareFetch; best effort); None: the client's default (500)
    max_records: Annotated[int, Field(ge=1, le=10000)] | None = None
    #: deliberately wrong on purpose (:class:`ShareWrongMode`); None: the reference behaviour
    wrong_mode: ShareWrongMode | None = None
    #: renew the lock of every record acquired as soon as poll returns it (``AcknowledgeType.RENEW``, KIP-1222: the
    #: leader restarts it), process it when the client hands it back from a later poll, and renew again what could
    #: not be begun in time, at most three times in a row per record; java only (confluent-kafka's
    #: ``AcknowledgeType`` has no RENEW)
    renew_locks: bool = False

    # what the run lifecycle asks of every member: a share member is kafka-chaos's own loop, never the application's
    @property
    def command(self) -> None:
        return None

    @property
    def application(self) -> bool:
        return False

    @property
    def reports_processed(self) -> bool:
        return False

    @model_validator(mode="after")
    def _check(self) -> ShareMemberSpec:
        if self.client not in SHARE_CLIENTS:
            raise ValueError(f"client {self.client.value}: share-group members run confluent-kafka's ShareConsumer "
                             "or Kafka's KafkaShareConsumer (java); kafka-python has no share consumer: use "
                             "confluent-kafka or java")
        if self.client is Client.JAVA and self.wrong_mode is not None:
            raise ValueError("wrong_mode: the wrong share consumers are the Python member's; use client "
                             "confluent-kafka for a wrong member")
        if self.renew_locks and self.client is not Client.JAVA:
            raise ValueError(f"renew_locks: {self.client.value}'s share consumer cannot renew a lock (its "
                             "AcknowledgeType has no RENEW, KIP-1222); use client java")
        if self.wrong_mode is ShareWrongMode.PROCESS_PAST_LOCK and not self.processing_delay_ms:
            raise ValueError("wrong_mode process_past_lock needs processing time to run past the lock: set "
                             "processing_delay_ms")
        if self.client_version is not None:
            parse_client_release(f"{self.client.value}={self.client_version}")
            least = JAVA_SHARE_CONSUMER if self.client is Client.JAVA else CONFLUENT_SHARE_CONSUMER
            if release(self.client_version) < least:
                first = ".".join(map(str, least))
                what = "kafka-clients" if self.client is Client.JAVA else "confluent-kafka"
                raise ValueError(f"{what} {self.client_version} has no ShareConsumer as the member uses it (from "
                                 f"{first}): use {first} or newer")
        return self


def _default_members() -> tuple[ShareMemberSpec, ...]:
    return (ShareMemberSpec(), ShareMemberSpec(), ShareMemberSpec())


class ShareGroupSpec(_Frozen):
    """The share group under test: its members and its group configs (KIP-932)."""

    members: Annotated[tuple[ShareMemberSpec, ...], Field(min_length=1, max_length=MAX_CONSUMERS)] = Field(
        default_factory=_default_members)
    #: ``share.record.lock.duration.ms``: how long an acquired record stays with its member unacknowledged
    record_lock_duration_ms: Annotated[int, Field(ge=1000, le=60000)] = 10000
    #: ``share.delivery.count.limit``: deliveries of a record before it is archived (Kafka allows 2..10); a group
    #: config from Kafka 4.3 (:data:`GROUP_DELIVERY_LIMIT_RELEASE`), so only the default 5 on 4.2
    delivery_count_limit: Annotated[int, Field(ge=2, le=10)] = KAFKA_DELIVERY_COUNT_LIMIT
    #: ``share.session.timeout.ms``: a member without a heartbeat for this long is removed from the group
    session_timeout_ms: Annotated[int, Field(ge=500, le=60000)] = 6000
    #: ``share.heartbeat.interval.ms``
    heartbeat_interval_ms: Annotated[int, Field(ge=100, le=15000)] = 1000

    @model_validator(mode="after")
    def _check(self) -> ShareGroupSpec:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("share.heartbeat_interval_ms must be below share.session_timeout_ms (a third of it is "
                             "usual)")
        return self

    def group_configs(self, kafka_release: tuple[int, int]) -> dict[str, str]:
        """The group configs set on the GROUP resource (IncrementalAlterConfigs) before the members start, on a
        cluster of Kafka ``kafka_release`` (major, minor). ``share.auto.offset.reset`` is ``earliest``: a share
        group starts at the latest offset by default (``GroupConfig.SHARE_AUTO_OFFSET_RESET_DEFAULT``), and records
        produced before the first member joined would never be delivered. ``share.delivery.count.limit`` only where
        Kafka has it (:data:`GROUP_DELIVERY_LIMIT_RELEASE`; the experiment refuses another limit below)."""
        configs = {"share.record.lock.duration.ms": str(self.record_lock_duration_ms),
                   "share.session.timeout.ms": str(self.session_timeout_ms),
                   "share.heartbeat.interval.ms": str(self.heartbeat_interval_ms),
                   "share.auto.offset.reset": "earliest"}
        if kafka_release >= GROUP_DELIVERY_LIMIT_RELEASE:
            configs["share.delivery.count.limit"] = str(self.delivery_count_limit)
        return configs

