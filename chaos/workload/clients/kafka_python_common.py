"""What the two kafka-python adapters share: the 3.x one (:mod:`chaos.workload.clients.kafka_python`) and the
2.x one (:mod:`chaos.workload.clients.kafka_python2`).

Everything here imports and works on every kafka-python release a member may name (2.0.0 to 3.x): the worker
loads this module under whichever release its ``PYTHONPATH`` puts first, so it uses only names both lines
have (``KafkaConsumer``, ``OffsetAndMetadata``, ``TopicPartition``, the range and roundrobin assignors,
``kafka.errors``). What differs between the lines stays in the adapters: 3.x runs the group protocol on its
own IO thread (an async listener, coroutines), 2.x inside ``poll`` and a heartbeat thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import kafka
from kafka import OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import KafkaError

from chaos.model.workload import Assignor, CommitMode, ConsumerSpec
from chaos.outcome import Outcome
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.consumer import Callbacks, CommitResult, Record, classify_commit
from chaos.workload.spec import WorkerConfig


def _assignors() -> dict[Assignor, Any]:
    found: dict[Assignor, Any] = {Assignor.RANGE: RangePartitionAssignor, Assignor.ROUNDROBIN: RoundRobinPartitionAssignor}
    try:
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    except ImportError:  # kafka-python 2.0.0 has no sticky assignor
        return found
    found[Assignor.STICKY] = StickyPartitionAssignor
    return found


#: the eager assignors the imported release has (no sticky in 2.0.0); cooperative-sticky is not wired
_ASSIGNORS = _assignors()

#: how long a synchronous commit may retry retriable errors before it is ``unknown``
COMMIT_TIMEOUT_MS = 10_000

def commit_error(exc: BaseException | type[BaseException]) -> CommitResult:
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
    """Send kafka-python's loggers to ``log``: ``kafka.coordinator`` at DEBUG (JoinGroup/SyncGroup sent and
    answered, heartbeats and their failures, generation resets), the rest of ``kafka`` at INFO (connections and
    disconnects, offset resets); one member per worker process."""
    root = logging.getLogger("kafka")
    root.setLevel(logging.INFO)
    root.propagate = False  # the client log only, not the worker's stderr
    root.addHandler(log.handler())
    logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)


def refuse_unwired(spec: ConsumerSpec) -> None:
    """ValueError for what neither kafka-python adapter drives (the model refuses both at load time too)."""
    if spec.assignor is Assignor.COOPERATIVE_STICKY:
        raise ValueError("the kafka-python adapter does not support the cooperative-sticky assignor (KIP-429) "
                         "yet: use range, roundrobin or sticky, or client confluent-kafka/java")
    if spec.instance_id:
        raise ValueError("the kafka-python adapter does not support static membership (instance_id, KIP-345) "
                         "yet: drop instance_id or use client confluent-kafka/java")
    if spec.assignor not in _ASSIGNORS:
        raise ValueError(f"kafka-python {kafka.__version__} has no {spec.assignor.value} assignor: use range or "
                         "roundrobin, or a later release")


def consumer_config(cfg: WorkerConfig) -> dict[str, Any]:
    """``KafkaConsumer``'s configuration for the member ``cfg`` (the same keys on 2.x and 3.x)."""
    spec = cfg.consumer
    assert spec is not None
    return dict(
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
        **({"request_timeout_ms": spec.request_timeout_ms} if spec.request_timeout_ms is not None else {}),
    )


def records(batches: dict[Any, list[Any]]) -> list[Record]:
    """``KafkaConsumer.poll``'s answer as the member's records, in partition order."""
    out = []
    for tp in sorted(batches, key=lambda tp: (tp.topic, tp.partition)):
        for msg in batches[tp]:
            out.append(Record(msg.topic, msg.partition, msg.offset, msg.key, msg.value))
    return out


def commit_async(consumer: Any, offsets: list[tuple[str, int, int]], done: Callable[[CommitResult], None]) -> None:
    """``consumer.commit_async`` of ``offsets``, its answer classified for ``done``."""

    def callback(_offsets: Any, res_or_exc: Any) -> None:
        # kafka-python calls it from poll()/commit*() on the caller's thread
        done(commit_error(res_or_exc) if isinstance(res_or_exc, BaseException)
             or (isinstance(res_or_exc, type) and issubclass(res_or_exc, BaseException))
             else CommitResult(Outcome.OK))

    try:
        consumer.commit_async(offsets=_offsets(offsets), callback=callback)
    except KafkaError as exc:
        done(commit_error(exc))


class PinnedView:
    """The (generation, member id) an auto-commit attempt was sent with, which ``group_view`` answers while that
    attempt's ``Callbacks.auto_committed`` runs (on the thread running it; None elsewhere)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> tuple[int | None, str | None] | None:
        return getattr(self._local, "view", None)

    def report(self, callbacks: Callbacks | None, view: tuple[int | None, str | None],
               tpos: list[tuple[str, int, int]], result: CommitResult) -> None:
        if callbacks is None:
            return
        self._local.view = view
        try:
            callbacks.auto_committed(tpos, result)
        finally:
            self._local.view = None


def _tps(partitions: Any) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for tp in partitions)


def _tpos(offsets: dict[Any, Any]) -> list[tuple[str, int, int]]:
    """A commit's ``{TopicPartition: OffsetAndMetadata}`` as sorted (topic, partition, offset)."""
    return sorted((tp.topic, tp.partition, om.offset) for tp, om in offsets.items())


def _view(generation_id: int, member_id: str | None) -> tuple[int | None, str | None]:
    """(generation, member id), None for what the client cannot tell (-1 and '' after ``reset_generation``)."""
    return (generation_id if generation_id >= 0 else None), (member_id or None)


#: OffsetAndMetadata's shape: (offset, metadata) in 2.0.0, (offset, metadata, leader_epoch) from later 2.x on
_LEADER_EPOCH = "leader_epoch" in OffsetAndMetadata._fields


def _offsets(offsets: list[tuple[str, int, int]]) -> dict[Any, Any]:
    # leader_epoch -1: unknown (OffsetCommit v6+ sends it; -1 disables the broker's epoch check)
    epoch = (-1,) if _LEADER_EPOCH else ()
    return {TopicPartition(t, p): OffsetAndMetadata(o, "", *epoch) for t, p, o in offsets}
