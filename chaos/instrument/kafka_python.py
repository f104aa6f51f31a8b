"""``chaos.instrument.KafkaConsumer``: kafka-python's ``KafkaConsumer`` that records what it does.

A **subclass** of the library's class (``kafka.consumer.group.KafkaConsumer``), as
:mod:`chaos.instrument.consumer` is for confluent-kafka: every method the application uses is the
library's own, ``isinstance(c, kafka.KafkaConsumer)`` holds also for code that captured the class
before the hook ran. Written against kafka-python 3.0.12 (the pinned release) and only that: the
hook wraps coordinator methods that are not a public API. Classic protocol only (kafka-python has no
KIP-848 consumer); ``protocol`` is ``cooperative`` when the application's assignors are (KIP-429,
``CooperativeStickyAssignor``), else ``eager``.

Threads: kafka-python 3 runs the group protocol, rebalance listeners and every request on its own IO
thread; the application's thread blocks in ``poll``/``commit``/``close`` while their coroutine runs
there. A synchronous listener that calls a blocking consumer method (``commit()``) is refused by the
library (``RuntimeError``, re-raised from ``poll`` as ``KafkaError``); an
``AsyncConsumerRebalanceListener`` can ``await consumer.commit_async(offsets)``.

What is recorded (:class:`chaos.instrument.recorder.Recorder`, events of :mod:`chaos.history.event`):

* ``member_start`` when built, from ``KafkaConsumer.config`` (the library's defaults already merged:
  ``enable_auto_commit`` true, ``auto_commit_interval_ms`` 5000, ``session_timeout_ms`` 45000 — 30000
  against brokers before 3.0, KIP-735 —, ``max_poll_interval_ms`` 300000, assignors range then
  roundrobin) and ``group_instance_id`` (static membership, KIP-345);
* ``assigned`` *before* the application's ``on_partitions_assigned`` runs and ``revoked`` / ``lost``
  *after* its ``on_partitions_revoked`` / ``on_partitions_lost`` returns (even if it raises; the
  library logs it and raises it again from ``poll``), the order of the confluent wrapper and KIP-429's,
  ``incremental`` under the cooperative protocol. The listener kafka-python is given wraps the
  application's, synchronous or asynchronous (``subscribe(topics, listener=...)``; one is installed
  when the application gives none, and for topics passed to the constructor). kafka-python calls
  ``on_partitions_revoked`` with an empty set before the first join: not a revocation, not recorded.
  A member that fell out of the group gets ``on_partitions_lost`` at its next rejoin or on close
  (``ConsumerCoordinator._on_join_prepare_async`` / ``_on_close_prepare_async``), recorded then, with
  no generation (it was reset);
* records returned by ``poll`` and by iteration (``for msg in consumer``: each record when
  ``__next__`` returns it), with the generation the client reports then, as ``consumed`` once
  processed (:mod:`chaos.instrument.ledger`: at the next ``poll``/``__next__``/``close``, or exactly
  with :func:`chaos.instrument.processed`). Iteration polls internally with ``update_offsets=False``;
  that inner poll is not a hand-over and is not recorded;
* every commit, where every commit path meets on this consumer's coordinator (wrapped on it only):
  the coroutine every synchronous commit runs, ``ConsumerCoordinator._commit_offsets_sync_async`` —
  the application's ``commit()`` / ``commit(offsets)`` (one that retries retriable errors is one
  event, stamped when it starts, answered when it ends), the auto commit before a rebalance and the one
  in ``close`` —, and ``commit_offsets_async`` — ``commit_async(offsets, callback)`` and the auto
  commits of ``poll`` (stamped at the call, answered when the OffsetCommit response arrives —
  ``_do_commit_offsets_async``'s future — or when a coordinator lookup fails; the application's
  callback still runs when kafka-python runs it). Commits the application did not ask for are
  ``auto``. Outcome from kafka-python's exception, classified by :mod:`chaos.outcome`
  (:func:`chaos.workload.clients.kafka_python.commit_error`); an asynchronous commit not answered by
  ``close`` is ``unknown``;
* exceptions raised by ``poll`` / iteration as ``error`` (not fatal: kafka-python has no notion of a
  fatal client error, the application decides);
* ``close`` → ``member_stop`` clean=true after the library's close returns (false if it raised).
  kafka-python's close commits (auto), calls ``on_partitions_revoked`` (``on_partitions_lost`` when
  the member was already out of the group) — recorded — and leaves the group.

Generation and member id: :func:`generation_view` reads the coordinator's ``group_metadata()`` as our
own members do (:mod:`chaos.workload.clients.kafka_python`, which says why that is the value stamped on
OffsetCommit). A generation reset to -1, or a coordinator without that method, is recorded as
``null`` ("the client could not tell", docs/architecture.md, "The history") — never guessed.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import kafka
from kafka.consumer.group import KafkaConsumer as _Library
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener, ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import RebalanceProtocol as LibraryProtocol
from kafka.errors import KafkaError

from chaos.history.event import Kind
from chaos.instrument.destination import Destination
from chaos.instrument.interruption import held
from chaos.instrument.recorder import TP, TPO, CommitAnswer, Recorder, Sent, View, commit_answer
from chaos.model.workload import Assignor, Client, CommitMode, RebalanceProtocol
from chaos.workload.clients.kafka_python import commit_error

#: the library's own class, whatever ``kafka.KafkaConsumer`` names after the hook ran
LibraryConsumer = _Library


def generation_view(coordinator: Any) -> View:
    """(generation, member id) the coordinator holds now; None for what it cannot tell.

    kafka-python 3: ``group_metadata()``, a ``ConsumerGroupMetadata`` snapshot of the coordinator's
    ``Generation`` taken under its lock (generation -1 and member id '' after ``reset_generation``).
    """
    read = getattr(coordinator, "group_metadata", None)
    if read is None:
        return None, None
    meta = read()
    gen, member = getattr(meta, "generation_id", None), getattr(meta, "member_id", None)
    return (gen if isinstance(gen, int) and gen >= 0 else None), (member if isinstance(member, str) and member
                                                                  else None)


def cooperative(coordinator: Any) -> bool:
    """Whether the coordinator rebalances incrementally (KIP-429): its assignors all support only the
    cooperative protocol (``ConsumerCoordinator._validate_rebalance_protocol`` picks the highest they share)."""
    return getattr(coordinator, "_rebalance_protocol", None) == LibraryProtocol.COOPERATIVE


def assignor_of(strategy: Iterable[Any]) -> tuple[Assignor, str | None]:
    """The assignor ``member_start`` records: the first of ``partition_assignment_strategy`` the schema
    names (the list is the member's preference order), and the name of a custom first one the schema
    cannot name (recorded as an ``error``, the assignor then falling back to ``range``)."""
    names = [str(getattr(a, "name", a)) for a in strategy]
    for name in names:
        try:
            return Assignor(name), (names[0] if name != names[0] else None)
        except ValueError:
            continue
    return Assignor.RANGE, (names[0] if names else None)


def member_start(config: dict[str, Any], incremental: bool = False) -> tuple[dict[str, Any], str | None]:
    """``member_start`` fields from a built consumer's ``config`` (``incremental``: its coordinator
    rebalances cooperatively), and an assignor the schema cannot name. An application that commits
    itself is recorded as ``sync``, as the confluent wrapper does."""
    assignor, unnamed = assignor_of(config.get("partition_assignment_strategy", ()))
    auto = bool(config.get("enable_auto_commit"))
    instance = config.get("group_instance_id")
    return {"client": Client.KAFKA_PYTHON.value, "client_version": kafka.__version__,
            "instance_id": None if instance is None else str(instance), "assignor": assignor.value,
            "protocol": (RebalanceProtocol.COOPERATIVE if incremental else RebalanceProtocol.EAGER).value,
            "commit_mode": (CommitMode.AUTO if auto else CommitMode.SYNC).value,
            "session_timeout_ms": int(config["session_timeout_ms"]),
            "max_poll_interval_ms": int(config["max_poll_interval_ms"]),
            "auto_commit_interval_ms": int(config["auto_commit_interval_ms"]) if auto else None,
            "wrong_mode": None}, unnamed


def offsets_of(offsets: Any) -> tuple[TPO, ...] | None:
    """``{TopicPartition: OffsetAndMetadata}`` as (topic, partition, next offset), or None for what the
    library will refuse (its own assertions then say so)."""
    try:
        return tuple(sorted((tp.topic, int(tp.partition), int(om.offset)) for tp, om in offsets.items()))
    except (AttributeError, TypeError, ValueError):
        return None


def answer_of(offsets: tuple[TPO, ...], result: Any) -> CommitAnswer:
    """A commit's answer from what kafka-python reports: an exception (instance or class, see
    :func:`chaos.workload.clients.kafka_python.commit_error`) or anything else for success."""
    if isinstance(result, type) and issubclass(result, BaseException):
        result = result()  # ``Future().failure(Errors.X)`` fails with the class
    if isinstance(result, BaseException):
        r = commit_error(result)
        return CommitAnswer(offsets, r.outcome, r.error_code, r.error_name)
    return commit_answer(offsets, None, None)


async def _call(method: Callable[[Any], Any], partitions: Any) -> None:
    """The application's listener method, awaited when it is a coroutine function (as the library would)."""
    if inspect.iscoroutinefunction(method):
        await method(partitions)
    else:
        method(partitions)


