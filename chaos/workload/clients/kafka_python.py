"""kafka-python (pure Python) behind :class:`chaos.workload.consumer.ClientAdapter`.

Written against kafka-python 3.0.12 (the pinned release) and only that: it reads the coordinator's
state and wraps one of its coroutines, which are not a public API. A member on a 2.x release
(``client_version``) runs :mod:`chaos.workload.clients.kafka_python2` instead
(:func:`chaos.workload.consumer.make_client` chooses by ``kafka.__version__``); what both share is in
:mod:`chaos.workload.clients.kafka_python_common`.

Threads: kafka-python 3 runs all network work and the group protocol on its own IO thread
(``kafka-io-<client id>``); ``poll``, ``commit`` and ``close`` block the caller while their
coroutine runs there. Rebalance listeners run on that IO thread too, and a listener that calls a
blocking consumer method there (``commit()``) is refused (``RuntimeError: Cannot block on net.run()
from the IO thread itself``). The member commits what it processed when partitions are revoked, so
this adapter's listener is an ``AsyncConsumerRebalanceListener``: each callback runs the member's
(:class:`chaos.workload.consumer.Callbacks`) on a short-lived thread of its own and awaits it, which
keeps the IO loop free to send that commit and the heartbeats. The caller's thread is blocked in
``poll`` (or ``close``) meanwhile — the coordinator runs listeners only inside those — so the member's
state is never touched by two threads at once.

Generation and member id: :meth:`KafkaPythonClient.group_view` reads the consumer's
``group_metadata()`` (the coordinator's ``Generation`` — set from the JoinGroup response, reset to
generation -1 by ``reset_generation`` — read under its lock; ``kafka/coordinator/base.py``). That is
the generation the rebalance callbacks belong to (``_on_join_prepare_async`` and
``_on_join_complete_async`` run with it) and the one a commit sent now carries:
``ConsumerCoordinator._send_offset_commit_request`` (``kafka/coordinator/consumer.py``) stamps
``generation_if_stable()`` — the same object, but only while the member state is ``STABLE`` — on
every OffsetCommit; while not stable it fails the commit locally (``RebalanceInProgressError`` /
``CommitFailedError``) and sends nothing.

Auto-commit: kafka-python commits ``all_consumed_offsets()`` (the positions of earlier polls) on its
own timer inside ``poll`` (``_maybe_auto_commit_offsets_async``), synchronously before a rebalance
(``_on_join_prepare_async``) and on close. Every attempt is one ``_send_offset_commit_request``
coroutine on the IO thread; in ``auto`` commit mode this adapter wraps that coroutine on the
coordinator instance, reading the generation just before the library reads it to build the request
(no suspension point between the two reads) and reporting each attempt's result to
``Callbacks.auto_committed`` (with :meth:`group_view` pinned to the sent generation while the callback
runs, on the IO thread).

Joins: kafka-python 3.0.12 runs JoinGroup/SyncGroup as a task that a ``poll`` waits for only until
its own timeout; the next ``poll`` re-awaits the task only if it is still running and only if the
coordinator still thinks it must rejoin. With the worker's short polls (0.2 s) both go wrong: a task
that completed between two polls is dropped and its JoinGroup sent again (``join_group_async``), and a
leader that rejoined because the topic's metadata changed computes the new assignment inside the task,
after which ``need_rejoin()`` is false and the SyncGroup answer is never applied — the member stays
with no partitions and no heartbeats (seen: an auto-commit member that never consumed, 2 runs in 4). The worker
therefore lets each join run to its end (:meth:`KafkaPythonClient._join_whole`); an instrumented
application keeps the library's behaviour, which kafka-chaos then observes.

Lost partitions: a member the coordinator has already dropped (its generation reset by a fenced
heartbeat or commit) gets ``on_partitions_lost`` at its next rejoin or on close (KIP-429 semantics;
``ConsumerCoordinator._on_join_prepare_async`` / ``_on_close_prepare_async``), recorded as ``lost``.

Not supported by this adapter (rejected with ``ValueError``): ``cooperative-sticky`` and static
membership (``instance_id``). kafka-python 3 has both (KIP-429 ``CooperativeStickyAssignor``,
``group_instance_id``, KIP-345); they are not wired or tested here yet.

Client log: with a :class:`chaos.workload.clients.client_log.ClientLog` the ``kafka`` loggers go to
the member's client log — ``kafka.coordinator`` at DEBUG (JoinGroup/SyncGroup sent and answered,
heartbeats and their failures, generation resets), the rest of ``kafka`` at INFO (connections
and disconnects, offset resets).

Closing: ``KafkaConsumer.close`` commits the consumed positions (``auto`` mode), then calls
``on_partitions_revoked`` (``on_partitions_lost`` when the member was already out of the group) and
leaves the group — the order of the Java client's ``onLeavePrepare``; the member commits what it
processed in that revocation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import kafka
from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka.errors import KafkaError
from kafka.future import Future

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


class _Listener(AsyncConsumerRebalanceListener):
    """The member's callbacks, each run off the IO thread and awaited (module docstring, "Threads")."""

    def __init__(self, callbacks: Callbacks, off_loop: Callable[[Callable[[], None]], Future]):
        self.callbacks = callbacks
        self.off_loop = off_loop

    async def on_partitions_revoked(self, revoked):
        if revoked:  # kafka-python also calls it with an empty set before the first join
            tps = _tps(revoked)
            await self.off_loop(lambda: self.callbacks.revoked(tps, False))

    async def on_partitions_assigned(self, assigned):
        tps = _tps(assigned)
        await self.off_loop(lambda: self.callbacks.assigned(tps, False))

    async def on_partitions_lost(self, lost):
        tps = _tps(lost)
        await self.off_loop(lambda: self.callbacks.lost(tps))


