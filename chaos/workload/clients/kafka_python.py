"""kafka-python (pure Python) behind :class:`chaos.workload.consumer.ClientAdapter`.

Generation and member id — the authoritative way for this library (2.2.15):
the consumer's ``ConsumerCoordinator`` (``KafkaConsumer._coordinator``) keeps a
``Generation(generation_id, member_id, protocol)`` in ``_generation``
(``kafka/coordinator/base.py``: set from the JoinGroup response in
``_handle_join_group_response``, reset to ``DEFAULT_GENERATION_ID`` (-1) by
``reset_generation``). ``ConsumerCoordinator._send_offset_commit_request``
(``kafka/coordinator/consumer.py``) stamps ``generation_if_stable()`` — that same
object, but only while the member state is ``STABLE`` — on every OffsetCommit
(v2+); while not stable it fails the commit locally (``RebalanceInProgressError``
/ ``CommitFailedError``) and sends nothing. :meth:`KafkaPythonClient.group_view`
therefore reads ``_generation`` under the coordinator's lock: it is the
generation the rebalance callbacks belong to (``_on_join_prepare`` and
``_on_join_complete`` run with it) and the one any commit sent now carries.
(``coordinator.generation()`` is deprecated and returns ``None`` outside
``STABLE``, which would hide the generation inside callbacks.)

Auto-commit: kafka-python commits ``all_consumed_offsets()`` (the positions of
earlier polls) on its own timer inside ``poll`` (``_maybe_auto_commit_offsets_async``),
synchronously before a rebalance (``_on_join_prepare``) and on close. All three
paths go through ``_send_offset_commit_request``; in ``auto`` commit mode this
adapter wraps that method on the coordinator instance, capturing the generation
at the moment of sending and reporting each attempt's result to
``Callbacks.auto_committed`` (with :meth:`group_view` pinned to the sent
generation while the callback runs; it may run on the heartbeat thread).

Not supported by kafka-python 2.2.15 (rejected with ``ValueError``):
``cooperative-sticky`` (no KIP-429 incremental protocol) and static membership
(no ``group_instance_id`` config, KIP-345). There is no ``on_partitions_lost``
either: a member that falls out of the group only sees ``on_partitions_revoked``
at its next rejoin (eager protocol).

Client log: with a :class:`chaos.workload.clients.client_log.ClientLog` the ``kafka`` loggers go to
the member's client log — ``kafka.coordinator`` at DEBUG (JoinGroup/SyncGroup sent and answered,
heartbeats and their failures, generation resets), the rest of ``kafka`` at INFO (connections
and disconnects, offset resets).

Closing: ``KafkaConsumer.close`` leaves the group without calling
``on_partitions_revoked``; :meth:`close` reports the revocation itself first so
that the member commits what it processed (as the Java client's
``onLeavePrepare`` does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import kafka
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import KafkaError

from chaos.model.workload import Assignor, Client, CommitMode
from chaos.outcome import Outcome
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.consumer import Callbacks, CommitResult, Record, classify_commit
from chaos.workload.spec import WorkerConfig

_ASSIGNORS = {
    Assignor.RANGE: RangePartitionAssignor,
    Assignor.ROUNDROBIN: RoundRobinPartitionAssignor,
    Assignor.STICKY: StickyPartitionAssignor,
}

#: how long a synchronous commit may retry retriable errors before it is ``unknown``
COMMIT_TIMEOUT_MS = 10_000


def commit_error(exc: BaseException) -> CommitResult:
    """Classify a kafka-python commit failure.

    ``CommitFailedError`` wraps the coordinator's answer
    (``CommitFailedError(IllegalGenerationError())``, see
    ``_handle_offset_commit_response``); the wrapped error is the more precise one.
    Errors are sometimes passed as classes (``Future().failure(Errors.X)``).
    """
    if isinstance(exc, type):
        exc = exc()
    inner = exc.args[0] if exc.args else None
    if isinstance(inner, type) and issubclass(inner, KafkaError):
        inner = inner()
    if isinstance(exc, kafka.errors.CommitFailedError) and isinstance(inner, KafkaError):
        exc = inner
    code = getattr(exc, "errno", None)
    return classify_commit(code, type(exc).__name__)


def keep_logs(log: ClientLog) -> None:
    """Send kafka-python's loggers to ``log`` (module docstring); one member per worker process."""
    root = logging.getLogger("kafka")
    root.setLevel(logging.INFO)
    root.propagate = False  # the client log only, not the worker's stderr
    root.addHandler(log.handler())
    logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, callbacks: Callbacks):
        self.callbacks = callbacks

    def on_partitions_revoked(self, revoked):
        if revoked:  # kafka-python also calls it with an empty set before the first join
            self.callbacks.revoked(sorted((tp.topic, tp.partition) for tp in revoked), False)

    def on_partitions_assigned(self, assigned):
        self.callbacks.assigned(sorted((tp.topic, tp.partition) for tp in assigned), False)


