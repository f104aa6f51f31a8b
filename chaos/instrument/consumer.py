"""``chaos.instrument.Consumer``: confluent-kafka's ``Consumer`` that records what it does.

A **subclass** of the library's class (``confluent_kafka.cimpl.Consumer``, a C type that allows
subclassing — the library's own ``DeserializingConsumer`` does the same), not a wrapper: every
method and attribute the application uses is the library's own, ``isinstance(c,
confluent_kafka.Consumer)`` holds (also for code that captured the original class before the hook
ran), and the object librdkafka hands to the rebalance callbacks *is* the application's consumer.
A wrapper would have to forward every method (and each one confluent-kafka adds later) and would
show the callbacks an object the application never made.

What is recorded (:class:`chaos.instrument.recorder.Recorder`, events of :mod:`chaos.history.event`):

* ``member_start`` when built, from the configuration it was given (librdkafka's defaults where it
  says nothing: ``enable.auto.commit`` true, ``auto.commit.interval.ms`` 5000,
  ``session.timeout.ms`` 45000, ``max.poll.interval.ms`` 300000, ``partition.assignment.strategy``
  ``range,roundrobin``);
* ``assigned`` *before* the application's ``on_assign`` runs (the member owns the partitions from
  the moment librdkafka hands them over; a commit or seek the callback makes comes after it);
  ``revoked`` *after* its ``on_revoke`` returns, even if it raises (it still owns the partitions
  while the callback commits them, KIP-429: the revoke callback runs before ownership is given up);
  ``lost`` *before* its ``on_lost`` (the partitions may already be someone else's). As in
  confluent-kafka (``Consumer_rebalance_cb``), lost partitions go to ``on_revoke`` when the
  application has no ``on_lost``, and librdkafka's own assign/unassign still happens when a callback
  does not call it;
* records returned by ``poll``/``consume``, with the generation (KIP-848: member epoch) the client
  reports when it returns them, as ``consumed`` once processed (:mod:`chaos.instrument.ledger`);
* every commit: synchronous ones with the offsets of the answer (one event per outcome when
  partitions are answered differently); asynchronous ones with the offsets sent, answered through a
  chained ``on_commit`` (the application's still runs, after the recording), in the order sent;
  auto commits (``enable.auto.commit``) as ``auto`` commits; an asynchronous commit never answered
  by ``close`` as ``unknown``;
* errors from ``error_cb`` (the application's still runs; without one, the error is written to
  stderr as librdkafka would log it) and from error messages returned by ``poll``/``consume``
  (``_PARTITION_EOF`` is not an error);
* ``close`` → ``member_stop`` clean=true after librdkafka's close returns (false if it raised).

Generation and member id are read as our own members read them (librdkafka's serialized group
metadata, :func:`chaos.workload.clients.confluent.parse_group_metadata`): the values librdkafka
stamps on its OffsetCommit requests. Under ``group.protocol=consumer`` (KIP-848) that is the member
epoch, and epoch 0 (joining) is recorded as no generation. Events recorded during ``close`` carry the
values read when it began: librdkafka may run a revoke callback from ``close`` after it stopped answering
such reads (:meth:`Consumer._chaos_view`).

Not recorded: partitions taken with ``assign()`` outside a rebalance callback (manual assignment is
not group membership), ``store_offsets`` (not a commit until committed), and consumers made from
``confluent_kafka.DeserializingConsumer`` or the asyncio consumer (they subclass the C class
directly). A synchronous ``commit()`` without offsets that fails before an answer records an
``error`` (its offsets are not known); a no-argument asynchronous commit is matched to the first
callback not matching an explicit commit, so with ``enable.auto.commit`` also on an auto commit's
answer may be taken for it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from chaos.history.event import Kind
from chaos.instrument.destination import Destination
from chaos.instrument.interruption import held
from chaos.instrument.recorder import TP, TPO, CommitAnswer, Recorder, Sent, View, commit_answer
from chaos.model.workload import Assignor, Client, CommitMode, RebalanceProtocol
from chaos.workload.clients.confluent import librdkafka_version, parse_group_metadata

#: the library's own class, whatever ``confluent_kafka.Consumer`` names after the hook ran
LibraryConsumer = confluent_kafka.cimpl.Consumer

#: librdkafka's defaults (CONFIGURATION.md) for what member_start records
_DEFAULTS: dict[str, object] = {
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "session.timeout.ms": 45000,
    "max.poll.interval.ms": 300000,
    "partition.assignment.strategy": "range,roundrobin",
    "group.protocol": "classic",
}

#: commit() arguments in the order confluent-kafka parses them (``Consumer_commit``: "|OOOO")
_COMMIT_ARGS = ("message", "offsets", "async", "asynchronous")


def _flag(value: object) -> bool:
    """A librdkafka boolean property as given in Python (a bool, or the strings librdkafka accepts)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "t", "yes", "y", "on")
    return bool(value)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the configuration says about the member, for ``member_start`` and the recording."""

    group: str | None
    instance_id: str | None
    assignor: Assignor
    protocol: RebalanceProtocol
    kip848: bool
    auto_commit: bool
    auto_commit_interval_ms: int
    session_timeout_ms: int
    max_poll_interval_ms: int

    @classmethod
    def of(cls, conf: dict[str, Any]) -> Settings:
        def get(key: str) -> Any:
            return conf.get(key, _DEFAULTS.get(key))

        group = conf.get("group.id")
        kip848 = str(get("group.protocol")).strip().lower() == "consumer"
        first = str(get("partition.assignment.strategy")).split(",")[0].strip()
        try:
            assignor = Assignor(first)
        except ValueError:
            assignor = Assignor.RANGE  # librdkafka refuses an unknown strategy when the consumer is built
        cooperative = kip848 or assignor is Assignor.COOPERATIVE_STICKY
        return cls(group=None if group is None else str(group),
                   instance_id=None if conf.get("group.instance.id") is None else str(conf["group.instance.id"]),
                   assignor=assignor,
                   protocol=RebalanceProtocol.COOPERATIVE if cooperative else RebalanceProtocol.EAGER,
                   kip848=kip848, auto_commit=_flag(get("enable.auto.commit")),
                   auto_commit_interval_ms=int(str(get("auto.commit.interval.ms"))),
                   session_timeout_ms=int(str(get("session.timeout.ms"))),
                   max_poll_interval_ms=int(str(get("max.poll.interval.ms"))))

    def member_start(self) -> dict[str, Any]:
        """``member_start`` fields. An application that commits itself is recorded as ``sync``: the
        schema has no mode for "the application decides" (see the package docstring)."""
        return {"client": Client.CONFLUENT_KAFKA.value,
                "client_version": f"{confluent_kafka.__version__} (librdkafka {librdkafka_version()})",
                "instance_id": self.instance_id, "assignor": self.assignor.value, "protocol": self.protocol.value,
                "commit_mode": (CommitMode.AUTO if self.auto_commit else CommitMode.SYNC).value,
                "session_timeout_ms": self.session_timeout_ms, "max_poll_interval_ms": self.max_poll_interval_ms,
                "auto_commit_interval_ms": self.auto_commit_interval_ms if self.auto_commit else None,
                "wrong_mode": None}


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """An asynchronous commit sent and not answered; ``offsets`` None: the client's stored offsets."""

    offsets: tuple[TPO, ...] | None
    sent: Sent