class RecordingListener(AsyncConsumerRebalanceListener):
    """The listener kafka-python calls (on its IO thread): records, and runs the application's (see the
    module docstring) — inline when it is synchronous, awaited when it is asynchronous, as the library
    would run it. Asynchronous itself, so an asynchronous application listener keeps its awaits."""

    def __init__(self, rec: Recorder, app: Any, incremental: bool = False) -> None:
        self.rec = rec
        self.app = app
        self.incremental = incremental

    async def on_partitions_revoked(self, revoked: Any) -> None:
        try:
            if self.app is not None:
                await _call(self.app.on_partitions_revoked, revoked)
        finally:
            if revoked:
                self.rec.ownership(Kind.REVOKED, _tps(revoked), self.incremental)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.rec.ownership(Kind.ASSIGNED, _tps(assigned), self.incremental)
        if self.app is not None:
            await _call(self.app.on_partitions_assigned, assigned)

    async def on_partitions_lost(self, lost: Any) -> None:
        # the application's own on_partitions_lost (the library's default runs its on_partitions_revoked)
        try:
            if self.app is not None:
                await _call(self.app.on_partitions_lost, lost)
        finally:
            if lost:
                self.rec.ownership(Kind.LOST, _tps(lost), False)


@dataclass(slots=True)
class PendingCommit:
    """An asynchronous commit sent and not answered yet (mutable: answered once, from any thread)."""

    offsets: tuple[TPO, ...]
    sent: Sent
    auto: bool
    requested: bool = False  # reached _do_commit_offsets_async (a lookup failure never does)
    answered: bool = field(default=False)


