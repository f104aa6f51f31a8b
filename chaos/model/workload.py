"""The workload half of an experiment: group members, producers, and the client enums they use.

Pure records (no Kafka client is imported here): what each member and producer
of a run does, validated when an experiment is loaded. :mod:`chaos.workload`
turns them into worker processes.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

# the client and count records live in their own modules (share-group members use them too); imported here, where
# every consumer-group reader has always found them
from chaos.model.clients import CLIENT_RELEASES, PYPI_PACKAGES, Client, ClientReleases, parse_client_release, release
from chaos.model.limits import MAX_CONSUMERS, MAX_PARTITIONS, MAX_PRODUCERS
from chaos.model.share import ShareGroupSpec

__all__ = ["CLIENT_RELEASES", "MAX_CONSUMERS", "MAX_PARTITIONS", "MAX_PRODUCERS", "PYPI_PACKAGES", "Client",
           "ClientReleases", "ShareGroupSpec", "parse_client_release", "release"]


class Assignor(StrEnum):
    RANGE = "range"
    ROUNDROBIN = "roundrobin"
    STICKY = "sticky"
    COOPERATIVE_STICKY = "cooperative-sticky"


class RebalanceProtocol(StrEnum):
    EAGER = "eager"
    COOPERATIVE = "cooperative"  # KIP-429 incremental cooperative rebalancing


class GroupProtocol(StrEnum):
    """The consumer group protocol (``group.protocol``).

    ``classic``: JoinGroup/SyncGroup, the group leader assigns, one generation for the whole group.
    ``consumer``: KIP-848 (GA in Kafka 4.0): members heartbeat (ConsumerGroupHeartbeat), the
    coordinator assigns (``remote_assignor``), and members reconcile towards their target assignment
    by epochs — group epoch, assignment epoch, and each member's own epoch.
    """

    CLASSIC = "classic"
    CONSUMER = "consumer"


class RemoteAssignor(StrEnum):
    """The server-side assignors of KIP-848 (``group.remote.assignor``; broker ``group.consumer.assignors``)."""

    UNIFORM = "uniform"
    RANGE = "range"


class CommitMode(StrEnum):
    SYNC = "sync"
    ASYNC = "async"
    AUTO = "auto"


class WrongMode(StrEnum):
    """Deliberately wrong consumers a checker must catch (docs/architecture.md, "Invariants")."""

    COMMIT_BEFORE_PROCESS = "commit_before_process"
    IGNORE_REVOKE = "ignore_revoke"
    SKIP_RECORDS = "skip_records"


class HandlerErrorPolicy(StrEnum):
    """What a member does when the user's handler raises on a record (``on_handler_error``).

    - ``stop`` (default): the member records an ``error`` event (``fatal`` true, the exception text; the
      traceback goes to ``workers/<member>.traceback.txt``) and ``member_stop`` clean=false, and exits
      without leaving the group (the coordinator evicts it after ``session.timeout.ms``), like an
      application whose poll loop lets the exception escape. Records it had processed before are
      recorded as consumed, the failing one is not, and nothing past the last commit is committed.
    - ``skip``: the member records an ``error`` event (``fatal`` false, the exception text) and counts
      the record as processed (it is consumed and committed past, like a dead-letter-less "log and go on").
    - ``retry``: the handler is called again up to :data:`HANDLER_RETRIES` more times, waiting
      :data:`HANDLER_RETRY_BACKOFF_S` doubled each time (0.1, 0.2, 0.4 s: 0.7 s at most, well inside
      ``max.poll.interval.ms``); each failed attempt is an ``error`` event (``fatal`` false); when the last
      attempt fails too, the member behaves as with ``stop``.
    """

    STOP = "stop"
    SKIP = "skip"
    RETRY = "retry"



#: extra attempts of a record under ``on_handler_error: retry``
HANDLER_RETRIES = 3
#: the first wait between two attempts (doubled after each)
HANDLER_RETRY_BACKOFF_S = 0.1


#: ``app:`` references: a dotted module path, a colon, a function name
_APP_REF = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*")
#: ConsumerSpec fields that drive kafka-chaos's own loop and mean nothing to an application member
_OWN_LOOP_FIELDS = ("commit_mode", "auto_commit_interval_ms", "processing_delay_ms", "max_records", "process_chunk",
                    "wrong_mode", "skip_every", "on_handler_error", "metadata_max_age_ms")
#: What an ``app`` / ``command`` member process is given in its environment (docs/architecture.md, "Members that
#: are the application"): where to connect, what to consume, and what the experiment declares about it.
MEMBER_ENV = {
    "KAFKA_BOOTSTRAP_SERVERS": "the member's lane: bootstrap servers through its own Toxiproxy proxies",
    "KAFKA_GROUP_ID": "the group under test",
    "KAFKA_TOPIC": "the topic the producers write",
    "KAFKA_CLIENT_ID": "the member's name (consumer-N): set it as client.id so the coordinator's evidence names it",
    "KAFKA_SESSION_TIMEOUT_MS": "session_timeout_ms of the spec (what faults and checkers assume)",
    "KAFKA_HEARTBEAT_INTERVAL_MS": "heartbeat_interval_ms of the spec",
    "KAFKA_MAX_POLL_INTERVAL_MS": "max_poll_interval_ms of the spec",
    "KAFKA_GROUP_PROTOCOL": "classic or consumer (KIP-848)",
    "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "the spec's assignor (classic protocol)",
    "KAFKA_GROUP_INSTANCE_ID": "the spec's instance_id (KIP-345), when it has one",
    "KAFKA_CHAOS_EVENTS": "optional: where the member may write events (app: the instrumented consumer does; "
                          "command: lines of the kafka-chaos ConsumerInterceptor)",
    "KAFKA_CHAOS_OUTPUT_TOPIC": "command members with reports_processed: the topic to report each processed record "
                                "on (key: $KAFKA_CLIENT_ID; value: JSON {\"partition\": P, \"offset\": O})",
    "KAFKA_CHAOS_INTERCEPTOR_JAR": "command members: the RecordingConsumerInterceptor jar, for a JVM application's "
                                   "classpath (interceptor.classes=io.kafkachaos.interceptor.RecordingConsumerInterceptor)",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class ConsumerSpec(_Frozen):
    """One member of the group under test."""

    client: Client = Client.CONFLUENT_KAFKA
    #: the client library's release (issue 34): confluent-kafka / kafka-python from PyPI, for ``java`` the
    #: kafka-clients and VerifiableConsumer of that Kafka release from Maven Central, prepared into the cache
    #: (:mod:`chaos.workload.libraries`); None = the default (the project's pinned Python clients, the broker's
    #: own release for Java)
    client_version: str | None = None
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
    #: what the member does when the user's handler raises on a record (see HandlerErrorPolicy)
    on_handler_error: HandlerErrorPolicy = HandlerErrorPolicy.STOP
    #: how often the member refreshes topic metadata (librdkafka ``topic.metadata.refresh.interval.ms``, Java and
    #: kafka-python ``metadata.max.age.ms``); None = the client's default (5 min). A member notices partitions
    #: added to its topic only at a refresh, so an experiment that grows a topic must lower it
    metadata_max_age_ms: Annotated[int, Field(ge=500)] | None = None
    #: how long the member's client waits for the answer to one request before it gives up on it (librdkafka
    #: ``socket.timeout.ms``, Java and kafka-python ``request.timeout.ms``); None = the client's default (60 s,
    #: 30 s, 30 s). An answer lost on the wire (an ``rpc`` fault's ``drop_request`` / ``drop_response``) holds
    #: the member that long, so an experiment losing one must lower it to see the member recover in its run
    request_timeout_ms: Annotated[int, Field(ge=1000, le=300000)] | None = None
    #: classic, or KIP-848's consumer protocol (needs a KRaft cluster of Kafka 4.x or 3.7+ with it enabled)
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC
    #: KIP-848 only: the coordinator's assignor; None = the broker's default (uniform)
    remote_assignor: RemoteAssignor | None = None
    #: white box (issue 14): ``"package.module:function"`` — the application's own consumer loop, called with no
    #: arguments in the member process, its ``confluent_kafka.Consumer`` instrumented (:mod:`chaos.instrument`);
    #: configured by the environment (:data:`MEMBER_ENV`). None = kafka-chaos's own loop
    app: str | None = None
    #: black box (issue 14): the member is this program (argv), started as its own process and configured by the
    #: environment (:data:`MEMBER_ENV`); judged from coordinator evidence and, where it writes them, interceptor lines
    command: tuple[str, ...] | None = None
    #: extra environment of an ``app`` or ``command`` member (on top of kafka-chaos's own and the driver's)
    env: dict[str, str] = Field(default_factory=dict)
    #: working directory of an ``app`` or ``command`` member; in an experiment file relative to the file's directory,
    #: which is also the default (elsewhere: the driver's)
    cwd: str | None = None
    #: ``command`` members only: the program reports every record it processed on the output topic named by
    #: ``$KAFKA_CHAOS_OUTPUT_TOPIC`` (:mod:`chaos.workload.processed_reports`), which kafka-chaos reads at the end of
    #: the run as the member's ``consumed`` events (a member that reports nothing leaves delivery ``unknown``)
    reports_processed: bool = False

    @model_validator(mode="after")
    def _check(self) -> ConsumerSpec:
        self._check_application()
        self._check_client_version()
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
            raise ValueError("the kafka-python worker has no cooperative-sticky assignor (KIP-429) wired yet: use client "
                             "confluent-kafka or java")
        if self.client is Client.KAFKA_PYTHON and self.instance_id:
            raise ValueError("the kafka-python worker has no static membership (group_instance_id, KIP-345) wired yet: "
                             "use client confluent-kafka or java")
        if self.group_protocol is GroupProtocol.CONSUMER:
            if self.client is Client.KAFKA_PYTHON:
                raise ValueError("kafka-python has no KIP-848 consumer protocol: use client confluent-kafka or java, "
                                 "or group_protocol: classic")
            if self.assignor is not Assignor.RANGE:
                raise ValueError(f"assignor {self.assignor.value} is a client-side (classic) assignor; under "
                                 "group_protocol: consumer the coordinator assigns: set remote_assignor (uniform, range)")
        elif self.remote_assignor is not None:
            raise ValueError("remote_assignor applies to group_protocol: consumer only (KIP-848); under classic set "
                             "assignor")
        if self.client is Client.JAVA:
            if self.commit_mode is not CommitMode.SYNC:
                raise ValueError("the Java VerifiableConsumer commits synchronously after each poll only: "
                                 "use commit_mode sync")
            if self.wrong_mode is not None:
                raise ValueError("the Java VerifiableConsumer has no wrong_mode: "
                                 "use a Python client for checker validation")
            if self.processing_delay_ms:
                raise ValueError("the Java VerifiableConsumer has no processing delay: "
                                 "use a Python client for slow consumers")
            if self.on_handler_error is not HandlerErrorPolicy.STOP:
                raise ValueError("the Java VerifiableConsumer runs no handler, so on_handler_error does not apply: "
                                 "use a Python client (confluent-kafka, kafka-python) for a handler")
        return self

    def _check_client_version(self) -> None:
        """A release the worker cannot run, or one too old for the member's group protocol, is refused here;
        one that does not exist or does not install is refused when it is prepared, before any cluster."""
        if self.client_version is None:
            return
        if self.command is not None:
            raise ValueError("client_version does not apply to a command member: the program brings its own client")
        parse_client_release(f"{self.client.value}={self.client_version}")
        have, rules = release(self.client_version), CLIENT_RELEASES[self.client]
        if self.client is Client.KAFKA_PYTHON and have < (3, 0, 0):
            # kafka-python 2.x's KafkaConsumer refuses both (its config check; StickyPartitionAssignor came in 2.0.2)
            if self.request_timeout_ms is not None and self.request_timeout_ms <= self.session_timeout_ms:
                raise ValueError(f"kafka-python {self.client_version} needs request_timeout_ms above "
                                 f"session_timeout_ms ({self.session_timeout_ms}): raise it, or use kafka-python 3")
            if self.assignor is Assignor.STICKY and have < (2, 0, 2):
                raise ValueError(f"kafka-python {self.client_version} has no sticky assignor (from 2.0.2): use range "
                                 "or roundrobin, or a newer release")
        if self.group_protocol is GroupProtocol.CONSUMER and rules.kip848 is not None and have < rules.kip848:
            first = ".".join(map(str, rules.kip848))
            raise ValueError(f"{self.client.value} {self.client_version} has no generally available KIP-848 consumer "
                             f"protocol (from {first}): use {first} or newer, or group_protocol: classic")

    def _check_application(self) -> None:
        """An ``app`` or ``command`` member runs the application's loop, not ours: the fields that drive our loop
        would be silently ignored, so they are refused; the ones that describe the member to faults and checkers
        (timeouts, protocol, instance id, assignor, lane) are passed to it in :data:`MEMBER_ENV`."""
        if self.reports_processed and self.command is None:
            raise ValueError("reports_processed applies to command members only (an app member's instrumented consumer "
                             "records what it processed; kafka-chaos's own members do too): drop it or give a command")
        if self.app is None and self.command is None:
            if self.env or self.cwd is not None:
                raise ValueError("env and cwd apply to app or command members only (the application's process)")
            return
        if self.app is not None and self.command is not None:
            raise ValueError("give app (a Python function, white box) or command (any program, black box), not both")
        if self.app is not None and not _APP_REF.fullmatch(self.app):
            raise ValueError(f"app {self.app!r} is not 'package.module:function' (e.g. my_service.main:run)")
        if self.command is not None and (not self.command or not self.command[0]):
            raise ValueError("command is an empty list: give the program and its arguments, e.g. [java, -jar, app.jar]")
        what = "app" if self.app is not None else "command"
        article = "an" if self.app is not None else "a"
        if self.client is not Client.CONFLUENT_KAFKA:
            raise ValueError(f"client {self.client.value} does not apply to {article} {what} member: the application brings "
                             "its own client (app members: confluent_kafka.Consumer or kafka-python's KafkaConsumer, "
                             "both instrumented)")
        ours = {name: value for name in _OWN_LOOP_FIELDS
                if (value := getattr(self, name)) != ConsumerSpec.model_fields[name].default}
        if ours:
            raise ValueError(f"{', '.join(sorted(ours))}: settings of kafka-chaos's own consumer loop, which "
                             f"{article} {what} member does not run: drop them (the application commits, processes "
                             "and handles errors itself)")

    @property
    def application(self) -> bool:
        """The member runs the application's own code (``app`` or ``command``), not kafka-chaos's loop."""
        return self.app is not None or self.command is not None

    @property
    def protocol(self) -> RebalanceProtocol:
        """Cooperative for cooperative-sticky (KIP-429) and for KIP-848 (which revokes only what moves, before it
        reassigns it), eager for every other assignor."""
        if self.group_protocol is GroupProtocol.CONSUMER or self.assignor is Assignor.COOPERATIVE_STICKY:
            return RebalanceProtocol.COOPERATIVE
        return RebalanceProtocol.EAGER


class Partitioner(StrEnum):
    """The partitioners of a keyed producer (librdkafka ``partitioner``) that place a key as Kafka's Java
    producer does: ``toPositive(murmur2(keyBytes)) % numPartitions`` (``org.apache.kafka.common.utils.Utils``,
    ``BuiltInPartitioner.partitionForKey``). They differ only for null keys, which a keyed workload never sends:
    ``murmur2_random`` spreads them (the Java client's default), ``murmur2`` sends them all to one partition.
    librdkafka's own default, ``consistent_random`` (CRC32), is not offered: the key-placement checker
    judges the Java placement."""

    MURMUR2_RANDOM = "murmur2_random"
    MURMUR2 = "murmur2"


class ProducerSpec(_Frozen):
    """One producer writing unique, checkable values with acks=all and idempotence."""

    #: records per second (0 = as fast as possible)
    rate: Annotated[float, Field(ge=0)] = 200.0
    #: total records (None = until stopped)
    count: Annotated[int, Field(ge=1)] | None = None
    delivery_timeout_ms: Annotated[int, Field(ge=1000)] = 30000
    lane: str = "lane0"
    #: None: every record has its own key (its number; librdkafka's default partitioner spreads them), as before.
    #: N: a keyed workload — each record carries one of N keys ``k0..k<N-1>``, drawn from a generator seeded by
    #: the run's seed and the producer's name, placed by :attr:`partitioner` (judged by key-placement)
    keys: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    #: keyed producers only: how a key is placed (default murmur2_random, the Java producer's placement)
    partitioner: Partitioner | None = None

    @model_validator(mode="after")
    def _check_keys(self) -> ProducerSpec:
        if self.partitioner is not None and self.keys is None:
            raise ValueError("partitioner applies to keyed producers only: set keys: N (the number of keys) or "
                             "drop partitioner")
        return self

    @property
    def key_partitioner(self) -> Partitioner | None:
        """The partitioner a keyed producer uses (None for an unkeyed one)."""
        if self.keys is None:
            return None
        return self.partitioner or Partitioner.MURMUR2_RANDOM


class WorkloadSpec(BaseModel):
    """The workload half of an experiment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partitions: Annotated[int, Field(ge=1, le=MAX_PARTITIONS)] = 12
    replication: Annotated[int, Field(ge=1)] = 3
    #: (maxItems in the JSON Schema, for editors; refused with the reason by _bounded)
    consumers: Annotated[tuple[ConsumerSpec, ...], Field(max_length=MAX_CONSUMERS)] = (
        ConsumerSpec(), ConsumerSpec(), ConsumerSpec())
    producers: Annotated[tuple[ProducerSpec, ...], Field(max_length=MAX_PRODUCERS)] = (ProducerSpec(),)
    observer_interval_ms: Annotated[int, Field(ge=10, le=5000)] = 100
    #: a share group (KIP-932) instead of a consumer group: its members and settings (:mod:`chaos.model.share`);
    #: ``consumers`` is then empty (given as ``[]`` or left out)
    share: ShareGroupSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _share_has_no_consumers(cls, data: Any) -> Any:
        # one group per run: a share workload's default consumers would be a second group nobody asked for
        if isinstance(data, dict) and data.get("share") is not None and "consumers" not in data:
            return {**data, "consumers": ()}
        return data

    @field_validator("consumers", "producers", mode="before")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        # counted before each item is validated: 10,000 members are refused at once, not after 10,000 models
        limit, what = ((MAX_CONSUMERS, "members") if info.field_name == "consumers" else (MAX_PRODUCERS, "producers"))
        if isinstance(value, list | tuple) and len(value) > limit:
            raise ValueError(f"{len(value)} {what}: at most {limit} (each is a process of its own)")
        return value

    @model_validator(mode="after")
    def _one_assignor(self) -> WorkloadSpec:
        if self.share is not None and self.consumers:
            raise ValueError("a workload is a consumer group (consumers) or a share group (share), not both: give "
                             "consumers: [] with share, or drop share")
        if self.share is None and not self.consumers:
            raise ValueError("consumers is empty: give at least one member, or a share group (share)")
        # each member offers one assignor; members without a common one are refused by the
        # coordinator (INCONSISTENT_GROUP_PROTOCOL) and never join
        assignors = {c.assignor for c in self.consumers}
        if len(assignors) > 1:
            raise ValueError(f"consumers use different assignors {sorted(a.value for a in assignors)}: the group "
                             "needs a common one (the coordinator refuses the others with INCONSISTENT_GROUP_PROTOCOL)")
        # KIP-848: session timeout and heartbeat interval belong to the group (the coordinator's
        # consumer.session.timeout.ms / consumer.heartbeat.interval.ms group configs), not to a member
        kip848 = [c for c in self.consumers if c.group_protocol is GroupProtocol.CONSUMER]
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "remote_assignor"):
            values = {getattr(c, name) for c in kip848}
            if len(values) > 1:
                raise ValueError(f"consumers with group_protocol consumer use different {name} "
                                 f"{sorted(str(v) for v in values)}: under KIP-848 it is the group's setting, not a "
                                 "member's; give them one value")
        return self

    @property
    def member_count(self) -> int:
        """How many members the group has (``consumer-0`` .. ``consumer-{n-1}``), consumer or share group."""
        return len(self.share.members) if self.share is not None else len(self.consumers)

    @property
    def kip848_group_configs(self) -> dict[str, str]:
        """The group configs (IncrementalAlterConfigs on the GROUP resource, Kafka 4.0+) that give KIP-848 members
        the spec's session timeout and heartbeat interval; empty when no member uses the consumer protocol."""
        member = next((c for c in self.consumers if c.group_protocol is GroupProtocol.CONSUMER), None)
        if member is None:
            return {}
        return {"consumer.session.timeout.ms": str(member.session_timeout_ms),
                "consumer.heartbeat.interval.ms": str(member.heartbeat_interval_ms)}
