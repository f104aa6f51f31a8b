"""kafka-python (pure Python) behind :class:`chaos.workload.consumer.ClientAdapter`.

Written against kafka-python 3.0.12 (the pinned release) and only that: it reads the coordinator's
state and wraps one of its coroutines, which are not a public API.

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

import logging
import threading
from collections.abc import Callable

import kafka
from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import KafkaError
from kafka.future import Future

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
        if spec.assignor is Assignor.COOPERATIVE_STICKY:
            raise ValueError("the kafka-python adapter does not support the cooperative-sticky assignor (KIP-429) "
                             "yet: use range, roundrobin or sticky, or client confluent-kafka/java")
        if spec.instance_id:
            raise ValueError("the kafka-python adapter does not support static membership (instance_id, KIP-345) "
                             "yet: drop instance_id or use client confluent-kafka/java")
        self.spec = spec
        self.spec_name = cfg.name
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
            **({"request_timeout_ms": spec.request_timeout_ms} if spec.request_timeout_ms is not None else {}),
        )
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
            tpos = sorted((tp.topic, tp.partition, om.offset) for tp, om in offsets.items())
            try:
                result = await send(offsets)
            except Exception as exc:
                self._report_auto(view, tpos, commit_error(exc))
                raise
            self._report_auto(view, tpos, CommitResult(Outcome.OK))
            return result

        coordinator._send_offset_commit_request = recorded_send

    def _report_auto(self, view: tuple[int | None, str | None], tpos: list[tuple[str, int, int]],
                     result: CommitResult) -> None:
        if self._callbacks is None:
            return
        self._pinned.view = view
        try:
            self._callbacks.auto_committed(tpos, result)
        finally:
            self._pinned.view = None

    def _off_loop(self, fn: Callable[[], None]) -> Future:
        return off_loop(self._consumer._net, f"{self.spec_name}-rebalance", fn)

    # ------------------------------------------------------------ ClientAdapter
    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        # called again with other topics, the coordinator's metadata changes and the member rejoins
        self._callbacks = callbacks
        self._consumer.subscribe(list(topics), listener=_Listener(callbacks, self._off_loop))

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
        meta = self._consumer.group_metadata()  # read under the coordinator's lock
        return _view(meta.generation_id, meta.member_id)

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
        # the library's close: the auto commit (auto mode), then on_partitions_revoked (or _lost) through the
        # listener, in which the member commits what it processed, then LeaveGroup
        self._consumer.close(autocommit=self.spec.commit_mode is CommitMode.AUTO, timeout_ms=COMMIT_TIMEOUT_MS)


def _tps(partitions) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for tp in partitions)


def _view(generation_id: int, member_id: str | None) -> tuple[int | None, str | None]:
    """(generation, member id), None for what the client cannot tell (-1 and '' after ``reset_generation``)."""
    return (generation_id if generation_id >= 0 else None), (member_id or None)


def _offsets(offsets: list[tuple[str, int, int]]) -> dict[TopicPartition, OffsetAndMetadata]:
    # leader_epoch -1: unknown (OffsetCommit v6+ sends it; -1 disables the broker's epoch check)
    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for t, p, o in offsets}
