"""A share-group member (KIP-932): kafka-chaos's own loop over confluent-kafka's ``ShareConsumer``, recording what it
acquired, processed and acknowledged (docs/share-groups.md, "The events").

The loop, per poll (``share.acknowledgement.mode=explicit``, so nothing is acknowledged behind the loop's back):

1. ``poll`` returns records the share-partition leaders acquired for this member: one ``share_acquired`` per
   (partition, delivery count), stamped when poll returned them. librdkafka fetches ahead of poll, so the
   acquisition happened at an unknown earlier moment: ``fetched_ns`` is None (nothing bounds it from below), and
   ``lock_duration_ms`` is None (the client does not tell the lock the broker gave: the group's
   ``share.record.lock.duration.ms`` applies). ``delivery_count`` is ``Message.delivery_count()``.
2. The records are processed one by one (``processing_delay_ms``), each a ``share_processed`` (when it began and
   ended), while the lock leaves time: a record is begun only if it can end before the poll's return plus
   :data:`LOCK_BUDGET` of the lock (the lock began before the poll returned, at a moment the client does not
   tell; the rest of the lock is the margin for that). Past the lock the record is no longer the member's:
   another member may be handed it (KIP-932, "In-flight records").
3. The processed records are acknowledged ACCEPT, the others RELEASE (Available again at once, for any member,
   rather than when their lock runs out), and ``commit_sync`` sends the acknowledgements; its answer, per
   partition and type, is one ``share_acknowledged``: ``ok`` (no error), ``fail`` (the error the broker gave, e.g.
   INVALID_RECORD_STATE for a record whose lock had run out), ``unknown`` (``commit_sync`` itself failed or timed
   out: sent or not, applied or not). ``mono_ns`` is when the acknowledgement was sent, ``answered_ns`` when the
   answer came. A member killed while ``commit_sync`` waits cannot say: its acknowledgements are mirrored in its
   in-flight file (:class:`chaos.workload.consumer.InflightCommits`) before they are sent, and the runner records
   them as ``unknown`` after the kill.

A member stopping (SIGTERM) ends the record it is processing unprocessed and releases what it did not process.
The wrong modes (:class:`chaos.model.share.ShareWrongMode`) change steps 2 and 3: ``accept_before_processing``
accepts and commits every record first and processes them after; ``process_past_lock`` processes every record,
whatever the lock, and accepts them all.

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
from chaos.model.share import ShareMemberSpec, ShareWrongMode
from chaos.outcome import Operation, Outcome, classify
from chaos.workload.consumer import InflightCommits, inflight_path

#: how long one poll waits for records (s): short, so a stop request is seen within it
POLL_TIMEOUT_S = 0.5
#: commit_sync's bound (s): an answer lost on the wire is ``unknown`` after it
COMMIT_TIMEOUT_S = 30.0
#: the share of the lock, counted from the poll's return, within which the member ends processing a poll's records
LOCK_BUDGET = 0.8
#: confluent-kafka's ``AcknowledgeType`` values (``rd_kafka_share_AcknowledgeType_t``), by kafka-chaos's name
ACK_TYPE_CODES = {ShareAckType.ACCEPT: 1, ShareAckType.RELEASE: 2, ShareAckType.REJECT: 3}


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


def ack_answers(sent: Iterable[tuple[str, int]], result: Mapping[Any, Any] | None,
                failure: BaseException | None) -> list[AckAnswer]:
    """Each partition's answer to a ``commit_sync``: ``result`` maps a TopicPartition to None (accepted) or the
    KafkaException the broker's error became (``fail`` when it says the acknowledgement was refused, else
    ``unknown``: :func:`chaos.outcome.classify`, e.g. REQUEST_TIMED_OUT when the answer was lost); a partition
    acknowledged but absent from ``result``, or every partition when ``commit_sync`` raised (``failure``), is
    ``unknown``."""
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
        answers.append(AckAnswer(tp[0], tp[1], classify(Operation.SHARE_ACKNOWLEDGE, code, name), code, name))
    return answers


def emit_acknowledged(events: EventWriter, group: str, sent: Mapping[tuple[str, int, ShareAckType], list[int]],
                      sent_ns: int, answers: Mapping[tuple[str, int], AckAnswer], answered_ns: int) -> None:
    """One ``share_acknowledged`` per (partition, type) of ``sent`` (sent at ``sent_ns``), with its partition's
    answer (given at ``answered_ns``; none for an unknown outcome). A refusal (``fail``: the leader answered that
    the records are not acquired by this member, ``INVALID_RECORD_STATE``) is also the lock expiry the client
    sees: a ``share_lock_expired`` of those offsets at ``answered_ns`` (the client says no more: no delivery count)."""
    for (t, p, ack_type), offsets in sent.items():
        ans = answers[(t, p)]
        events.emit(Kind.SHARE_ACKNOWLEDGED, mono_ns=sent_ns, group=group, topic=t, partition=p,
                    offsets=tuple(sorted(offsets)), ack_type=ack_type, member_id=None, outcome=ans.outcome,
                    error_code=ans.error_code, error_name=ans.error_name,
                    answered_ns=None if ans.outcome is Outcome.UNKNOWN else answered_ns)
        if ans.outcome is Outcome.FAIL:
            events.emit(Kind.SHARE_LOCK_EXPIRED, mono_ns=answered_ns, group=group, topic=t, partition=p,
                        offsets=tuple(sorted(offsets)), delivery_count=None, member_id=None)


class ShareMember:
    """The loop (module docstring); ``consumer`` is a confluent-kafka ``ShareConsumer`` subscribed to the topic,
    ``lock_ms`` the group's record lock duration (None: no bound on processing)."""

    def __init__(self, group: str, spec: ShareMemberSpec, consumer: Any, events: EventWriter,
                 inflight: InflightCommits | None = None, lock_ms: int | None = None) -> None:
        self.group, self.spec = group, spec
        self.consumer = consumer
        self.events = events
        #: acknowledgements sent and not yet answered, for the runner to record as ``unknown`` if the member is
        #: killed meanwhile (as a consumer-group member's in-flight commits)
        self.inflight = inflight
        self.lock_ms = lock_ms
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            records = [r for r in self.consumer.poll(POLL_TIMEOUT_S) if r.error() is None]
            if records:
                self.handle(records)

    def handle(self, records: list[Any]) -> None:
        """One poll's records: recorded as acquired, processed and acknowledged (module docstring)."""
        got_ns = time.monotonic_ns()
        for a in acquisitions(records):
            self.events.emit(Kind.SHARE_ACQUIRED, mono_ns=got_ns, group=self.group, topic=a.topic,
                             partition=a.partition, offsets=a.offsets, delivery_count=a.delivery_count,
                             member_id=None, lock_duration_ms=None, fetched_ns=None)
        wrong = self.spec.wrong_mode
        if wrong is ShareWrongMode.ACCEPT_BEFORE_PROCESSING:
            self._acknowledge(records, [])
            self._process(records, None)
            return
        deadline = None
        if self.lock_ms is not None and wrong is not ShareWrongMode.PROCESS_PAST_LOCK:
            deadline = got_ns + int(self.lock_ms * LOCK_BUDGET * 1_000_000)
        done = self._process(records, deadline)
        self._acknowledge(done, records[len(done):])

    def _process(self, records: list[Any], deadline_ns: int | None) -> list[Any]:
        """Process ``records`` in order, each begun only if it can end by ``deadline_ns``; the processed ones (a
        prefix). A stop request ends the one under way unprocessed."""
        delay_ns = int(self.spec.processing_delay_ms * 1_000_000)
        done: list[Any] = []
        for r in records:
            started = time.monotonic_ns()
            if self.stopping or (deadline_ns is not None and started + delay_ns > deadline_ns):
                break
            if delay_ns and not self._sleep_until(started + delay_ns):
                break
            self.events.emit(Kind.SHARE_PROCESSED, group=self.group, topic=r.topic(), partition=r.partition(),
                             offsets=(r.offset(),), delivery_count=r.delivery_count(), member_id=None,
                             started_ns=started)
            done.append(r)
        return done

    def _sleep_until(self, end_ns: int) -> bool:
        """Sleep until ``end_ns``; False when a stop request came first."""
        while (left := end_ns - time.monotonic_ns()) > 0:
            if self.stopping:
                return False
            time.sleep(min(0.1, left / 1e9))
        return True

    def _acknowledge(self, accept: list[Any], release: list[Any]) -> None:
        sent: dict[tuple[str, int, ShareAckType], list[int]] = {}
        for ack_type, records in ((ShareAckType.ACCEPT, accept), (ShareAckType.RELEASE, release)):
            for r in records:
                self.consumer.acknowledge(r, ACK_TYPE_CODES[ack_type])
                sent.setdefault((r.topic(), r.partition(), ack_type), []).append(r.offset())
        if not sent:
            return
        sent_ns = time.monotonic_ns()
        token = None if self.inflight is None else self.inflight.add({
            "kind": "share_acknowledged", "group": self.group, "sent_ns": sent_ns,
            "partitions": [[t, p, sorted(offs), ack.value] for (t, p, ack), offs in sent.items()]})
        result, failure = None, None
        try:
            result = self.consumer.commit_sync(COMMIT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a commit that raised is an unknown outcome, recorded
            failure = exc
        answered = time.monotonic_ns()
        by_tp = {(a.topic, a.partition): a for a in ack_answers({(t, p) for t, p, _ in sent}, result, failure)}
        emit_acknowledged(self.events, self.group, sent, sent_ns, by_tp, answered)
        if self.inflight is not None and token is not None:
            self.inflight.done(token)


def consumer_config(name: str, group: str, bootstrap: str, spec: ShareMemberSpec) -> dict[str, object]:
    """The ShareConsumer's configuration: explicit acknowledgement (every acknowledgement is the loop's, with its
    answer), the member's name as ``client.id`` (the coordinator's evidence names it)."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                 "share.acknowledgement.mode": "explicit", "log_level": 3}
    if spec.request_timeout_ms is not None:
        config["socket.timeout.ms"] = spec.request_timeout_ms
    if spec.max_records is not None:
        config["max.poll.records"] = spec.max_records
    return config


def run_share_member(name: str, group: str, topic: str, bootstrap: str, run_dir: str, spec: ShareMemberSpec,
                     lock_ms: int | None = None) -> int:
    """Run one share-group member until SIGTERM/SIGINT; the worker's exit code.

    No ``member_start`` is written: its fields (assignor, rebalance protocol, commit mode, instance id) describe a
    consumer-group member, and a share member has none of them; the share checkers need only ``member_stop``."""
    import confluent_kafka

    events = EventWriter.for_run(run_dir, name)
    consumer = confluent_kafka.ShareConsumer(consumer_config(name, group, bootstrap, spec))
    member = ShareMember(group, spec, consumer, events, InflightCommits(inflight_path(run_dir, name)), lock_ms)

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