def merged_config(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The one configuration dict ``Consumer(conf, **kwargs)`` amounts to (keyword arguments override
    the dict, as confluent-kafka applies them), or None for arguments the library will refuse."""
    if len(args) > 1 or (args and not isinstance(args[0], dict)):
        return None
    conf = dict(args[0]) if args else {}
    conf.update(kwargs)
    return conf


def commit_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Message | None, Any, bool]:
    """(message, offsets, asynchronous) of a ``commit`` call, read as confluent-kafka reads them: any
    given ``asynchronous``/``async`` value is taken for its truth (the later name wins), default True."""
    bound = dict(zip(_COMMIT_ARGS, args, strict=False))
    bound.update(kwargs)
    if "asynchronous" in bound:
        asynchronous = bool(bound["asynchronous"])
    elif "async" in bound:
        asynchronous = bool(bound["async"])
    else:
        asynchronous = True
    return bound.get("message"), bound.get("offsets"), asynchronous


def offsets_sent(message: Message | None, offsets: Any) -> tuple[TPO, ...] | None:
    """What a commit sends (next offsets, Kafka's convention): the message's offset + 1, the offsets
    given, or None for the client's stored offsets (known only from the answer)."""
    if message is not None:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            return None
        return ((topic, partition, offset + 1),)
    if offsets is not None:
        return tuple((tp.topic, tp.partition, tp.offset) for tp in offsets)
    return None


def answers(err: KafkaError | None, partitions: list[TopicPartition] | None,
            fallback: tuple[TPO, ...] | None = None) -> list[CommitAnswer]:
    """A commit answer per outcome: a request-level error covers every partition (those answered, else
    ``fallback``, the offsets sent); otherwise partitions are grouped by their own error."""
    answered = tuple((p.topic, p.partition, p.offset) for p in partitions or [] if p.offset >= 0)
    if err is not None:
        return [commit_answer(answered or fallback or (), err.code(), err.name())]
    groups: dict[tuple[int | None, str | None], list[TPO]] = {}
    for p in partitions or []:
        if p.offset < 0:
            continue  # nothing stored for it: not sent
        e = p.error
        key = (None, None) if e is None else (e.code(), e.name())
        groups.setdefault(key, []).append((p.topic, p.partition, p.offset))
    return [commit_answer(offs, code, name) for (code, name), offs in groups.items()]


Callback = Callable[[Any, list[TopicPartition]], Any]


def rebalance_callbacks(rec: Recorder, incremental: bool, on_assign: Callback | None, on_revoke: Callback | None,
                        on_lost: Callback | None) -> tuple[Callback, Callback, Callback]:
    """(on_assign, on_revoke, on_lost) to give librdkafka: each records and calls the application's
    own callback, in the order the module docstring gives. Lost partitions go to the application's
    ``on_revoke`` when it has no ``on_lost``, as confluent-kafka's ``Consumer_rebalance_cb`` does."""
    app_lost = on_lost if on_lost is not None else on_revoke

    def assigned(consumer: Any, partitions: list[TopicPartition]) -> None:
        rec.ownership(Kind.ASSIGNED, _tps(partitions), incremental)
        if on_assign is not None:
            on_assign(consumer, partitions)

    def revoked(consumer: Any, partitions: list[TopicPartition]) -> None:
        try:
            if on_revoke is not None:
                on_revoke(consumer, partitions)
        finally:
            rec.ownership(Kind.REVOKED, _tps(partitions), incremental)

    def lost(consumer: Any, partitions: list[TopicPartition]) -> None:
        rec.ownership(Kind.LOST, _tps(partitions), False)
        if app_lost is not None:
            app_lost(consumer, partitions)

    return assigned, revoked, lost


class Consumer(LibraryConsumer):
    """confluent-kafka's ``Consumer``, recording to the member's events file when the environment
    names one (see the module docstring); otherwise exactly the library's."""

    _chaos: Recorder | None = None
    #: the view read when ``close`` began, given for every event recorded during it (see :meth:`_chaos_view`)
    _chaos_closing_view: View | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        destination = Destination.from_environ()
        conf = merged_config(args, kwargs) if destination is not None else None
        if destination is None or conf is None or not destination.records(_group_of(conf)):
            super().__init__(*args, **kwargs)
            return
        self._chaos_settings = settings = Settings.of(conf)
        self._chaos_pending: list[PendingCommit] = []
        app_on_commit: Callable[..., Any] | None = conf.get("on_commit")
        app_error_cb: Callable[..., Any] | None = conf.get("error_cb")
        name = str(conf.get("client.id", "rdkafka"))
        logs_errors = int(str(conf.get("log_level", 6))) >= 3  # LOG_ERR, as librdkafka filters its log

        def on_commit(err: KafkaError | None, partitions: list[TopicPartition]) -> None:
            rec = self._chaos
            if rec is not None:
                self._chaos_answered(rec, err, partitions)
            if app_on_commit is not None:
                app_on_commit(err, partitions)

        def error_cb(err: KafkaError) -> None:
            rec = self._chaos
            if rec is not None:
                rec.error(err.str(), err.code(), err.name(), _fatal(err))
            if app_error_cb is not None:
                app_error_cb(err)
            elif logs_errors:  # librdkafka logs an error when no error_cb is set (rdkafka.h, rd_kafka_conf_set_error_cb)
                sys.stderr.write(f"%3|{time.time():.3f}|ERROR|{name}| {err.name()}: {err.str()}\n")

        conf["on_commit"] = on_commit
        conf["error_cb"] = error_cb
        super().__init__(conf)
        rec = Recorder.open(destination, str(settings.group), self._chaos_view, buffered=not settings.auto_commit)
        if rec is not None:
            rec.start(**settings.member_start())
            self._chaos = rec

    # ------------------------------------------------------------------ the client's view
    def _chaos_view(self) -> View:
        """(generation or member epoch, member id) as librdkafka reports them now; during ``close``, as it
        reported them when ``close`` began.

        Why not ask librdkafka during ``close``: it may run the revoke callback after its group handler has
        terminated. A consumer closed while a revocation was waiting for the application's next poll (the
        group began a rebalance, eager protocol) leaves the group at once — ``rd_kafka_cgrp_terminate0`` →
        ``rd_kafka_cgrp_unsubscribe``, which finds the join state waiting for that callback, does not rejoin
        without a subscription and sends LeaveGroup, dropping the member id — then serves the revocation
        from ``rd_kafka_consumer_close``, no longer waiting for it: the handler terminates as soon as the
        LeaveGroup and any commit the callback made are answered. A group metadata request
        (``consumer_group_metadata``, an op to that handler) arriving then is dropped unanswered, and
        confluent-kafka waits for the answer forever holding the GIL: the application froze in ``close``
        (librdkafka 2.16; ``tests/integration/test_instrument.py`` closes a member so). The view read before
        ``close`` is the member's last: ``close`` leaves, never joins, so the generation does not move on
        and the member id only goes away; a commit refused during ``close`` for that
        (``UNKNOWN_MEMBER_ID``: librdkafka sent it without a member id) is still recorded refused, with
        the member id it had.
        """
        closing = self._chaos_closing_view
        if closing is not None:
            return closing
        try:
            raw = LibraryConsumer.consumer_group_metadata(self)
        except (KafkaException, RuntimeError):
            return None, None
        generation, member = parse_group_metadata(raw)
        if self._chaos_settings.kip848 and generation == 0:
            generation = None  # KIP-848 epoch 0: joining, not a member yet (as our own members record it)
        return generation, member

    # ------------------------------------------------------------------ membership
    def subscribe(self, topics: list[str], on_assign: Callable[..., Any] | None = None,
                  on_revoke: Callable[..., Any] | None = None, on_lost: Callable[..., Any] | None = None) -> None:
        rec = self._chaos
        if rec is None:
            given = {k: v for k, v in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost))
                     if v is not None}  # None is refused by the library ("expects a callable")
            return super().subscribe(topics, **given)
        incremental = self._chaos_settings.protocol is RebalanceProtocol.COOPERATIVE
        assigned, revoked, lost = rebalance_callbacks(rec, incremental, on_assign, on_revoke, on_lost)
        return super().subscribe(topics, on_assign=assigned, on_revoke=revoked, on_lost=lost)

    # ------------------------------------------------------------------ records
    @held(waits=True)
    def poll(self, timeout: float = -1) -> Message | None:
        rec = self._chaos
        if rec is None:
            return super().poll(timeout)
        rec.settle()  # the application polls again: the last batch is processed
        msg: Message | None = super().poll(timeout)
        if msg is not None:
            self._chaos_returned(rec, [msg])
        return msg

    @held(waits=True)
    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        rec = self._chaos
        if rec is None:
            return super().consume(num_messages, timeout)
        rec.settle()
        msgs: list[Message] = super().consume(num_messages, timeout)
        if msgs:
            self._chaos_returned(rec, msgs)
        return msgs

    def _chaos_returned(self, rec: Recorder, msgs: list[Message]) -> None:
        records: list[TPO] = []
        for m in msgs:
            err = m.error()
            if err is None:
                records.append((m.topic(), m.partition(), m.offset()))  # type: ignore[arg-type]
            elif err.code() != KafkaError._PARTITION_EOF:
                rec.error(err.str(), err.code(), err.name(), _fatal(err))
        rec.hand_over(records)

    # ------------------------------------------------------------------ commits
    # one signature for the library's overloads: the arguments are read as the C code reads them
    @held
    def commit(self, *args: Any, **kwargs: Any) -> list[TopicPartition] | None:
        rec = self._chaos
        if rec is None:
            return super().commit(*args, **kwargs)
        message, offsets, asynchronous = commit_arguments(args, kwargs)
        sending = offsets_sent(message, offsets)
        sent = rec.sent()
        if asynchronous:
            pending = PendingCommit(sending, sent)
            self._chaos_pending.append(pending)
            try:
                return super().commit(*args, **kwargs)
            except KafkaException as exc:
                if pending in self._chaos_pending:
                    self._chaos_pending.remove(pending)
                _refused(rec, exc, sending, sent)
                raise
        try:
            result: list[TopicPartition] = super().commit(*args, **kwargs)
        except KafkaException as exc:
            _refused(rec, exc, sending, sent)
            raise
        for answer in answers(None, result, sending):
            rec.commit(answer, sent)
        return result

    def _chaos_answered(self, rec: Recorder, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's offset-commit callback: the answer to an asynchronous or an auto commit."""
        answered = frozenset((p.topic, p.partition, p.offset) for p in partitions or [] if p.offset >= 0)
        pending = self._chaos_pending
        match = next((c for c in pending if c.offsets is not None and frozenset(c.offsets) == answered), None)
        if match is None:
            match = next((c for c in pending if c.offsets is None), None)
        if match is None and err is not None and not answered and pending:
            match = pending[0]  # a request-level failure that names no partition: the oldest commit
        if match is not None:
            pending.remove(match)
            for answer in answers(err, partitions, match.offsets):
                rec.commit(answer, match.sent)
            return
        if self._chaos_settings.auto_commit and not (err is not None and err.code() == KafkaError._NO_OFFSET):
            for answer in answers(err, partitions):
                rec.commit(answer, None, auto=True)

    # ------------------------------------------------------------------ closing
    @held
    def close(self, *args: Any, **kwargs: Any) -> None:
        rec = self._chaos
        if rec is None:
            return super().close(*args, **kwargs)

        # revoke callbacks and the last auto commit run in the library's close, recorded with the view read
        # now: librdkafka may run them when it no longer answers for the group (_chaos_view)
        self._chaos_closing_view = self._chaos_view()
        rec.closing_of(self, lambda: LibraryConsumer.close(self, *args, **kwargs))
        return None

    def _chaos_unanswered(self) -> list[tuple[tuple[TPO, ...], Sent, bool]]:
        pending, self._chaos_pending = self._chaos_pending, []
        return [(c.offsets, c.sent, False) for c in pending if c.offsets is not None]

    if hasattr(LibraryConsumer, "__exit__"):  # newer confluent-kafka: its __exit__ closes in C, past close()
        def __enter__(self) -> Consumer:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()


def _group_of(conf: dict[str, Any]) -> str | None:
    group = conf.get("group.id")
    return None if group is None else str(group)


def _tps(partitions: list[TopicPartition]) -> list[TP]:
    return [(p.topic, p.partition) for p in partitions]


def _fatal(err: KafkaError) -> bool:
    # librdkafka reports a fatal error as code _FATAL, sometimes with fatal() false (see
    # chaos.workload.clients.confluent, "Static consumer fenced")
    return bool(err.fatal()) or err.code() == KafkaError._FATAL


def _refused(rec: Recorder, exc: KafkaException, sending: tuple[TPO, ...] | None, sent: Sent) -> None:
    """A commit call that raised: ``_NO_OFFSET`` sent nothing; otherwise a commit of the offsets sent
    with the error's outcome, or an ``error`` when they are not known."""
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is None or err.code() == KafkaError._NO_OFFSET:
        return
    if sending is None:
        rec.error(f"commit failed: {err.str()}", err.code(), err.name(), _fatal(err))
        return
    rec.commit(commit_answer(sending, err.code(), err.name()), sent)
