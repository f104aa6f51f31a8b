"""Consumer worker: one OS process per group member, recording what it owned and did.

The loop is the same for every Python client library (the library sits behind
:class:`ClientAdapter`):

1. ``poll`` — the library runs its rebalance callbacks inside it; they record
   ``assigned`` / ``revoked`` / ``lost`` with the generation and member id the
   library itself reports;
2. polled records join a local queue; up to ``max_records`` of it are
   *processed* (optional per-record delay, optional user handler) and recorded
   as ``consumed`` per partition with the offsets, the generation and member id;
3. processed positions are committed per ``commit_mode``; every commit is
   recorded with the generation / member id it was sent with and an outcome
   from :mod:`chaos.outcome`.

On revocation a correct member commits what it processed of the revoked
partitions and drops their queued records. The deliberately wrong modes
(``wrong_mode``) break exactly one rule each, for checker validation:

* ``commit_before_process`` — commits a batch's end offsets *before*
  processing it (a crash in between loses records: commit ⇒ processed fails);
* ``ignore_revoke`` — keeps processing (and committing) queued records of
  partitions it no longer owns (a zombie: single ownership fails);
* ``skip_records`` — drops every ``skip_every``-th record unprocessed but
  commits past it (at-least-once fails).

When the user's handler raises on a record, ``on_handler_error``
(:class:`chaos.model.workload.HandlerErrorPolicy`) decides: ``stop`` (default)
records the exception as a fatal ``error`` event, writes its traceback to
``workers/<member>.traceback.txt`` and ends the member uncleanly; ``skip``
records a non-fatal ``error`` and counts the record processed; ``retry``
calls the handler again a bounded number of times with backoff, then stops.

SIGTERM/SIGINT stop the member cleanly (``member_stop`` clean=true, after the
library's close, which revokes and leaves the group — or not, for static
members, KIP-345). A SIGKILLed member writes nothing more; the runner records
its ``member_stop`` and its last commit in flight stays ``unknown``.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from chaos.checkers.incidents import traceback_path  # one place for the file's name: writer and reader
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.model.workload import (
    HANDLER_RETRIES,
    HANDLER_RETRY_BACKOFF_S,
    CommitMode,
    ConsumerSpec,
    HandlerErrorPolicy,
    WrongMode,
)
from chaos.outcome import Operation, Outcome, classify
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.spec import WorkerConfig

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class CommitResult:
    outcome: Outcome
    error_code: int | None = None
    error_name: str | None = None


class FatalClientError(Exception):
    """The client library says this member cannot go on (fenced, misconfigured)."""


class HandlerFailed(Exception):
    """The user's handler raised on a record and ``on_handler_error`` says the member stops."""

    def __init__(self, record: Record, attempts: int, cause: BaseException):
        super().__init__(f"handler raised on {record.topic}-{record.partition}@{record.offset}"
                         f"{f' ({attempts} attempts)' if attempts > 1 else ''}: {type(cause).__name__}: {cause}")
        self.record = record
        self.cause = cause


#: tracebacks kept per worker file under on_handler_error skip/retry (the events count every one)
_MAX_TRACEBACKS = 10


class Callbacks(Protocol):
    def error(self, message: str, code: int | None, name: str | None, fatal: bool) -> None: ...
    def assigned(self, partitions: list[TP], incremental: bool) -> None: ...
    def revoked(self, partitions: list[TP], incremental: bool) -> None: ...
    def lost(self, partitions: list[TP]) -> None: ...
    def auto_committed(self, offsets: list[tuple[str, int, int]], result: CommitResult) -> None: ...


class ClientAdapter(Protocol):
    """What the loop needs from a client library."""

    name: str
    version: str

    def subscribe(self, topics: list[str], callbacks: Callbacks) -> None:
        """Subscribe to ``topics``; a second call replaces the subscription (and rejoins the group)."""
    def poll(self, max_records: int, timeout: float) -> list[Record]: ...
    def group_view(self) -> tuple[int | None, str | None]:
        """(generation, member id) as the library itself reports it now."""
    def commit_sync(self, offsets: list[tuple[str, int, int]]) -> CommitResult: ...
    def commit_async(self, offsets: list[tuple[str, int, int]],
                     done: Callable[[CommitResult], None]) -> None: ...
    def close(self) -> None: ...