def off_loop(net, name: str, fn: Callable[[], None]) -> Future:
    """Run ``fn`` on a thread of its own; the returned future (awaitable on kafka-python's IO loop)
    completes on that loop when ``fn`` returns, failed with what ``fn`` raised."""
    done = Future()

    def run() -> None:
        error: BaseException | None = None
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting listener, which re-raises it
            error = exc

        async def complete() -> None:  # on the IO thread: the loop resumes the awaiting listener
            if error is None:
                done.success(None)
            else:
                done.failure(error)

        net.call_soon_threadsafe(complete)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


class KafkaPythonClient:
    name = Client.KAFKA_PYTHON.value
    version = kafka.__version__

    def __init__(self, cfg: WorkerConfig, log: ClientLog | None = None):
        spec = cfg.consumer
        assert spec is not None
        if log is not None:
            keep_logs(log)
        refuse_unwired(spec)
        self.spec = spec
        self.spec_name = cfg.name
        self._callbacks: Callbacks | None = None
        self._pinned = PinnedView()
        self._consumer = KafkaConsumer(**consumer_config(cfg))
        self._coordinator = self._consumer._coordinator
        self._join_whole(spec.max_poll_interval_ms + spec.session_timeout_ms)
        if spec.commit_mode is CommitMode.AUTO:
            self._hook_auto_commits()

    def _join_whole(self, bound_ms: int) -> None:
        """Let a join ``poll`` starts run to its end (bounded by ``bound_ms``) instead of the poll's timeout.

        kafka-python 3.0.12 loses a join a poll gave up on (module docstring, "Joins"): the coordinator's
        ``ensure_active_group``, which ``poll`` calls with what is left of its own timeout, is wrapped on
        this consumer's coordinator to wait at least the rebalance timeout (``max_poll_interval_ms``) plus
        a session for the SyncGroup answer, so a rebalance blocks ``poll`` until it completes.
        """
        coordinator = self._coordinator
        join = coordinator.ensure_active_group

        def ensure_active_group(timeout_ms=None):
            return join(timeout_ms=None if timeout_ms is None else max(timeout_ms, bound_ms))

        coordinator.ensure_active_group = ensure_active_group

    # ------------------------------------------------------------ auto-commit hook
    def _hook_auto_commits(self) -> None:
        coordinator = self._coordinator
        send = coordinator._send_offset_commit_request

        async def recorded_send(offsets):
            if not offsets:
                return await send(offsets)
            # read on the IO thread with no suspension point before send() reads it for the request
            generation = coordinator.generation_if_stable()
            view = (None, None) if generation is None else _view(generation.generation_id, generation.member_id)
            tpos = _tpos(offsets)
            try:
                result = await send(offsets)
            except Exception as exc:
                self._pinned.report(self._callbacks, view, tpos, commit_error(exc))
                raise
            self._pinned.report(self._callbacks, view, tpos, CommitResult(Outcome.OK))
            return result

        coordinator._send_offset_commit_request = recorded_send

    def _off_loop(self, fn: Callable[[], None]) -> Future:
        return off_loop(self._consumer._net, f"{self.spec_name}-rebalance", fn)

    # ------------------------------------------------------------ ClientAdapter
    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        # called again with other topics, the coordinator's metadata changes and the member rejoins
        self._callbacks = callbacks
        self._consumer.subscribe(list(topics), listener=_Listener(callbacks, self._off_loop))

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        return records(self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records))

    def group_view(self) -> tuple[int | None, str | None]:
        pinned = self._pinned.get()
        if pinned is not None:
            return pinned
        meta = self._consumer.group_metadata()  # read under the coordinator's lock
        return _view(meta.generation_id, meta.member_id)

    def commit_sync(self, offsets: list[tuple[str, int, int]]) -> CommitResult:
        try:
            self._consumer.commit(offsets=_offsets(offsets), timeout_ms=COMMIT_TIMEOUT_MS)
        except KafkaError as exc:
            return commit_error(exc)
        return CommitResult(Outcome.OK)

    def commit_async(self, offsets: list[tuple[str, int, int]], done: Callable[[CommitResult], None]) -> None:
        commit_async(self._consumer, offsets, done)

    def close(self) -> None:
        # the library's close: the auto commit (auto mode), then on_partitions_revoked (or _lost) through the
        # listener, in which the member commits what it processed, then LeaveGroup
        self._consumer.close(autocommit=self.spec.commit_mode is CommitMode.AUTO, timeout_ms=COMMIT_TIMEOUT_MS)

