"""A share-group member (KIP-932): kafka-chaos's own loop over confluent-kafka's ``ShareConsumer``, recording what it
acquired, processed and acknowledged (docs/share-groups.md, "The events").

The loop, per poll (``share.acknowledgement.mode=explicit``, so nothing is acknowledged behind the loop's back):

1. ``poll`` returns records the share-partition leaders acquired for this member: one ``share_acquired`` per
   (partition, delivery count), stamped when poll returned them. librdkafka fetches ahead of poll, so the
   acquisition happened at an unknown earlier moment: ``fetched_ns`` is None (nothing bounds it from below), and
   ``lock_duration_ms`` is None (the client does not tell the lock the broker gave: the group's
   ``share.record.lock.duration.ms`` applies). ``delivery_count`` is ``Message.delivery_count()``.
2. Each record is processed (``processing_delay_ms``). Processing is not recorded yet: no share checker reads it,
   and a ``consumed`` event would be read by the report's consumer-group re-checks (docs/share-groups.md).
3. Each record is acknowledged ACCEPT and ``commit_sync`` sends the acknowledgements; its answer, per partition,
   is one ``share_acknowledged``: ``ok`` (no error), ``fail`` (the error the broker gave, e.g.
   INVALID_RECORD_STATE for a record whose lock had run out), ``unknown`` (``commit_sync`` itself failed or timed
   out: sent or not, applied or not). ``mono_ns`` is when the acknowledgement was sent, ``answered_ns`` when the
   answer came. A member killed while ``commit_sync`` waits cannot say: its acknowledgements are mirrored in its
   in-flight file (:class:`chaos.workload.consumer.InflightCommits`) before they are sent, and the runner records
   them as ``unknown`` after the kill.

``member_id`` is None on every event: ``ShareConsumer`` does not expose the member id the coordinator gave (the
checkers name members by ``source``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from chaos.history.event import Kind, ShareAckType
from chaos.history.writer import EventWriter
from chaos.model.share import ShareMemberSpec
from chaos.outcome import Outcome
from chaos.workload.consumer import InflightCommits, inflight_path

#: how long one poll waits for records (s): short, so a stop request is seen within it
POLL_TIMEOUT_S = 0.5
#: commit_sync's bound (s): an answer lost on the wire is ``unknown`` after it
COMMIT_TIMEOUT_S = 30.0


class ShareRecord(Protocol):
    """What the loop reads of a record (confluent-kafka's ``Message``)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def delivery_count(self) -> int | None: ...
    def error(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Acquisition:
    """Records of one poll with one (topic, partition, delivery count): one ``share_acquired`` event."""

    topic: str
    partition: int
    delivery_count: int | None
    offsets: tuple[int, ...]


def acquisitions(records: Iterable[ShareRecord]) -> list[Acquisition]:
    """Group a poll's records (errors left out) by topic, partition and delivery count, offsets sorted; in the
    order the groups first appear."""
    groups: dict[tuple[str, int, int | None], list[int]] = {}
    for r in records:
        if r.error() is not None:
            continue
        topic, partition, offset = r.topic(), r.partition(), r.offset()
        if topic is None or partition is None or offset is None:
            continue
        groups.setdefault((topic, partition, r.delivery_count()), []).append(offset)
    return [Acquisition(t, p, dc, tuple(sorted(offs))) for (t, p, dc), offs in groups.items()]


@dataclass(frozen=True, slots=True)
class AckAnswer:
    """The broker's answer to one partition's acknowledgements."""

    topic: str
    partition: int
    outcome: Outcome
    error_code: int | None
    error_name: str | None


def ack_answers(sent: Mapping[tuple[str, int], Any], result: Mapping[Any, Any] | None,
                failure: BaseException | None) -> list[AckAnswer]:
    """Each partition's answer to a ``commit_sync``: ``result`` maps a TopicPartition to None (accepted) or the
    KafkaException the broker's error became; a partition acknowledged but absent from ``result``, or every
    partition when ``commit_sync`` raised (``failure``), is ``unknown``."""
    by_tp: dict[tuple[str, int], Any] = {}
    if result is not None and failure is None:
        by_tp = {(tp.topic, tp.partition): err for tp, err in result.items()}
    answers = []
    for tp in sent:
        if tp not in by_tp:
            answers.append(AckAnswer(tp[0], tp[1], Outcome.UNKNOWN, None, None))
            continue
        err = by_tp[tp]
        if err is None:
            answers.append(AckAnswer(tp[0], tp[1], Outcome.OK, None, None))
            continue
        # a KafkaException carries its KafkaError as args[0]
        kerr: Any = err.args[0] if getattr(err, "args", None) else None
        code = kerr.code() if kerr is not None and hasattr(kerr, "code") else None
        name = kerr.name() if kerr is not None and hasattr(kerr, "name") else type(err).__name__
        answers.append(AckAnswer(tp[0], tp[1], Outcome.FAIL, code, name))
    return answers


class ShareMember:
    """The loop (module docstring); ``consumer`` is a confluent-kafka ``ShareConsumer`` subscribed to the topic."""

    def __init__(self, group: str, spec: ShareMemberSpec, consumer: Any, events: EventWriter,
                 inflight: InflightCommits | None = None) -> None:
        self.group, self.spec = group, spec
        self.consumer = consumer
        self.events = events
        #: acknowledgements sent and not yet answered, for the runner to record as ``unknown`` if the member is
        #: killed meanwhile (as a consumer-group member's in-flight commits)
        self.inflight = inflight
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            records = [r for r in self.consumer.poll(POLL_TIMEOUT_S) if r.error() is None]
            if not records:
                continue
            batch = acquisitions(records)
            for a in batch:
                self.events.emit(Kind.SHARE_ACQUIRED, group=self.group, topic=a.topic, partition=a.partition,
                                 offsets=a.offsets, delivery_count=a.delivery_count, member_id=None,
                                 lock_duration_ms=None, fetched_ns=None)
            self._process(batch)
            self._accept(records)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def _process(self, batch: list[Acquisition]) -> None:
        for a in batch:
            if self.spec.processing_delay_ms:
                self._sleep(len(a.offsets) * self.spec.processing_delay_ms / 1000)

    def _accept(self, records: list[Any]) -> None:
        sent: dict[tuple[str, int], list[int]] = {}
        for r in records:
            self.consumer.acknowledge(r)
            sent.setdefault((r.topic(), r.partition()), []).append(r.offset())
        sent_ns = time.monotonic_ns()
        token = None if self.inflight is None else self.inflight.add({
            "kind": "share_acknowledged", "group": self.group, "sent_ns": sent_ns,
            "partitions": [[t, p, sorted(offs)] for (t, p), offs in sent.items()]})
        result, failure = None, None
        try:
            result = self.consumer.commit_sync(COMMIT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a commit that raised is an unknown outcome, recorded
            failure = exc
        answered = time.monotonic_ns()
        for ans in ack_answers(sent, result, failure):
            self.events.emit(Kind.SHARE_ACKNOWLEDGED, mono_ns=sent_ns, group=self.group, topic=ans.topic,
                             partition=ans.partition, offsets=tuple(sorted(sent[(ans.topic, ans.partition)])),
                             ack_type=ShareAckType.ACCEPT, member_id=None, outcome=ans.outcome,
                             error_code=ans.error_code, error_name=ans.error_name,
                             answered_ns=None if ans.outcome is Outcome.UNKNOWN else answered)
        if self.inflight is not None and token is not None:
            self.inflight.done(token)


def consumer_config(name: str, group: str, bootstrap: str, spec: ShareMemberSpec) -> dict[str, object]:
    """The ShareConsumer's configuration: explicit acknowledgement (every acknowledgement is the loop's, with its
    answer), the member's name as ``client.id`` (the coordinator's evidence names it)."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                 "share.acknowledgement.mode": "explicit", "log_level": 3}
    if spec.request_timeout_ms is not None:
        config["socket.timeout.ms"] = spec.request_timeout_ms
    return config


def run_share_member(name: str, group: str, topic: str, bootstrap: str, run_dir: str, spec: ShareMemberSpec) -> int:
    """Run one share-group member until SIGTERM/SIGINT; the worker's exit code.

    No ``member_start`` is written: its fields (assignor, rebalance protocol, commit mode, instance id) describe a
    consumer-group member, and a share member has none of them; the share checkers need only ``member_stop``."""
    import confluent_kafka

    events = EventWriter.for_run(run_dir, name)
    consumer = confluent_kafka.ShareConsumer(consumer_config(name, group, bootstrap, spec))
    member = ShareMember(group, spec, consumer, events, InflightCommits(inflight_path(run_dir, name)))

    def stop(*_: object) -> None:
        member.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    clean = True
    try:
        consumer.subscribe([topic])
        member.run()
    except Exception as exc:  # noqa: BLE001 - recorded, then the worker exits non-zero
        events.emit(Kind.ERROR, message=f"{type(exc).__name__}: {exc}"[:1000], error_code=None, error_name=None,
                    fatal=True, log_ref=None)
        clean = False
    finally:
        try:
            consumer.close()  # commits what is pending and leaves the group
        except Exception:  # noqa: BLE001 - a close that fails leaves the member's locks to run out
            clean = False
    events.emit(Kind.MEMBER_STOP, group=group, clean=clean, signal=None)
    events.close()
    return 0 if clean else 1