def classify_commit(code: int | None, name: str | None) -> CommitResult:
    return CommitResult(classify(Operation.COMMIT, code, name), code, name)


class InflightCommits:
    """Commits sent but not yet answered, mirrored in a small side file.

    A SIGKILLed member writes no more events, yet the history (docs/architecture.md) wants its
    in-flight commit recorded as ``unknown`` (never assumed). The worker
    writes each commit here *before* sending it and removes it once its
    outcome is recorded; the runner, after killing the member, turns what is
    left into ``commit`` events with outcome ``unknown`` (Jepsen's ``:info``).
    The page cache survives the process, so no fsync is needed; a torn write
    means the commit had not been sent yet, and is ignored by the reader.
    """

    def __init__(self, path: Path):
        self.path = path
        self.pending: dict[int, dict] = {}
        self._next = 0

    def add(self, entry: dict) -> int:
        self._next += 1
        self.pending[self._next] = entry
        self._flush()
        return self._next

    def done(self, token: int) -> None:
        self.pending.pop(token, None)
        self._flush()

    def _flush(self) -> None:
        self.path.write_bytes(orjson.dumps(list(self.pending.values())))

    @staticmethod
    def read(path: Path) -> list[dict]:
        try:
            return list(orjson.loads(path.read_bytes()))
        except (FileNotFoundError, orjson.JSONDecodeError):
            return []


def inflight_path(run_dir: str | Path, name: str) -> Path:
    return Path(run_dir) / "workers" / f"{name}.inflight.json"


