"""kafka-python 2.x (2.0.0 to 2.3.x) behind :class:`chaos.workload.consumer.ClientAdapter`.

A member whose ``client_version`` is a 2.x release runs this adapter (:func:`chaos.workload.consumer.make_client`
chooses by ``kafka.__version__``); 3.x runs :mod:`chaos.workload.clients.kafka_python`. kafka-python 3 is a
rewrite with its own IO thread; 2.x runs the group protocol inside ``poll`` on the caller's thread (JoinGroup,
SyncGroup, the rebalance listener, auto commits) and sends heartbeats from a heartbeat thread, and this adapter
reads that older coordinator's state. What both adapters share is in
:mod:`chaos.workload.clients.kafka_python_common`. Written against 2.2.15 and 2.3.3 and checked on 2.0.0; it
reads no public API for the generation, so every name it reads is listed here.

Generation and member id: ``KafkaConsumer._coordinator`` (a ``ConsumerCoordinator``) keeps a
``Generation(generation_id, member_id, protocol)`` in ``_generation`` (kafka-python ``kafka/coordinator/base.py``:
set from the JoinGroup answer in ``_handle_join_group_response`` and reset to generation -1 by
``reset_generation`` when the coordinator fences the member or it leaves, both under the coordinator's
``_lock``). :meth:`KafkaPython2Client.group_view` reads ``_generation`` under that lock: it is the generation the
rebalance callbacks belong to (``join_group`` calls ``_on_join_prepare`` and ``_on_join_complete`` with it). The
library's own accessor, ``generation()`` (2.0.0; renamed ``generation_if_stable()`` by 2.2.15, the old name deprecated),
returns it only while the member state is ``STABLE`` and None otherwise, which would hide the generation a
revocation belongs to when the member is already out of the group; it is what the library stamps on an
OffsetCommit (``ConsumerCoordinator._send_offset_commit_request`` in ``kafka/coordinator/consumer.py``; while not
stable it fails the commit locally and sends nothing), so the auto-commit hook below reads that one.

Auto-commit: kafka-python commits ``all_consumed_offsets()`` (the positions of earlier polls) on its own timer
inside ``poll`` (``_maybe_auto_commit_offsets_async``), synchronously before a rebalance (``_on_join_prepare``)
and on close. All three go through ``_send_offset_commit_request`` on the polling thread; in ``auto`` commit mode
this adapter wraps that method on the coordinator instance and reads the stable generation just before and just
after it: the library read it in between, and only the heartbeat thread can change it meanwhile (a fenced
heartbeat resets it), so when the two reads agree that is what was sent, and when they differ the attempt is
recorded with no generation (unjudged, as the member's own commits are when the generation moved while they
were sent, ``chaos.workload.consumer._sent_with``). Each attempt's result goes to ``Callbacks.auto_committed``,
with :meth:`group_view` pinned to the sent generation while the callback runs (the answer may be handled on the
heartbeat thread).

Lost partitions: 2.x has no ``on_partitions_lost`` (KIP-429 came with 3.x): ``_on_join_prepare`` calls
``on_partitions_revoked`` with everything the member held, also when the member had already fallen out of the
group (its generation reset by a fenced heartbeat or commit, or by leaving after ``max_poll_interval_ms``). Then
nothing it held can be committed any more (the library fails the commit locally), so this adapter reports that
revocation as ``lost``, as the Java client's ``onJoinPrepare`` does for a member without a generation; with a
generation it is a revocation, in which the member commits what it processed.

Closing: 2.x's ``KafkaConsumer.close`` leaves the group without calling the listener; :meth:`close` commits the
consumed positions first (``auto`` mode), then reports the revocation itself (``lost`` without a generation) so
that the member commits what it processed, then closes: the order of the Java client's ``onLeavePrepare``.

Releases: 2.0.0 has no sticky assignor (refused at start), no ``timeout_ms`` on ``commit`` / ``close`` (its
synchronous commit retries retriable errors without bound) and an ``OffsetAndMetadata`` without a leader epoch;
the adapter passes a timeout only where the release takes one. kafka-python 2.x refuses a ``request_timeout_ms``
not above ``session_timeout_ms`` (refused here in one line) and waits for a JoinGroup answer no longer than
``request_timeout_ms`` (3.x: the rebalance timeout); its default (305 s) is above any ``max_poll_interval_ms``
kafka-chaos uses. Not driven (refused with ``ValueError``): ``cooperative-sticky`` (2.x has no KIP-429) and static
membership (``instance_id``; 2.3 has ``group_instance_id``, not wired).

Client log: as the 3.x adapter's (:func:`chaos.workload.clients.kafka_python_common.keep_logs`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import kafka
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.errors import KafkaError

from chaos.model.workload import Client, CommitMode
from chaos.outcome import Outcome
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.clients.kafka_python_common import (
    COMMIT_TIMEOUT_MS,
    PinnedView,
    _offsets,
    _tpos,
    _tps,
    _view,
    commit_async,
    commit_error,
    consumer_config,
    keep_logs,
    records,
    refuse_unwired,
)
from chaos.workload.consumer import Callbacks, CommitResult, Record
from chaos.workload.spec import WorkerConfig

View = tuple[int | None, str | None]


def timeout_for(method: Callable[..., Any]) -> dict[str, int]:
    """The ``timeout_ms`` keyword a kafka-python method is given: :data:`COMMIT_TIMEOUT_MS`, or none where it takes
    none (2.0.0's ``commit``, ``close`` and ``_maybe_auto_commit_offsets_sync``)."""
    return {"timeout_ms": COMMIT_TIMEOUT_MS} if "timeout_ms" in inspect.signature(method).parameters else {}


def sent_view(before: View, after: View) -> View:
    """What an auto commit went out with, from the stable generation read before and after the library read it
    (module docstring, "Auto-commit"): that one when both agree, else no generation."""
    if before == after:
        return before
    return None, before[1] if before[1] == after[1] else None


class _Listener(ConsumerRebalanceListener):
    """The member's callbacks, called by the coordinator inside ``poll`` on the member's own thread."""

    def __init__(self, callbacks: Callbacks, client: KafkaPython2Client):
        self.callbacks = callbacks
        self.client = client

    def on_partitions_revoked(self, revoked):
        if not revoked:  # kafka-python also calls it with an empty set before the first join
            return
        tps = _tps(revoked)
        if self.client.in_group():
            self.callbacks.revoked(tps, False)
        else:  # out of the group already: nothing of it can be committed (module docstring, "Lost partitions")
            self.callbacks.lost(tps)

    def on_partitions_assigned(self, assigned):
        self.callbacks.assigned(_tps(assigned), False)


class KafkaPython2Client:
    name = Client.KAFKA_PYTHON.value
    version = kafka.__version__

    def __init__(self, cfg: WorkerConfig, log: ClientLog | None = None):
        spec = cfg.consumer
        assert spec is not None
        if log is not None:
            keep_logs(log)
        refuse_unwired(spec)
        if spec.request_timeout_ms is not None and spec.request_timeout_ms <= spec.session_timeout_ms:
            raise ValueError(f"kafka-python {kafka.__version__} needs request_timeout_ms above session_timeout_ms "
                             f"({spec.request_timeout_ms} <= {spec.session_timeout_ms}): raise it, or use a 3.x release")
        self.spec = spec
        self._callbacks: Callbacks | None = None
        self._pinned = PinnedView()
        self._consumer = KafkaConsumer(**consumer_config(cfg))
        self._coordinator = self._consumer._coordinator
        # the timeout a synchronous commit and close are given, where the release takes one
        self._commit_timeout = timeout_for(self._consumer.commit)
        self._auto_commit_timeout = timeout_for(self._coordinator._maybe_auto_commit_offsets_sync)
        self._close_timeout = timeout_for(self._consumer.close)
        if spec.commit_mode is CommitMode.AUTO:
            self._hook_auto_commits()

    # ------------------------------------------------------------ the coordinator's state
    def _generation_view(self) -> View:
        """``_generation`` read under the coordinator's lock, whatever the member state."""
        with self._coordinator._lock:
            generation = self._coordinator._generation
            return _view(generation.generation_id, generation.member_id)

    def _stable_view(self) -> View:
        """The generation the library stamps on an OffsetCommit sent now (None while not ``STABLE``)."""
        coordinator = self._coordinator
        stable = getattr(coordinator, "generation_if_stable", None) or coordinator.generation
        generation = stable()
        return (None, None) if generation is None else _view(generation.generation_id, generation.member_id)

    def in_group(self) -> bool:
        """Whether the member has a generation (not reset since it last joined)."""
        return self._generation_view()[0] is not None

    # ------------------------------------------------------------ auto-commit hook
    def _hook_auto_commits(self) -> None:
        coordinator = self._coordinator
        send = coordinator._send_offset_commit_request

        def recorded_send(offsets):
            if not offsets:
                return send(offsets)
            before = self._stable_view()
            future = send(offsets)
            view = sent_view(before, self._stable_view())
            tpos = _tpos(offsets)
            future.add_callback(lambda _: self._pinned.report(self._callbacks, view, tpos, CommitResult(Outcome.OK)))
            future.add_errback(lambda exc: self._pinned.report(self._callbacks, view, tpos, commit_error(exc)))
            return future

        coordinator._send_offset_commit_request = recorded_send

    # ------------------------------------------------------------ ClientAdapter
    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        # called again with other topics, the coordinator's metadata changes and the member rejoins
        self._callbacks = callbacks
        self._consumer.subscribe(list(topics), listener=_Listener(callbacks, self))

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        return records(self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records))

    def group_view(self) -> View:
        pinned = self._pinned.get()
        if pinned is not None:
            return pinned
        return self._generation_view()

    def commit_sync(self, offsets: list[tuple[str, int, int]]) -> CommitResult:
        try:
            self._consumer.commit(offsets=_offsets(offsets), **self._commit_timeout)
        except KafkaError as exc:
            return commit_error(exc)
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets: list[tuple[str, int, int]], done: Callable[[CommitResult], None]) -> None:
        commit_async(self._consumer, offsets, done)

    def close(self) -> None:
        if self.spec.commit_mode is CommitMode.AUTO:
            # what close(autocommit=True) would do, but before the revocation is reported
            self._coordinator._maybe_auto_commit_offsets_sync(**self._auto_commit_timeout)
        owned = _tps(self._consumer.assignment())
        if owned and self._callbacks is not None:
            if self.in_group():
                self._callbacks.revoked(owned, False)
            else:
                self._callbacks.lost(owned)
        self._consumer.close(autocommit=False, **self._close_timeout)