class KafkaPythonClient:
    name = Client.KAFKA_PYTHON.value
    version = kafka.__version__

    def __init__(self, cfg: WorkerConfig, log: ClientLog | None = None):
        spec = cfg.consumer
        assert spec is not None
        if log is not None:
            keep_logs(log)
        if spec.assignor is Assignor.COOPERATIVE_STICKY:
            raise ValueError("kafka-python has no cooperative-sticky assignor (no KIP-429): "
                             "use range, roundrobin or sticky, or client confluent-kafka/java")
        if spec.instance_id:
            raise ValueError("kafka-python 2.2.15 has no static membership (no group_instance_id, KIP-345): "
                             "drop instance_id or use client confluent-kafka/java")
        self.spec = spec
        self._callbacks: Callbacks | None = None
        self._pinned = threading.local()
        self._consumer = KafkaConsumer(
            bootstrap_servers=cfg.bootstrap.split(","),
            group_id=cfg.group,
            client_id=cfg.name,
            session_timeout_ms=spec.session_timeout_ms,
            heartbeat_interval_ms=spec.heartbeat_interval_ms,
            max_poll_interval_ms=spec.max_poll_interval_ms,
            partition_assignment_strategy=(_ASSIGNORS[spec.assignor],),
            auto_offset_reset="earliest",
            enable_auto_commit=spec.commit_mode is CommitMode.AUTO,
            auto_commit_interval_ms=spec.auto_commit_interval_ms,
            max_poll_records=spec.max_records,
            reconnect_backoff_max_ms=1000,
            **({"metadata_max_age_ms": spec.metadata_max_age_ms} if spec.metadata_max_age_ms is not None else {}),
        )
        self._coordinator = self._consumer._coordinator
        if spec.commit_mode is CommitMode.AUTO:
            self._hook_auto_commits()

    # ------------------------------------------------------------ auto-commit hook
    def _hook_auto_commits(self) -> None:
        coordinator = self._coordinator
        send = coordinator._send_offset_commit_request

        def recorded_send(offsets):
            future = send(offsets)
            if not offsets:
                return future
            generation = coordinator.generation_if_stable()
            view = (None, None) if generation is None else _view(generation)
            tpos = sorted((tp.topic, tp.partition, om.offset) for tp, om in offsets.items())

            def report(result: CommitResult) -> None:
                if self._callbacks is None:
                    return
                self._pinned.view = view
                try:
                    self._callbacks.auto_committed(tpos, result)
                finally:
                    self._pinned.view = None

            future.add_callback(lambda _: report(CommitResult(Outcome.OK)))
            future.add_errback(lambda exc: report(commit_error(exc)))
            return future

        coordinator._send_offset_commit_request = recorded_send

    # ------------------------------------------------------------ ClientAdapter
    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        # called again with other topics, the coordinator's metadata changes and the member rejoins
        self._callbacks = callbacks
        self._consumer.subscribe(list(topics), listener=_Listener(callbacks))

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        batches = self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        out = []
        for tp in sorted(batches, key=lambda tp: (tp.topic, tp.partition)):
            for msg in batches[tp]:
                out.append(Record(msg.topic, msg.partition, msg.offset, msg.key, msg.value))
        return out

    def group_view(self) -> tuple[int | None, str | None]:
        pinned = getattr(self._pinned, "view", None)
        if pinned is not None:
            return pinned
        with self._coordinator._lock:
            return _view(self._coordinator._generation)

    def commit_sync(self, offsets: list[tuple[str, int, int]]) -> CommitResult:
        try:
            self._consumer.commit(offsets=_offsets(offsets), timeout_ms=COMMIT_TIMEOUT_MS)
        except KafkaError as exc:
            return commit_error(exc)
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets: list[tuple[str, int, int]], done: Callable[[CommitResult], None]) -> None:
        def callback(_offsets, res_or_exc):
            # kafka-python calls it from poll()/commit*() on this thread
            done(commit_error(res_or_exc) if isinstance(res_or_exc, BaseException)
                 or (isinstance(res_or_exc, type) and issubclass(res_or_exc, BaseException))
                 else CommitResult(Outcome.OK))

        try:
            self._consumer.commit_async(offsets=_offsets(offsets), callback=callback)
        except KafkaError as exc:
            done(commit_error(exc))

    def close(self) -> None:
        if self.spec.commit_mode is CommitMode.AUTO:
            # what close(autocommit=True) would do, but before the revocation is reported
            self._coordinator._maybe_auto_commit_offsets_sync(timeout_ms=COMMIT_TIMEOUT_MS)
        owned = sorted((tp.topic, tp.partition) for tp in self._consumer.assignment())
        if owned and self._callbacks is not None and self._coordinator._generation.is_valid:
            self._callbacks.revoked(owned, False)
        self._consumer.close(autocommit=False, timeout_ms=COMMIT_TIMEOUT_MS)


def _view(generation) -> tuple[int | None, str | None]:
    gen = generation.generation_id
    return (gen if gen >= 0 else None), (generation.member_id or None)


def _offsets(offsets: list[tuple[str, int, int]]) -> dict[TopicPartition, OffsetAndMetadata]:
    # leader_epoch -1: unknown (OffsetCommit v6+ sends it; -1 disables the broker's epoch check)
    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for t, p, o in offsets}