def write_traceback(run_dir: str | Path, name: str, header: str, exc: BaseException, append: bool = False) -> None:
    """Write (or append) ``exc``'s traceback under a one-line ``header``; never raises (best effort)."""
    text = f"{header}\n{''.join(traceback.format_exception(exc))}\n"
    try:
        path = traceback_path(run_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w") as f:
            f.write(text)
    except OSError:
        pass


def subscription_path(run_dir: str | Path, name: str) -> Path:
    """Where the runner asks a member for another subscription: a JSON list of topics, then SIGUSR1."""
    return Path(run_dir) / "workers" / f"{name}.subscription.json"


def _sent_with(before: dict, after: dict) -> dict:
    """The generation and member id a commit went out with, as far as the library's view bounds them.

    The library builds the OffsetCommit request on its own thread, after ``commit()`` was called:
    librdkafka reads ``rkcg_generation_id`` when its main thread serves the commit op, which may be
    after it handled a JoinGroup answer (a commit asked for at generation 4 went out with 5 in a
    fresh-clone run: "Committing offsets ... with generation-id 5 in join-state wait-sync"). The
    view read before the call and the one read once it was answered bound what was sent: when
    they agree that is it (a generation only rises, or resets to none); when they differ, what
    was sent is not known and the commit carries no generation, so the fencing checker counts it
    unjudged rather than judging it by a generation it may not have carried.
    """
    if before == after:
        return before
    return {"generation": None,
            "member_id": before["member_id"] if before["member_id"] == after["member_id"] else None}


class Member:
    """The processing loop of one group member (see module docstring)."""

    def __init__(self, cfg: WorkerConfig, client: ClientAdapter, events: EventWriter, log: ClientLog | None = None):
        assert cfg.consumer is not None
        self.cfg = cfg
        #: the member's client log; an error event names its last line (the client's context of the error)
        self.log = log
        self.spec: ConsumerSpec = cfg.consumer
        self.client = client
        self.events = events
        self.queue: deque[Record] = deque()
        self.owned: set[TP] = set()
        self.processed: dict[TP, int] = {}   # next offset to read, per partition processed so far
        self.committed: dict[TP, int] = {}
        self.stopping = False
        self.resubscribe = False  # set by SIGUSR1: read subscription_path and subscribe to it
        self.seen = 0
        self.handler = _load_handler(cfg.handler)
        self.handler_errors = 0
        self.inflight = InflightCommits(inflight_path(cfg.run_dir, cfg.name))

    # ----------------------------------------------------------- callbacks
    def _view(self) -> dict:
        gen, member = self.client.group_view()
        return {"generation": gen, "member_id": member}

    def error(self, message: str, code: int | None, name: str | None, fatal: bool) -> None:
        self.events.emit(Kind.ERROR, message=message[:1000], error_code=code, error_name=name, fatal=fatal,
                         log_ref=self._log_ref())

    def _log_ref(self) -> str | None:
        return self.log.ref() if self.log is not None else None

    def assigned(self, partitions: list[TP], incremental: bool) -> None:
        self.owned |= set(partitions)
        self.events.emit(Kind.ASSIGNED, group=self.cfg.group, partitions=[list(p) for p in partitions],
                         incremental=incremental, **self._view())

    def revoked(self, partitions: list[TP], incremental: bool) -> None:
        self.events.emit(Kind.REVOKED, group=self.cfg.group, partitions=[list(p) for p in partitions],
                         incremental=incremental, **self._view())
        if self.spec.wrong_mode is WrongMode.IGNORE_REVOKE:
            return  # wrong on purpose: keep the partitions' queued records and go on processing them
        gone = set(partitions)
        # last chance to commit what was processed (KIP-429: revoke callbacks run before giving up ownership)
        if self.spec.commit_mode is not CommitMode.AUTO:
            self._commit({tp: o for tp, o in self.processed.items() if tp in gone}, sync=True)
        self._drop(gone)

    def lost(self, partitions: list[TP]) -> None:
        self.events.emit(Kind.LOST, group=self.cfg.group, partitions=[list(p) for p in partitions],
                         incremental=False, **self._view())
        if self.spec.wrong_mode is not WrongMode.IGNORE_REVOKE:
            self._drop(set(partitions))  # lost: no commit is possible any more

    def end_fatally(self) -> None:
        """Record ``member_stop`` (clean=false), then leave at once (the client may block in close:
        librdkafka's close waits for a group it may no longer talk to)."""
        self.events.emit(Kind.MEMBER_STOP, group=self.cfg.group, clean=False, signal=None)
        self.events.close()
        os._exit(1)

    def auto_committed(self, offsets: list[tuple[str, int, int]], result: CommitResult) -> None:
        if offsets:
            self.events.emit(Kind.COMMIT, group=self.cfg.group, offsets=[list(o) for o in offsets],
                             outcome=result.outcome.value, error_code=result.error_code,
                             error_name=result.error_name, auto=True, **self._view())

    def _drop(self, gone: set[TP]) -> None:
        self.owned -= gone
        self.queue = deque(r for r in self.queue if (r.topic, r.partition) not in gone)
        for tp in gone:
            self.processed.pop(tp, None)

    # ----------------------------------------------------------- commits
    def _commit(self, positions: dict[TP, int], sync: bool) -> None:
        offsets = sorted((t, p, o) for (t, p), o in positions.items() if self.committed.get((t, p)) != o)
        if not offsets:
            return
        view = self._view()
        token = self.inflight.add({"group": self.cfg.group, "offsets": [list(o) for o in offsets], **view})
        # the event is stamped with the time the commit was *sent*: the coordinator judged it between
        # then and the answer, and a member frozen (SIGSTOP) in between would otherwise record an old
        # generation's accepted commit long after the group moved on
        sent_ns, sent_ts = time.monotonic_ns(), time.time()

        def record(result: CommitResult) -> None:
            answered_ns = time.monotonic_ns()
            self.events.emit(Kind.COMMIT, mono_ns=sent_ns, ts=sent_ts, group=self.cfg.group,
                             offsets=[list(o) for o in offsets], outcome=result.outcome.value,
                             error_code=result.error_code, error_name=result.error_name, auto=False,
                             answered_ns=answered_ns, **_sent_with(view, self._view()))
            self.inflight.done(token)
            if result.outcome is Outcome.OK:
                for t, p, o in offsets:
                    self.committed[(t, p)] = o

        if sync:
            record(self.client.commit_sync(offsets))
        else:
            self.client.commit_async(offsets, record)

    # ----------------------------------------------------------- the loop
    def _process(self, batch: list[Record]) -> None:
        per_partition: dict[TP, list[int]] = {}
        for _i, rec in enumerate(batch):
            self.seen += 1
            if self.spec.wrong_mode is WrongMode.SKIP_RECORDS and self.seen % self.spec.skip_every == 0:
                continue  # wrong on purpose: not processed, but the position moves past it
            if self.spec.processing_delay_ms:
                time.sleep(self.spec.processing_delay_ms / 1000)
            if self.handler is not None:
                try:
                    self._handle(rec)
                except HandlerFailed:
                    self._record_consumed(per_partition)  # what was processed before the failing record
                    raise
            per_partition.setdefault((rec.topic, rec.partition), []).append(rec.offset)
        self._record_consumed(per_partition)

    def _record_consumed(self, per_partition: dict[TP, list[int]]) -> None:
        if not per_partition:
            return
        view = self._view()
        for (topic, partition), offsets in per_partition.items():
            self.events.emit(Kind.CONSUMED, group=self.cfg.group, topic=topic, partition=partition,
                             offsets=offsets, **view)

    def _handle(self, rec: Record) -> None:
        """Call the user's handler on ``rec`` under ``on_handler_error`` (HandlerErrorPolicy); raises
        :class:`HandlerFailed` when the member must stop."""
        policy = self.spec.on_handler_error
        attempts = 1 + (HANDLER_RETRIES if policy is HandlerErrorPolicy.RETRY else 0)
        wait = HANDLER_RETRY_BACKOFF_S
        where = f"{rec.topic}-{rec.partition}@{rec.offset}"
        for attempt in range(1, attempts + 1):
            try:
                assert self.handler is not None
                self.handler(rec)
                return
            except Exception as exc:  # noqa: BLE001 - the user's code: any exception is its failure
                self.handler_errors += 1
                text = f"{type(exc).__name__}: {exc}"
                if policy is HandlerErrorPolicy.SKIP:
                    self._keep_traceback(f"{where} skipped (on_handler_error=skip)", exc)
                    self.error(f"handler raised on {where}, record skipped (on_handler_error=skip): {text}",
                               None, type(exc).__name__, False)
                    return
                if attempt < attempts:
                    self._keep_traceback(f"{where} attempt {attempt} of {attempts}", exc)
                    self.error(f"handler raised on {where}, attempt {attempt} of {attempts}, retrying in "
                               f"{wait:.1f}s (on_handler_error=retry): {text}", None, type(exc).__name__, False)
                    time.sleep(wait)
                    wait *= 2
                    continue
                raise HandlerFailed(rec, attempts, exc) from exc

    def _keep_traceback(self, header: str, exc: BaseException) -> None:
        if self.handler_errors <= _MAX_TRACEBACKS:
            write_traceback(self.cfg.run_dir, self.cfg.name, header, exc, append=True)

    def _change_subscription(self) -> None:
        """Subscribe to the topics the runner wrote (the change-subscription fault).

        The new subscription reaches the coordinator in the member's next
        JoinGroup; the revocations and assignments that follow are recorded by
        the callbacks as usual. Queued records of topics no longer subscribed
        are kept until revoked, like any owned partition's.
        """
        self.resubscribe = False
        try:
            topics = [str(t) for t in orjson.loads(subscription_path(self.cfg.run_dir, self.cfg.name).read_bytes())]
        except (FileNotFoundError, orjson.JSONDecodeError, TypeError) as exc:
            self.error(f"subscription change ignored: {exc}", None, None, False)
            return
        self.client.subscribe(topics, self)

    def run(self) -> None:
        spec = self.spec
        self.client.subscribe([self.cfg.topic], self)
        while not self.stopping:
            if self.resubscribe:
                self._change_subscription()
            room = max(1, spec.max_records - len(self.queue))
            for rec in self.client.poll(room, 0.0 if self.queue else 0.2):
                self.queue.append(rec)
            if not self.queue:
                continue
            chunk = spec.process_chunk or spec.max_records
            batch = [self.queue.popleft() for _ in range(min(chunk, len(self.queue)))]
            ends: dict[TP, int] = {}
            for rec in batch:
                ends[(rec.topic, rec.partition)] = rec.offset + 1
            if spec.wrong_mode is WrongMode.COMMIT_BEFORE_PROCESS and spec.commit_mode is not CommitMode.AUTO:
                self._commit(ends, sync=True)   # wrong on purpose: commit, then process
                self._process(batch)
                self.processed.update(ends)
                continue
            self._process(batch)
            self.processed.update(ends)
            if spec.commit_mode is CommitMode.SYNC:
                self._commit(ends, sync=True)
            elif spec.commit_mode is CommitMode.ASYNC:
                self._commit(ends, sync=False)
            # AUTO: the library commits the positions of earlier polls on its own timer


def _load_handler(ref: str | None) -> Callable[[Record], None] | None:
    if not ref:
        return None
    module, _, func = ref.partition(":")
    return getattr(importlib.import_module(module), func)


def make_client(cfg: WorkerConfig, log: ClientLog | None = None) -> ClientAdapter:
    assert cfg.consumer is not None
    from chaos.model.workload import Client

    if cfg.consumer.client is Client.CONFLUENT_KAFKA:
        from chaos.workload.clients.confluent import ConfluentClient
        return ConfluentClient(cfg, log)
    if cfg.consumer.client is Client.KAFKA_PYTHON:
        import kafka  # the release this worker imports: its PYTHONPATH starts with the one client_version names

        if int(str(kafka.__version__).split(".")[0]) < 3:  # 2.x: poll-driven coordinator, other internals
            from chaos.workload.clients.kafka_python2 import KafkaPython2Client
            return KafkaPython2Client(cfg, log)
        from chaos.workload.clients.kafka_python import KafkaPythonClient
        return KafkaPythonClient(cfg, log)
    raise ValueError(f"client {cfg.consumer.client} has no Python adapter (the Java client runs VerifiableConsumer)")


def run_consumer(cfg: WorkerConfig) -> int:
    spec = cfg.consumer
    assert spec is not None
    events = EventWriter.for_run(cfg.run_dir, cfg.name)
    log = ClientLog(cfg.run_dir, cfg.name)
    client = make_client(cfg, log)
    member = Member(cfg, client, events, log)

    def stop(*_):
        member.stopping = True

    def resubscribe(*_):
        member.resubscribe = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, resubscribe)
    events.emit(Kind.MEMBER_START, group=cfg.group, client=client.name, client_version=client.version,
                instance_id=spec.instance_id, assignor=spec.assignor.value, protocol=spec.protocol.value,
                commit_mode=spec.commit_mode.value, session_timeout_ms=spec.session_timeout_ms,
                max_poll_interval_ms=spec.max_poll_interval_ms,
                auto_commit_interval_ms=spec.auto_commit_interval_ms if spec.commit_mode is CommitMode.AUTO else None,
                wrong_mode=spec.wrong_mode.value if spec.wrong_mode else None)
    try:
        member.run()
        client.close()  # revokes (committing processed offsets) and leaves the group
    except FatalClientError:  # already recorded as a fatal error event
        member.end_fatally()
    except HandlerFailed as exc:  # on_handler_error stop (or retry exhausted): the member dies of it
        write_traceback(cfg.run_dir, cfg.name, f"{cfg.name} stopped: {exc}", exc.cause,
                        append=member.handler_errors > 1)
        events.emit(Kind.ERROR, message=str(exc)[:1000], error_code=None, error_name=type(exc.cause).__name__,
                    fatal=True, log_ref=log.ref())
        events.emit(Kind.MEMBER_STOP, group=cfg.group, clean=False, signal=None)
        events.close()
        return 1
    except Exception as exc:  # noqa: BLE001 - recorded, then the worker exits non-zero
        write_traceback(cfg.run_dir, cfg.name, f"{cfg.name} stopped: {type(exc).__name__}: {exc}", exc)
        events.emit(Kind.ERROR, message=f"{type(exc).__name__}: {exc}"[:1000], error_code=None, error_name=None,
                    fatal=True, log_ref=log.ref())
        events.emit(Kind.MEMBER_STOP, group=cfg.group, clean=False, signal=None)
        events.close()
        return 1
    events.emit(Kind.MEMBER_STOP, group=cfg.group, clean=True, signal=None)
    events.close()
    log.close()
    return 0