class _Answer:
    """The callback given to ``commit_offsets_async`` in place of the caller's: records the answer (if
    the response future has not already) and runs the caller's callback, or the library's default when
    the caller gave none and the library would have run it."""

    def __init__(self, owner: KafkaConsumer, pending: PendingCommit, callback: Callable[..., Any] | None) -> None:
        self.owner = owner
        self.pending = pending
        self.callback = callback

    def __call__(self, offsets: Any, res_or_exc: Any) -> Any:
        self.owner._chaos_answered(self.pending, res_or_exc)
        if self.callback is not None:
            return self.callback(offsets, res_or_exc)
        if self.pending.requested:  # _do_commit_offsets_async substitutes the default for None
            return self.owner.config["default_offset_commit_callback"](offsets, res_or_exc)
        return None


class KafkaConsumer(_Library):
    """kafka-python's ``KafkaConsumer``, recording to the member's events file when the environment
    names one (see the module docstring); otherwise exactly the library's."""

    _chaos: Recorder | None = None

    def __init__(self, *topics: Any, **configs: Any) -> None:
        destination = Destination.from_environ()  # a bad member name is refused before connecting
        super().__init__(*topics, **configs)
        group = self.config.get("group_id")
        if destination is None or not destination.records(None if group is None else str(group)):
            return
        self._chaos_pending: list[PendingCommit] = []
        self._chaos_lock = threading.Lock()
        # commits the application asked for now: set on its thread, read on the IO thread, where the commit
        # runs while the application's thread waits (one consumer is one thread of the application's)
        self._chaos_app_commits = 0
        coordinator = self._coordinator
        rec = Recorder.open(destination, str(group), lambda: generation_view(coordinator),
                            buffered=not self.config.get("enable_auto_commit"))
        if rec is None:
            return
        incremental = cooperative(coordinator)
        fields, unnamed = member_start(self.config, incremental)
        rec.start(**fields)
        if unnamed is not None:
            rec.error(f"assignor {unnamed!r} has no name in the schema: member_start records {fields['assignor']}",
                      None, None, False)
        self._chaos = rec
        self._chaos_incremental = incremental
        self._chaos_hook(coordinator)
        if topics:  # subscribed by the constructor, with no listener
            self._subscription.rebalance_listener = RecordingListener(rec, None, incremental)

    def _chaos_hook(self, coordinator: Any) -> None:
        """Wrap this consumer's coordinator's commit paths (instance attributes; the class and other
        consumers keep the library's). The coordinator looks them up on itself when it calls them."""
        commit_sync = coordinator._commit_offsets_sync_async
        commit_async = coordinator.commit_offsets_async
        do_async = coordinator._do_commit_offsets_async

        async def commit_offsets_sync_async(offsets: Any, timeout_ms: int | None = None) -> Any:
            rec, tpos = self._chaos, offsets_of(offsets)
            if rec is None or not tpos:
                return await commit_sync(offsets, timeout_ms=timeout_ms)
            sent, auto = rec.sent(), not self._chaos_app_commits
            try:
                result = await commit_sync(offsets, timeout_ms=timeout_ms)
            except KafkaError as exc:
                rec.commit(answer_of(tpos, exc), sent, auto=auto)
                raise
            rec.commit(answer_of(tpos, result), sent, auto=auto)
            return result

        def commit_offsets_async(offsets: Any, callback: Callable[..., Any] | None = None) -> Any:
            rec, tpos = self._chaos, offsets_of(offsets)
            if rec is None or not tpos:
                return commit_async(offsets, callback=callback)
            pending = PendingCommit(tpos, rec.sent(), auto=not self._chaos_app_commits)
            with self._chaos_lock:
                self._chaos_pending.append(pending)
            try:
                return commit_async(offsets, callback=_Answer(self, pending, callback))
            except KafkaError as exc:
                self._chaos_answered(pending, exc)
                raise

        def do_commit_offsets_async(offsets: Any, callback: Callable[..., Any] | None = None) -> Any:
            future = do_async(offsets, callback)
            if isinstance(callback, _Answer):
                pending = callback.pending
                pending.requested = True
                # the response's own future: answered when it arrives, not when the callback is run
                future.add_both(lambda res: self._chaos_answered(pending, res))
            return future

        coordinator._commit_offsets_sync_async = commit_offsets_sync_async
        coordinator.commit_offsets_async = commit_offsets_async
        coordinator._do_commit_offsets_async = do_commit_offsets_async

    def _chaos_answered(self, pending: PendingCommit, result: Any) -> None:
        with self._chaos_lock:
            if pending.answered:
                return
            pending.answered = True
            self._chaos_pending.remove(pending)
        rec = self._chaos
        if rec is not None:
            rec.commit(answer_of(pending.offsets, result), pending.sent, auto=pending.auto)

    # ------------------------------------------------------------------ membership
    def subscribe(self, topics: Any = (), pattern: str | None = None, listener: Any = None) -> None:
        rec = self._chaos
        if rec is None:
            return super().subscribe(topics=topics, pattern=pattern, listener=listener)
        if listener is not None and not isinstance(listener, (ConsumerRebalanceListener,
                                                              AsyncConsumerRebalanceListener)):
            # the library's own check
            raise TypeError("listener must be a ConsumerRebalanceListener or AsyncConsumerRebalanceListener")
        return super().subscribe(topics=topics, pattern=pattern,
                                 listener=RecordingListener(rec, listener, self._chaos_incremental))

    # ------------------------------------------------------------------ records
    @held(waits=True)
    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> Any:
        rec = self._chaos
        if rec is None or not update_offsets:  # iteration's inner poll: records are handed by __next__
            return super().poll(timeout_ms=timeout_ms, max_records=max_records, update_offsets=update_offsets)
        rec.settle()  # the application polls again: the last batch is processed
        try:
            batches = super().poll(timeout_ms=timeout_ms, max_records=max_records)
        except KafkaError as exc:
            rec.error(f"poll raised {type(exc).__name__}: {exc}", getattr(exc, "errno", None), type(exc).__name__,
                      False)
            raise
        rec.hand_over([(m.topic, m.partition, m.offset) for records in batches.values() for m in records])
        return batches

    @held(waits=True)
    def __next__(self) -> Any:
        rec = self._chaos
        if rec is None:
            return super().__next__()
        rec.settle()  # asking for the next record: the last one is processed
        try:
            msg = super().__next__()
        except KafkaError as exc:
            rec.error(f"iteration raised {type(exc).__name__}: {exc}", getattr(exc, "errno", None),
                      type(exc).__name__, False)
            raise
        rec.hand_over([(msg.topic, msg.partition, msg.offset)])
        return msg

    # ------------------------------------------------------------------ commits (recorded by the hook)
    @held
    def commit(self, offsets: Any = None, timeout_ms: int | None = None) -> Any:
        return self._chaos_by_app(super().commit, offsets=offsets, timeout_ms=timeout_ms)

    def commit_async(self, offsets: Any = None, callback: Callable[..., Any] | None = None) -> Any:
        return self._chaos_by_app(super().commit_async, offsets=offsets, callback=callback)

    def _chaos_by_app(self, method: Callable[..., Any], **kwargs: Any) -> Any:
        """Run a commit the application asked for (so the hook records it as not ``auto``)."""
        if self._chaos is None:
            return method(**kwargs)
        self._chaos_app_commits += 1
        try:
            return method(**kwargs)
        finally:
            self._chaos_app_commits -= 1

    # ------------------------------------------------------------------ closing
    @held
    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        rec = self._chaos
        if rec is None:
            return super().close(autocommit=autocommit, timeout_ms=timeout_ms)

        # close's auto commit runs in the library's close
        rec.closing_of(self, lambda: _Library.close(self, autocommit=autocommit, timeout_ms=timeout_ms))
        return None

    def _chaos_unanswered(self) -> list[tuple[tuple[TPO, ...], Sent, bool]]:
        with self._chaos_lock:  # an answer arriving later is not recorded twice
            pending, self._chaos_pending = self._chaos_pending, []
            for c in pending:
                c.answered = True
        return [(c.offsets, c.sent, c.auto) for c in pending]


def _tps(partitions: Iterable[Any]) -> list[TP]:
    return sorted((tp.topic, tp.partition) for tp in partitions)
