"""confluent-kafka (librdkafka) behind :class:`chaos.workload.consumer.ClientAdapter`.

Generation and member id — the authoritative way for this library:
``Consumer.consumer_group_metadata()`` serializes librdkafka's own
``rd_kafka_consumer_group_metadata_t`` (the object KIP-447 transactional
producers send with their offsets). Its layout is ``"CGMDv2:"``, the int32
generation id in host byte order, then the NUL-terminated group id and member
id. That is the generation librdkafka stamps on its OffsetCommit requests, so
it is what a commit event must carry. ``Consumer.memberid()`` agrees on the
member id.

Assignors: librdkafka implements ``range``, ``roundrobin`` and
``cooperative-sticky`` (KIP-429); it has no eager ``sticky`` assignor.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from chaos.model.workload import Assignor, Client, CommitMode, RebalanceProtocol
from chaos.outcome import Outcome
from chaos.workload.consumer import Callbacks, CommitResult, FatalClientError, Record, classify_commit
from chaos.workload.spec import WorkerConfig

_MAGIC = b"CGMDv2:"


def parse_group_metadata(raw: bytes) -> tuple[int | None, str | None]:
    """(generation, member id) from librdkafka's serialized consumer group metadata."""
    if not raw.startswith(_MAGIC) or len(raw) < len(_MAGIC) + 4:
        return None, None
    (generation,) = struct.unpack_from("=i", raw, len(_MAGIC))
    fields = raw[len(_MAGIC) + 4:].split(b"\x00")
    member = fields[1].decode(errors="replace") if len(fields) > 1 else ""
    return (generation if generation >= 0 else None), (member or None)


class ConfluentClient:
    name = Client.CONFLUENT_KAFKA.value
    version = f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"

    def __init__(self, cfg: WorkerConfig):
        spec = cfg.consumer
        assert spec is not None
        if spec.assignor is Assignor.STICKY:
            raise ValueError("confluent-kafka has no eager 'sticky' assignor: use cooperative-sticky, "
                             "or client kafka-python/java")
        self.spec = spec
        self._callbacks: Callbacks | None = None
        self._fatal: KafkaError | None = None
        self._pending: deque[tuple[frozenset, Callable[[CommitResult], None]]] = deque()
        conf = {
            "bootstrap.servers": cfg.bootstrap,
            "group.id": cfg.group,
            "client.id": cfg.name,
            "session.timeout.ms": spec.session_timeout_ms,
            "heartbeat.interval.ms": spec.heartbeat_interval_ms,
            "max.poll.interval.ms": spec.max_poll_interval_ms,
            "partition.assignment.strategy": spec.assignor.value,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": spec.commit_mode is CommitMode.AUTO,
            "auto.commit.interval.ms": spec.auto_commit_interval_ms,
            "reconnect.backoff.max.ms": 1000,
            "on_commit": self._on_commit,
            "error_cb": self._report_error_cb,
            "log_level": 3,
        }
        if spec.instance_id:
            conf["group.instance.id"] = spec.instance_id
        self._consumer = Consumer(conf)

    # librdkafka calls these from inside poll()/close() on this thread
    def _tps(self, partitions: list[TopicPartition]) -> list[tuple[str, int]]:
        return [(p.topic, p.partition) for p in partitions]

    def _report_error_cb(self, err: KafkaError) -> None:
        # global client errors (brokers down, fencing); a fatal one ends the member at the next poll
        if self._callbacks is not None:
            self._callbacks.error(err.str(), err.code(), err.name(), err.fatal())
        # librdkafka reports a fatal error to error_cb as code _FATAL (rd_kafka_fatal_error has the cause)
        if err.fatal() or err.code() == KafkaError._FATAL:
            self._fatal = err

    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        # called again with other topics, librdkafka replaces the subscription and rejoins the group
        self._callbacks = callbacks
        incremental = self.spec.protocol is RebalanceProtocol.COOPERATIVE
        self._consumer.subscribe(
            list(topics),
            on_assign=lambda c, ps: callbacks.assigned(self._tps(ps), incremental),
            on_revoke=lambda c, ps: callbacks.revoked(self._tps(ps), incremental),
            on_lost=lambda c, ps: callbacks.lost(self._tps(ps)),
        )

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        if self._fatal is not None:
            raise FatalClientError(f"{self._fatal.name()}: {self._fatal.str()}")
        out = []
        for msg in self._consumer.consume(max_records, timeout):
            err = msg.error()
            if err is not None:
                self._report(err)
                continue
            out.append(Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
        return out

    def _report(self, err: KafkaError) -> None:
        """Record a client error; a fatal one (e.g. _FENCED for a duplicate group.instance.id,
        KIP-345) ends the member."""
        if self._callbacks is not None and err.code() != KafkaError._PARTITION_EOF:
            self._callbacks.error(err.str(), err.code(), err.name(), err.fatal())
        # a consumed message can carry the fatal state as code _FATAL with fatal() false (seen for
        # "Static consumer fenced"): the client will never deliver again, so the member ends
        if err.fatal() or err.code() == KafkaError._FATAL:
            self._fatal = err
            raise FatalClientError(f"{err.name()}: {err.str()}")

    def group_view(self) -> tuple[int | None, str | None]:
        try:
            return parse_group_metadata(self._consumer.consumer_group_metadata())
        except KafkaException:
            return None, None

    def commit_sync(self, offsets: list[tuple[str, int, int]]) -> CommitResult:
        try:
            result = self._consumer.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets],
                                           asynchronous=False)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            return classify_commit(err.code(), err.name())
        for tp in result or []:
            if tp.error is not None:
                return classify_commit(tp.error.code(), tp.error.name())
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets: list[tuple[str, int, int]], done: Callable[[CommitResult], None]) -> None:
        key = frozenset(offsets)
        self._pending.append((key, done))
        try:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=True)
        except KafkaException as exc:
            self._pending.pop()
            err: KafkaError = exc.args[0]
            done(classify_commit(err.code(), err.name()))

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        offsets = [(p.topic, p.partition, p.offset) for p in partitions or [] if p.offset >= 0]
        if err is not None:
            result = classify_commit(err.code(), err.name())
        else:
            bad = next((p.error for p in partitions or [] if p.error is not None), None)
            result = classify_commit(bad.code(), bad.name()) if bad is not None else CommitResult(Outcome.OK)
        if self.spec.commit_mode is CommitMode.AUTO:
            if self._callbacks is not None and (offsets or err is not None) and not (
                    err is not None and err.code() == KafkaError._NO_OFFSET):
                self._callbacks.auto_committed(offsets, result)
            return
        key = frozenset(offsets)
        for i, (pending_key, done) in enumerate(self._pending):
            if pending_key == key or (err is not None and not offsets):
                del self._pending[i]
                done(result)
                return

    def close(self) -> None:
        self._consumer.close()
        # async commits never answered are unknown, never assumed
        while self._pending:
            _, done = self._pending.popleft()
            done(CommitResult(Outcome.UNKNOWN, None, "_NO_COMMIT_CALLBACK"))
