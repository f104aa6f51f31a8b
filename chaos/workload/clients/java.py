"""The Java client: Kafka's own ``VerifiableConsumer`` as a group member, translated into our events.

The worker process (``python -m chaos.workload.worker CONFIG.json`` with
``client: java``) runs :func:`run_java_consumer`: it starts
``org.apache.kafka.tools.VerifiableConsumer`` (``kafka-tools`` jar) as its child
JVM, reads the JVM's output and writes our events. The JVM dies with it:
``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the child (:func:`chaos.process._pdeathsig`),
so a SIGKILLed worker leaves no live member behind. SIGTERM/SIGINT to the
worker send SIGTERM to the JVM, whose shutdown hook wakes the consumer up and
closes it (``onPartitionsRevoked``, LeaveGroup — none for static members,
KIP-345); the worker then records ``member_stop`` clean=true if the JVM
printed ``shutdown_complete``.

What VerifiableConsumer does (Kafka 3.9 source, ``tools/.../VerifiableConsumer.java``):
after every ``poll`` it prints ``record_data`` per record (``--verbose``) and a
``records_consumed`` summary, then ``commitSync`` of the batch's next offsets
and ``offsets_committed`` with ``success`` and ``error`` = the exception's
*message* (not its class). It never commits asynchronously from the command
line (``useAsyncCommit`` is hard-wired ``false``), and with
``--enable-autocommit`` it prints no commits at all. So this client supports
``commit_mode: sync`` only (async and auto are rejected; see
:func:`check_spec`), and no ``wrong_mode`` / processing delay / handler.
VerifiableConsumer does not override ``onPartitionsLost``, whose default calls
``onPartitionsRevoked``: a loss prints ``partitions_revoked``.

Generation and member id are not in VerifiableConsumer's JSON. They come from
the Java consumer's own log, which this worker routes (a reload4j config for
3.x runtimes, a log4j2 one for 4.x; :data:`CLIENT_LOGGERS`) to **stdout**,
prefixed ``@@log TIME LEVEL LOGGER`` (TIME: the JVM's wall clock when the line
was logged, ``2026-11-23T15:19:52.123+0000``), so that log lines and JSON lines
arrive in one pipe in program order (a second
pipe would let a ``partitions_assigned`` overtake the line that names its
generation). The worker keeps every such line (and the stack traces that
follow an ERROR line) in the member's client log,
``RUN/workers/<member>.client.log`` (:mod:`chaos.workload.clients.client_log`),
where an ``error`` event's ``log_ref`` points. Lines relied on (Kafka 3.9.1; the logger of both coordinator
classes is ``o.a.k.clients.consumer.internals.ConsumerCoordinator``):

* ``AbstractCoordinator.JoinGroupResponseHandler``:
  ``Successfully joined group with generation Generation{generationId=N, memberId='M', protocol='P'}``
  — the generation is set (state COMPLETING_REBALANCE);
* ``AbstractCoordinator.SyncGroupResponseHandler``:
  ``Successfully synced group in generation Generation{generationId=N, memberId='M', protocol='P'}``
  — state STABLE: from here ``generationIfStable()`` is N, which
  ``ConsumerCoordinator.sendOffsetCommitRequest`` stamps on OffsetCommit;
* ``AbstractCoordinator.resetStateAndGeneration``:
  ``Resetting generation and member id due to: …`` / ``Resetting generation due to: …``
  — generation (and member id) gone;
* ``ConsumerRebalanceListenerInvoker.invokePartitionsLost``
  (logger ``…internals.ConsumerRebalanceListenerInvoker``):
  ``Lost previously assigned partitions t-0, t-1`` — the next
  ``partitions_revoked`` for exactly those partitions is recorded as ``lost``;
* ``ERROR`` lines of ``org.apache.kafka.tools.VerifiableConsumer``
  (``Error during processing, terminating consumer process``, e.g. a
  ``FencedInstanceIdException``) become fatal ``error`` events; the exception
  class is taken from the stack trace line that follows.

Under ``group_protocol: consumer`` (KIP-848; ``--group-protocol consumer``,
``--group-remote-assignor``, VerifiableConsumer 3.7+) the Java client is
``AsyncKafkaConsumer`` and none of the lines above appear. Its *member epoch*
is what ``CommitRequestManager`` stamps on OffsetCommit, and what is recorded
as the generation. Lines relied on (kafka-clients 4.4.0; logger
``o.a.k.clients.consumer.internals.CommitRequestManager``, the DEBUG one enabled
alone):

* DEBUG ``Member M will include new member epoch Optional[N] in following offset commit/fetch
  requests.`` (``onMemberEpochUpdated``: every epoch above 0 the heartbeat brings; not in the
  3.9/4.0-era sources);
* INFO ``Member M won't include epoch in following offset commit/fetch requests because it has
  left the group.`` (older wording: ``... won't include member id and epoch ...``) — fenced, failed,
  left, or rejoining with epoch 0: no epoch any more;
* INFO ``Member M with epoch N transitioned from S1 to S2.`` (logger
  ``ConsumerMembershipManager``, for ``AbstractMembershipManager``): the member id
  before the first epoch arrives, and the epoch for clients without the DEBUG line
  (there an epoch bumped without an assignment change is missed until the next
  transition);
* ``Lost previously assigned partitions …`` (``ConsumerRebalanceListenerInvoker``) as above.

Member ids are UUIDs the client makes itself (KIP-1082). The session timeout
and heartbeat interval are the coordinator's (group configs, KIP-848) and the
client refuses ``session.timeout.ms`` / ``heartbeat.interval.ms`` /
``partition.assignment.strategy`` (``ConsumerConfig.checkUnsupportedConfigsPostProcess``),
so none is passed.

A commit is recorded with the generation / member id current when its batch's
``records_consumed`` was printed (``commitSync`` is called right after, so that
is the generation the request carried). Its outcome comes from
:func:`chaos.outcome.classify`, with the Java exception named from its message
(:data:`COMMIT_MESSAGES`); an unrecognised message is ``unknown``. The Java
client's in-flight commit is not announced before it is sent, so a killed
worker's last commit is simply absent (the runner's ``unknown`` record cannot
cover it).

When each event happened (docs/architecture.md, "The history"): every
VerifiableConsumer JSON line carries ``timestamp`` (``System.currentTimeMillis()``
when the JVM made the event, ``VerifiableConsumer.ConsumerEvent``) and every
``@@log`` line its log time; both are mapped to CLOCK_MONOTONIC
(:func:`jvm_clock`), so a worker stopped and resumed that reads seconds-old
lines records them when they happened. A line without a time (an older tool, a
stack trace) and the events this worker makes itself after the JVM is gone
(``member_stop``, the exit ``error``) cannot say when they happened; they are
stamped at the last JVM time known to precede them, with ``ts_uncertain_ns``
reaching to when they were read: the event happened in that interval, and the
checkers that compare times take it as one.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson

from chaos.cluster.runtime import KafkaRuntime, java_binary, kafka_runtime
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.model.workload import Assignor, Client, CommitMode, ConsumerSpec, GroupProtocol, RebalanceProtocol
from chaos.outcome import Operation, classify
from chaos.process import _pdeathsig
from chaos.workload.clients.client_log import ClientLog
from chaos.workload.libraries import java_reported, library
from chaos.workload.spec import WorkerConfig

MAIN_CLASS = "org.apache.kafka.tools.VerifiableConsumer"

ASSIGNOR_CLASSES = {
    Assignor.RANGE: "org.apache.kafka.clients.consumer.RangeAssignor",
    Assignor.ROUNDROBIN: "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    Assignor.STICKY: "org.apache.kafka.clients.consumer.StickyAssignor",
    Assignor.COOPERATIVE_STICKY: "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}

LOG_PREFIX = "@@log "
#: the log time of each ``@@log`` line: java.text.SimpleDateFormat (reload4j) and log4j2's FastDateFormat
#: read it alike; the zone offset makes it independent of the JVM's default time zone
LOG_TIME_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
_LOG_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$")

#: the Java client's loggers the translator reads and the client log keeps (everything else: WARN and above).
#: ``org.apache.kafka.clients.consumer`` at INFO shows joins, syncs, heartbeat failures
#: (``AbstractCoordinator.HeartbeatResponseHandler``), generation resets and offset resets
#: (``SubscriptionState``); ``NetworkClient`` at INFO the disconnects behind them.
CLIENT_LOGGERS: dict[str, str] = {
    "org.apache.kafka.clients.consumer": "INFO",
    "org.apache.kafka.clients.NetworkClient": "INFO",
    # classic protocol (ClassicKafkaConsumer)
    "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator": "INFO",
    "org.apache.kafka.clients.consumer.internals.AbstractCoordinator": "INFO",
    "org.apache.kafka.clients.consumer.internals.ConsumerRebalanceListenerInvoker": "INFO",
    # KIP-848 (AsyncKafkaConsumer): state transitions, and the epoch stamped on OffsetCommit (DEBUG)
    "org.apache.kafka.clients.consumer.internals.ConsumerMembershipManager": "INFO",
    "org.apache.kafka.clients.consumer.internals.CommitRequestManager": "DEBUG",
}

#: reload4j (Kafka 3.x runtimes), every line on stdout as ``@@log LEVEL LOGGER message``
LOG4J = "\n".join([
    "log4j.rootLogger=WARN, out",
    "log4j.appender.out=org.apache.log4j.ConsoleAppender",
    "log4j.appender.out.Target=System.out",
    "log4j.appender.out.layout=org.apache.log4j.PatternLayout",
    f"log4j.appender.out.layout.ConversionPattern=@@log %d{{{LOG_TIME_PATTERN}}} %p %c %m%n",
    *(f"log4j.logger.{name}={level}" for name, level in CLIENT_LOGGERS.items()),
    "",
])

#: the same for log4j2 (Kafka 4.x runtimes log through log4j2, KIP-653)
LOG4J2 = "\n".join([
    "status = error",
    "appender.out.type = Console",
    "appender.out.name = OUT",
    "appender.out.target = SYSTEM_OUT",
    "appender.out.layout.type = PatternLayout",
    f"appender.out.layout.pattern = @@log %d{{{LOG_TIME_PATTERN}}} %p %c %m%n",
    "rootLogger.level = WARN",
    "rootLogger.appenderRef.out.ref = OUT",
    *(line for i, (name, level) in enumerate(CLIENT_LOGGERS.items())
      for line in (f"logger.c{i}.name = {name}", f"logger.c{i}.level = {level}")),
    "",
])

#: Java commit exception messages (what ``offsets_committed.error`` carries) -> exception class.
#: Sources: kafka-clients 3.9 ``CommitFailedException`` default message,
#: ``ConsumerCoordinator.sendOffsetCommitRequest`` / ``OffsetCommitResponseHandler``,
#: ``ConsumerCoordinator.commitOffsetsSync`` (timeout) and ``Errors`` default messages.
COMMIT_MESSAGES: tuple[tuple[str, str], ...] = (
    ("Commit cannot be completed since the group has already rebalanced", "CommitFailedException"),
    ("Offset commit cannot be completed since the consumer is not part of an active group", "CommitFailedException"),
    ("Offset commit cannot be completed since the consumer is undergoing a rebalance", "RebalanceInProgressException"),
    ("Offset commit cannot be completed since the consumer member's old generation is fenced",
     "CommitFailedException"),
    ("Timeout of ", "TimeoutException"),
    ("The coordinator is not aware of this member", "UnknownMemberIdException"),
    ("Specified group generation id is not valid", "IllegalGenerationException"),
    ("The group is rebalancing, so a rejoin is needed", "RebalanceInProgressException"),
    ("This is not the correct coordinator", "NotCoordinatorException"),
    ("The coordinator is not available", "CoordinatorNotAvailableException"),
    ("The broker received an out of order sequence", "OutOfOrderSequenceException"),
    ("The instance has been fenced", "FencedInstanceIdException"),
    ("The broker rejected this static consumer since another consumer with the same group.instance.id",
     "FencedInstanceIdException"),
    ("Disconnected from node", "DisconnectException"),
    # KIP-848 (kafka-clients 4.x CommitRequestManager): commitSync wraps STALE_MEMBER_EPOCH and UNKNOWN_MEMBER_ID
    # in CommitFailedException; the coordinator stored nothing
    ("OffsetCommit failed with stale member epoch", "CommitFailedException"),
    ("OffsetCommit failed with unknown member ID", "CommitFailedException"),
    ("OffsetCommit failed due to group instance id fenced", "CommitFailedException"),
    ("The member epoch is stale", "StaleMemberEpochException"),
    ("The member epoch is fenced by the group coordinator", "FencedMemberEpochException"),
)

_GEN = r"Generation\{generationId=(-?\d+), memberId='([^']*)', protocol='([^']*)'\}"
_JOINED = re.compile(r"Successfully joined group with generation " + _GEN)
_SYNCED = re.compile(r"Successfully synced group in generation " + _GEN)
_RESET = re.compile(r"Resetting generation (and member id )?due to: (.*)")
_LOST = re.compile(r"Lost previously assigned partitions (.*)")
# KIP-848 (AsyncKafkaConsumer)
_EPOCH = re.compile(r"Member (\S+) will include new member epoch (?:Optional\[)?(-?\d+)\]? in following offset commit")
_NO_EPOCH = re.compile(r"Member (\S+) won't include (?:member id and )?epoch in following offset commit")
_TRANSITION = re.compile(r"Member (\S+) with epoch (-?\d+) transitioned from (\w+) to (\w+)")
_EXCEPTION = re.compile(r"^(?:Caused by: )?([\w.$]+(?:Exception|Error))(?::\s*(.*))?$")


def check_spec(spec: ConsumerSpec) -> None:
    """Reject what VerifiableConsumer cannot do, with one line saying what to change."""
    if spec.commit_mode is not CommitMode.SYNC:
        raise ValueError("the Java VerifiableConsumer commits synchronously after each poll only: use commit_mode sync "
                         "(async is hard-wired off; with auto-commit it reports no commits)")
    if spec.wrong_mode is not None:
        raise ValueError("the Java VerifiableConsumer supports no wrong_mode: use a Python client for checker validation")
    if spec.processing_delay_ms:
        raise ValueError("the Java VerifiableConsumer has no processing delay: use a Python client for slow consumers")


def commit_error_name(message: str | None) -> str | None:
    """The Java exception class behind an ``offsets_committed.error`` message; the message itself if unknown."""
    if message is None:
        return None
    for prefix, name in COMMIT_MESSAGES:
        if message.startswith(prefix):
            return name
    return message


def _parse_tps(text: str) -> frozenset[tuple[str, int]]:
    """``[t-0, t-1]`` or ``t-0, t-1`` (TopicPartition.toString) -> {(t, 0), (t, 1)}."""
    out = set()
    for item in text.strip().strip("[]").split(","):
        item = item.strip()
        topic, _, part = item.rpartition("-")
        if topic and part.isdigit():
            out.add((topic, int(part)))
    return frozenset(out)


@dataclass
class Translator:
    """Turns VerifiableConsumer's stdout (JSON + ``@@log`` lines) into events; one instance per JVM.

    Pure apart from ``events`` and ``log``: feed it lines with :meth:`feed`, then :meth:`finish`.
    """

    group: str
    events: EventWriter
    incremental: bool = False
    #: JVM wall-clock milliseconds (VerifiableConsumer's ``timestamp``, a log line's time) -> our
    #: CLOCK_MONOTONIC ns; None stamps events when read (tests)
    clock: Callable[[int], int] | None = None
    #: where the JVM's log lines are kept (None: not kept)
    log: ClientLog | None = None
    #: CLOCK_MONOTONIC now (a parameter so tests can read lines "seconds later")
    now_ns: Callable[[], int] = time.monotonic_ns
    #: the latest JVM time seen so far (mono ns): every line read later happened at or after it;
    #: starts when the translator is made (before the JVM starts)
    floor_ns: int | None = None
    generation: int | None = None
    member_id: str | None = None
    stable: bool = False
    started: bool = False
    shutdown: bool = False
    _last_held: tuple[int | None, str | None] = (None, None)
    _commit_view: tuple[int | None, str | None] | None = None
    _lost_pending: frozenset = frozenset()
    _records: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    _pending_error: str | None = None
    _commit_sent: dict = field(default_factory=dict)
    _error_ref: str | None = None
    _error_at: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.clock is not None and self.floor_ns is None:
            self.floor_ns = self.now_ns()

    def _view(self) -> dict:
        return {"generation": self.generation, "member_id": self.member_id}

    def feed(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if not line:
            return
        if not line.startswith("{") and self.log is not None:
            # the client log: log lines without the prefix, and what follows them (stack traces)
            self.log.write(line[len(LOG_PREFIX):] if line.startswith(LOG_PREFIX) else line)
        if self._pending_error is not None and not line.startswith(LOG_PREFIX) and not line.startswith("{"):
            m = _EXCEPTION.match(line.strip())
            if m:
                self._flush_error(m.group(1), m.group(2))
                return
            if line[:1].isspace():
                return  # stack frame
        if self._pending_error is not None:
            self._flush_error(None, None)
        if line.startswith("{"):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                return
            if isinstance(obj, dict):
                self._json(obj)
        elif line.startswith(LOG_PREFIX):
            first, _, rest = line[len(LOG_PREFIX):].partition(" ")
            at: dict = {}
            if _LOG_TIME.match(first):
                at = self._stamp_ms(_log_ms(first))
                level, _, rest = rest.partition(" ")
            else:  # a line without its time (a config of before, a test)
                level = first
            logger, _, message = rest.partition(" ")
            self._log(level, logger, message, at)

    def finish(self) -> None:
        if self._pending_error is not None:
            self._flush_error(None, None)

    def unstamped(self) -> dict:
        """The stamp of something that happened after the last JVM time seen and before now, when that is
        all that is known (see the module docstring): ``mono_ns`` the last JVM time, ``ts_uncertain_ns``
        up to now; {} without a clock (stamped when emitted)."""
        if self.clock is None or self.floor_ns is None:
            return {}
        now = self.now_ns()
        floor = min(self.floor_ns, now)
        wall = time.time() - (now - floor) / 1e9
        return {"mono_ns": floor, "ts": wall, "ts_uncertain_ns": now - floor}

    # ------------------------------------------------------------------ log lines
    def _log(self, level: str, logger: str, message: str, at: dict) -> None:
        if m := _JOINED.search(message):
            self.generation, self.member_id, self.stable = int(m.group(1)), m.group(2) or None, False
        elif m := _SYNCED.search(message):
            self.generation, self.member_id, self.stable = int(m.group(1)), m.group(2) or None, True
        elif m := _RESET.search(message):
            if self.generation is not None:
                self._last_held = (self.generation, self.member_id)
            self.generation, self.stable = None, False
            if m.group(1):
                self.member_id = None
        elif m := _EPOCH.search(message):
            self._epoch(int(m.group(2)), m.group(1))
        elif m := _NO_EPOCH.search(message):
            self._epoch(None, m.group(1))
        elif m := _TRANSITION.search(message):
            self._epoch(int(m.group(2)), m.group(1))
        elif m := _LOST.search(message):
            self._lost_pending = _parse_tps(m.group(1))
        elif level in ("ERROR", "FATAL") and logger == "org.apache.kafka.tools.VerifiableConsumer":
            self._pending_error = _strip_context(message)
            self._error_ref = self.log.ref() if self.log is not None else None
            self._error_at = at or self.unstamped()

    def _epoch(self, epoch: int | None, member_id: str) -> None:
        """KIP-848: the member epoch is the generation; 0 (joining), -1 / -2 (leaving) and none are no
        generation, as for the client itself (``AbstractMembershipManager.updateMemberEpoch`` sends no
        epoch with OffsetCommit then). The last one held is kept for a ``lost`` that follows."""
        self.member_id = member_id
        if epoch is not None and epoch > 0:
            self.generation, self.stable = epoch, True
            return
        if self.generation is not None:
            self._last_held = (self.generation, self.member_id)
        self.generation, self.stable = None, False

    def _flush_error(self, name: str | None, text: str | None) -> None:
        message = self._pending_error or ""
        self._pending_error = None
        if text:
            message = f"{message} {name}: {text}"
        at, self._error_at = self._error_at, {}
        self.events.emit(Kind.ERROR, message=message, error_code=None, error_name=name, fatal=True,
                         log_ref=self._error_ref, **at)

    # ------------------------------------------------------------------ JSON lines
    def _stamp(self, obj: dict) -> dict:
        """``mono_ns``/``ts`` of the moment the JVM created the event, not when the worker read it.

        A worker stopped and resumed reads seconds-old lines; stamped at reading, a commit made
        before the pause would look like it happened after everything the observer saw meanwhile.
        """
        ms = obj.get("timestamp")
        if type(ms) is not int:
            return self.unstamped()
        return self._stamp_ms(ms)

    def _stamp_ms(self, ms: int) -> dict:
        """The stamp of JVM time ``ms``; it moves the floor of what is read after it."""
        if self.clock is None:
            return {}
        ns = self.clock(ms)
        if self.floor_ns is None or ns > self.floor_ns:
            self.floor_ns = ns
        return {"mono_ns": ns, "ts": ms / 1000}

    def _json(self, obj: dict) -> None:
        name = obj.get("name")
        at = self._stamp(obj)
        if name == "startup_complete":
            self.started = True
        elif name == "partitions_assigned":
            self.events.emit(Kind.ASSIGNED, group=self.group, partitions=_tps(obj), incremental=self.incremental,
                             **self._view(), **at)
        elif name == "partitions_revoked":
            parts = _tps(obj)
            lost = bool(self._lost_pending) and self._lost_pending == frozenset(map(tuple, parts))
            self._lost_pending = frozenset()
            if lost:
                gen, member = (self.generation, self.member_id) if self.generation is not None else self._last_held
                self.events.emit(Kind.LOST, group=self.group, partitions=parts, incremental=False,
                                 generation=gen, member_id=member, **at)
            else:
                self.events.emit(Kind.REVOKED, group=self.group, partitions=parts, incremental=self.incremental,
                                 **self._view(), **at)
        elif name == "record_data":
            self._records.setdefault((obj["topic"], obj["partition"]), []).append(obj["offset"])
        elif name == "records_consumed":
            for summary in obj.get("partitions", []):
                tp = (summary["topic"], summary["partition"])
                offsets = self._records.pop(tp, None) or list(range(summary["minOffset"], summary["maxOffset"] + 1))
                self.events.emit(Kind.CONSUMED, group=self.group, topic=tp[0], partition=tp[1], offsets=offsets,
                                 **self._view(), **at)
            self._records.clear()
            self._commit_view = (self.generation, self.member_id)  # commitSync follows with this generation
            self._commit_sent = at  # ... right after this line was printed: when the commit was sent
        elif name == "offsets_committed":
            committed = sorted((o["topic"], o["partition"], o["offset"]) for o in obj.get("offsets", []))
            if not committed:
                return  # VerifiableConsumer calls commitSync even for an empty poll; nothing is sent
            error = None if obj.get("success", True) else (obj.get("error") or "unknown commit failure")
            error_name = commit_error_name(error)
            gen, member = self._commit_view if self._commit_view is not None else (self.generation, self.member_id)
            # stamped when sent (the batch's records_consumed), answered when offsets_committed was made
            stamps = dict(self._commit_sent or at)
            if at and self._commit_sent:
                # the latest the answer can have come (an unstamped line: when it was read)
                stamps["answered_ns"] = at["mono_ns"] + at.get("ts_uncertain_ns", 0)
            self.events.emit(Kind.COMMIT, group=self.group, offsets=[list(o) for o in committed],
                             outcome=classify(Operation.COMMIT, None, error_name).value, error_code=None,
                             error_name=error_name, auto=False, generation=gen, member_id=member, **stamps)
            self._commit_sent = {}
        elif name == "shutdown_complete":
            self.shutdown = True


def _log_ms(text: str) -> int:
    """``2026-11-23T15:19:52.123+0000`` (:data:`LOG_TIME_PATTERN`) -> epoch milliseconds."""
    dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")
    return int(dt.timestamp()) * 1000 + dt.microsecond // 1000


def _tps(obj: dict) -> list[list]:
    return sorted([p["topic"], p["partition"]] for p in obj.get("partitions", []))


def _strip_context(message: str) -> str:
    # "[Consumer clientId=c, groupId=g] text" -> "text"
    if message.startswith("[") and "] " in message:
        return message.split("] ", 1)[1]
    return message


# ---------------------------------------------------------------------- the worker


def command(cfg: WorkerConfig, runtime: KafkaRuntime, workdir: Path) -> list[str]:
    """The JVM command line; writes its consumer.config and log4j config into ``workdir``."""
    spec = cfg.consumer
    assert spec is not None
    workdir.mkdir(parents=True, exist_ok=True)
    tools = tools_version(runtime)
    props = workdir / f"{cfg.name}.consumer.properties"
    props.write_text("\n".join(consumer_properties(cfg)) + "\n")
    log4j = workdir / f"{cfg.name}.log4j.properties"
    log4j.write_text(LOG4J)
    log4j2 = workdir / f"{cfg.name}.log4j2.properties"
    log4j2.write_text(LOG4J2)
    return [
        java_binary(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
        # each logging backend reads its own property: reload4j (3.x runtimes) or log4j2 (4.x)
        f"-Dlog4j.configuration={log4j.as_uri()}", f"-Dlog4j2.configurationFile={log4j2.as_uri()}",
        "-cp", runtime.classpath, MAIN_CLASS,
        *verifiable_consumer_args(cfg, tools, props),
    ]


def consumer_properties(cfg: WorkerConfig) -> list[str]:
    """The lines of the member's consumer config file (what VerifiableConsumer has no flag for).

    ``heartbeat.interval.ms`` is classic only: under KIP-848 the coordinator sets it, and the Java
    client refuses it (ConfigException) when ``group.protocol=consumer``.
    """
    spec = cfg.consumer
    assert spec is not None
    lines = [f"client.id={cfg.name}"]
    if spec.group_protocol is GroupProtocol.CLASSIC:
        lines.append(f"heartbeat.interval.ms={spec.heartbeat_interval_ms}")
    lines += [f"max.poll.interval.ms={spec.max_poll_interval_ms}", f"max.poll.records={spec.max_records}",
              "reconnect.backoff.max.ms=1000"]
    if spec.metadata_max_age_ms is not None:
        lines.append(f"metadata.max.age.ms={spec.metadata_max_age_ms}")
    if spec.request_timeout_ms is not None:
        lines.append(f"request.timeout.ms={spec.request_timeout_ms}")
    return lines


def verifiable_consumer_args(cfg: WorkerConfig, tools: tuple[int, int], props: Path) -> list[str]:
    """VerifiableConsumer's arguments for the member ``cfg`` describes, for kafka-tools ``tools`` (major, minor).

    Classic: ``--assignment-strategy`` and ``--session-timeout``. KIP-848: ``--group-protocol consumer``
    (3.7+) and ``--group-remote-assignor`` when the spec names one; the session timeout is the
    coordinator's (VerifiableConsumer 4.0+ drops ``--session-timeout`` under the consumer protocol,
    KAFKA-18156; 3.7-3.9 would pass it on and the client would refuse it, so it is never given).
    The config file goes by ``--command-config`` from 4.2 (KIP-1147; ``--consumer.config`` is
    deprecated there and prints a warning), by ``--consumer.config`` before.
    """
    spec = cfg.consumer
    assert spec is not None
    argv = ["--bootstrap-server", cfg.bootstrap, "--topic", cfg.topic, "--group-id", cfg.group,
            "--verbose", "--reset-policy", "earliest"]
    if spec.group_protocol is GroupProtocol.CONSUMER:
        if tools < (3, 7):
            raise ValueError(f"VerifiableConsumer {tools[0]}.{tools[1]} has no --group-protocol (KIP-848 needs "
                             "Kafka 3.7+, GA in 4.0): use a newer kafka_version or group_protocol: classic")
        argv += ["--group-protocol", GroupProtocol.CONSUMER.value]
        if spec.remote_assignor is not None:
            argv += ["--group-remote-assignor", spec.remote_assignor.value]
    else:
        argv += ["--assignment-strategy", ASSIGNOR_CLASSES[spec.assignor],
                 "--session-timeout", str(spec.session_timeout_ms)]
    argv += ["--command-config" if tools >= (4, 2) else "--consumer.config", str(props)]
    if spec.instance_id:
        argv += ["--group-instance-id", spec.instance_id]
    return argv


def jvm_clock() -> Callable[[int], int]:
    """JVM ``System.currentTimeMillis()`` -> this machine's CLOCK_MONOTONIC ns (the history's clock).

    Both read the same kernel: the offset between CLOCK_REALTIME and CLOCK_MONOTONIC is taken once;
    a stamp is never later than now (it was made before it was read). Resolution: 1 ms.
    """
    offset = time.time_ns() - time.monotonic_ns()

    def to_mono(ms: int) -> int:
        return min(ms * 1_000_000 - offset, time.monotonic_ns())

    return to_mono


def tools_version(runtime: KafkaRuntime) -> tuple[int, int]:
    """(major, minor) of the kafka-tools jar on the classpath (VerifiableConsumer's flags depend on it);
    the runtime's version when no jar name says."""
    for jar in sorted(runtime.lib_dir.glob("kafka-tools-[0-9]*.jar")):
        if m := re.match(r"kafka-tools-(\d+)\.(\d+)", jar.name):
            return int(m.group(1)), int(m.group(2))
    major, minor = runtime.version.split(".")[:2]
    return int(major), int(minor)


def client_version(runtime: KafkaRuntime) -> str:
    """The version the kafka-clients on the classpath reports (``AppInfoParser``'s resource); its jar name's
    version when the jar carries none."""
    reported = java_reported(runtime.lib_dir).get("kafka-clients")
    if reported is not None:
        return reported
    for jar in sorted(runtime.lib_dir.glob("kafka-clients-*.jar")):
        return jar.stem.removeprefix("kafka-clients-")
    return runtime.version


def member_runtime(cfg: WorkerConfig) -> KafkaRuntime:
    """The jars a Java member runs: its ``client_version``'s (kafka-tools and kafka-clients of that release,
    :mod:`chaos.workload.libraries`), else the broker's own release."""
    spec = cfg.consumer
    assert spec is not None
    if spec.client_version is not None:
        lib = library(Client.JAVA, spec.client_version)
        return KafkaRuntime(spec.client_version, lib.lib_dir)
    return kafka_runtime(cfg.kafka_version)


def run_java_consumer(cfg: WorkerConfig) -> int:
    """Run one Java group member until SIGTERM/SIGINT (or until the JVM ends); the worker's exit code."""
    spec = cfg.consumer
    assert spec is not None
    check_spec(spec)
    runtime = member_runtime(cfg)
    events = EventWriter.for_run(cfg.run_dir, cfg.name)
    log = ClientLog(cfg.run_dir, cfg.name)
    # cooperative-sticky (KIP-429) and KIP-848 both call the listener with only what changes
    translator = Translator(cfg.group, events, incremental=spec.protocol is RebalanceProtocol.COOPERATIVE,
                            clock=jvm_clock(), log=log)
    argv = command(cfg, runtime, Path(cfg.run_dir) / "workers")
    start = events.emit(Kind.MEMBER_START, group=cfg.group, client=Client.JAVA.value,
                        client_version=client_version(runtime), instance_id=spec.instance_id,
                        assignor=spec.assignor.value, protocol=spec.protocol.value,
                        commit_mode=spec.commit_mode.value, session_timeout_ms=spec.session_timeout_ms,
                        max_poll_interval_ms=spec.max_poll_interval_ms, auto_commit_interval_ms=None,
                        wrong_mode=None)
    translator.floor_ns = start.mono_ns  # nothing the JVM prints happened before its member started

    stopping = threading.Event()
    jvm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=_pdeathsig, text=True, errors="replace", bufsize=1)

    def stop(*_):
        stopping.set()
        if jvm.poll() is None:
            jvm.send_signal(signal.SIGTERM)  # shutdown hook: wakeup, close (revoke, LeaveGroup), shutdown_complete

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def read_stderr():
        assert jvm.stderr is not None
        for line in jvm.stderr:
            sys.stderr.write(line)  # JVM diagnostics: the worker's own log

    err_thread = threading.Thread(target=read_stderr, name="jvm-stderr", daemon=True)
    err_thread.start()
    assert jvm.stdout is not None
    try:
        for line in jvm.stdout:
            translator.feed(line)
    finally:
        translator.finish()
    code = jvm.wait()
    err_thread.join(5)
    clean = stopping.is_set() and translator.shutdown
    # the JVM ended after the last line it printed, and before now: an interval, not a point
    ended = translator.unstamped()
    if not clean:
        events.emit(Kind.ERROR, message=f"VerifiableConsumer exited with {code} "
                    f"({'after' if translator.shutdown else 'without'} shutdown_complete)",
                    error_code=None, error_name=None, fatal=True, log_ref=log.ref(), **ended)
    events.emit(Kind.MEMBER_STOP, group=cfg.group, clean=clean, signal=None, **ended)
    events.close()
    log.close()
    return 0 if clean else 1


if __name__ == "__main__":  # python -m chaos.workload.clients.java CONFIG.json (the worker routes here too)
    sys.exit(run_java_consumer(WorkerConfig.model_validate_json(Path(sys.argv[1]).read_text())))
