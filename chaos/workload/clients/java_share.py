"""The Java share-group member: kafka-chaos's member loop over Kafka's own ``KafkaShareConsumer`` (KIP-932),
``java/share-member`` (``io.kafkachaos.share.ShareMember``), translated into our events.

Kafka's ``VerifiableShareConsumer`` prints no delivery count (``tools/.../VerifiableShareConsumer.java``: its
``record_data`` carries key, value, topic, partition and offset), so it cannot show what share-delivery judges; the
member is kafka-chaos's own, the same loop as the Python one (:mod:`chaos.workload.share_member`: acquire, process
within 80 % of the lock, accept the processed records and release the rest, one ``commitSync`` per poll). The
worker process starts it as its child JVM on the kafka-clients of the cluster's release (or of the member's
``client_version``) and reads its JSON lines (with ``renew_locks`` every record acquired is acknowledged
``renew`` at once, KIP-1222, and processed when the client hands it back from a later poll, without a new
``acquired``):

- ``start`` (``nano``: ``System.nanoTime()``, ``wall_ms``): the JVM's clock. On Linux HotSpot's ``nanoTime`` is
  CLOCK_MONOTONIC, the history's clock; the worker checks it (``wall_ms - nano`` against this process's
  CLOCK_REALTIME - CLOCK_MONOTONIC, within :data:`CLOCK_AGREEMENT_NS`) and refuses to record times it cannot
  trust (a fatal ``error``, the member stopped);
- ``acquired`` -> ``share_acquired`` (``delivery_count`` from ``ConsumerRecord.deliveryCount()``,
  ``lock_duration_ms`` from ``KafkaShareConsumer.acquisitionLockTimeoutMs()``, KIP-1222; ``fetched_ns`` None: the
  consumer fetches ahead of ``poll``);
- ``processed`` -> ``share_processed``;
- ``ack_sent`` -> the acknowledgements go into the member's in-flight file (the runner records them ``unknown``
  if the member is killed before their answer), ``ack_answer`` -> one ``share_acknowledged`` per partition and
  type: ``ok``, ``fail`` with the error (``Errors.forException``), ``unknown`` when ``commitSync`` threw or a
  partition has no answer;
- ``error`` -> a fatal ``error`` event; ``shutdown_complete`` -> the member stopped cleanly.

The JVM dies with the worker (``PR_SET_PDEATHSIG``, as the Java consumer-group member). ``member_id`` is None:
``KafkaShareConsumer`` does not expose it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from chaos.cluster.runtime import KafkaRuntime, Progress, java_binary, kafka_runtime
from chaos.history.event import Kind, ShareAckType
from chaos.history.writer import EventWriter
from chaos.model.clients import Client
from chaos.outcome import Operation, Outcome, classify
from chaos.process import _pdeathsig
from chaos.workload.consumer import InflightCommits, inflight_path
from chaos.workload.libraries import library
from chaos.workload.maven_build import ensure_jar, quiet
from chaos.workload.share_member import AckAnswer, emit_acknowledged
from chaos.workload.spec import WorkerConfig

MAIN_CLASS = "io.kafkachaos.share.ShareMember"
JAR_NAME = "kafka-chaos-share-member.jar"
#: how far the JVM's ``wall_ms - nanoTime`` may be from ours for its nanoTime to be taken as CLOCK_MONOTONIC
#: (wall_ms has 1 ms resolution; the two reads are not simultaneous)
CLOCK_AGREEMENT_NS = 1_000_000_000



def ensure_share_member(progress: Progress = quiet) -> Path:
    """The member's jar, built from ``java/share-member`` on first use (:func:`chaos.workload.maven_build.ensure_jar`)."""
    return ensure_jar("share-member", JAR_NAME, "kafka-chaos Java share-group member", progress)


def properties(cfg: WorkerConfig) -> list[str]:
    """The lines of the member's config file: the consumer's properties and the loop's own (``kafka.chaos.*``)."""
    spec = cfg.share_member
    assert spec is not None
    lines = [f"bootstrap.servers={cfg.bootstrap}", f"group.id={cfg.group}", f"client.id={cfg.name}",
             "reconnect.backoff.max.ms=1000", f"kafka.chaos.topic={cfg.topic}",
             f"kafka.chaos.processing.delay.ms={spec.processing_delay_ms}",
             f"kafka.chaos.lock.ms={cfg.share_lock_ms or 0}", f"kafka.chaos.renew={str(spec.renew_locks).lower()}"]
    if spec.max_records is not None:
        lines.append(f"max.poll.records={spec.max_records}")
    if spec.request_timeout_ms is not None:
        lines.append(f"request.timeout.ms={spec.request_timeout_ms}")
    return lines


def member_runtime(cfg: WorkerConfig) -> KafkaRuntime:
    """The kafka-clients the member runs on: its ``client_version``'s, else the cluster's own release."""
    spec = cfg.share_member
    assert spec is not None
    if spec.client_version is not None:
        return KafkaRuntime(spec.client_version, library(Client.JAVA, spec.client_version).lib_dir)
    return kafka_runtime(cfg.kafka_version)


@dataclass
class Translator:
    """The member's JSON lines -> our events (module docstring)."""

    group: str
    events: EventWriter
    inflight: InflightCommits | None = None
    shutdown: bool = False
    clock_ok: bool = False
    #: the acknowledgements of the ``ack_sent`` awaiting their answer: (topic, partition, type) -> offsets
    _sent: dict[tuple[str, int, ShareAckType], list[int]] = field(default_factory=dict)
    _sent_ns: int = 0
    _token: Any = None

    def feed(self, raw: str) -> None:
        line = raw.strip()
        if not line.startswith("{"):
            return  # a log line of the client: not the member's
        obj = orjson.loads(line)
        kind = obj.get("e")
        if kind == "start":
            self._check_clock(obj)
            return
        if not self.clock_ok:
            return
        if kind == "acquired":
            self.events.emit(Kind.SHARE_ACQUIRED, mono_ns=obj["nano"], group=self.group, topic=obj["topic"],
                             partition=obj["partition"], offsets=tuple(obj["offsets"]), delivery_count=obj["dc"],
                             member_id=None, lock_duration_ms=obj["lock_ms"], fetched_ns=None)
        elif kind == "processed":
            self.events.emit(Kind.SHARE_PROCESSED, mono_ns=obj["nano"], group=self.group, topic=obj["topic"],
                             partition=obj["partition"], offsets=(obj["offset"],), delivery_count=obj["dc"],
                             member_id=None, started_ns=obj["started"])
        elif kind == "ack_sent":
            self._sent = {(t, p, ShareAckType(k)): offs for t, p, offs, k in obj["acks"]}
            self._sent_ns = obj["nano"]
            if self.inflight is not None:
                self._token = self.inflight.add({
                    "kind": "share_acknowledged", "group": self.group, "sent_ns": self._sent_ns,
                    "partitions": [[t, p, sorted(offs), k.value] for (t, p, k), offs in self._sent.items()]})
        elif kind == "ack_answer":
            self._answer(obj)
        elif kind == "error":
            self.events.emit(Kind.ERROR, message=str(obj.get("message"))[:1000], error_code=None, error_name=None,
                             fatal=True, log_ref=None)
        elif kind == "shutdown_complete":
            self.shutdown = True

    def _check_clock(self, obj: dict[str, Any]) -> None:
        ours = time.time_ns() - time.monotonic_ns()
        theirs = obj["wall_ms"] * 1_000_000 - obj["nano"]
        self.clock_ok = abs(theirs - ours) <= CLOCK_AGREEMENT_NS and obj["nano"] <= time.monotonic_ns()
        if not self.clock_ok:
            self.events.emit(Kind.ERROR, message=f"the JVM's System.nanoTime is not this machine's CLOCK_MONOTONIC "
                             f"(offset {(theirs - ours) / 1e9:.3f}s): its events cannot be placed in the history",
                             error_code=None, error_name=None, fatal=True, log_ref=None)

    def _answer(self, obj: dict[str, Any]) -> None:
        failed = obj.get("failed")
        got = {(t, p): AckAnswer(t, p, classify(Operation.SHARE_ACKNOWLEDGE, code, name), code, name)
               for t, p, name, code in obj["answers"]}
        answers = {(t, p): (AckAnswer(t, p, Outcome.UNKNOWN, None, None) if failed is not None
                            else got.get((t, p), AckAnswer(t, p, Outcome.UNKNOWN, None, None)))
                   for t, p, _ in self._sent}
        emit_acknowledged(self.events, self.group, self._sent, self._sent_ns, answers, obj["nano"])
        if self.inflight is not None and self._token is not None:
            self.inflight.done(self._token)
        self._sent, self._token = {}, None


def run_java_share_member(cfg: WorkerConfig) -> int:
    """Run one Java share-group member until SIGTERM/SIGINT (or until the JVM ends); the worker's exit code."""
    spec = cfg.share_member
    assert spec is not None
    runtime = member_runtime(cfg)
    jar = ensure_share_member()
    events = EventWriter.for_run(cfg.run_dir, cfg.name)
    workdir = Path(cfg.run_dir) / "workers"
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{cfg.name}.share.properties"
    config.write_text("\n".join(properties(cfg)) + "\n")
    translator = Translator(cfg.group, events, InflightCommits(inflight_path(cfg.run_dir, cfg.name)))
    argv = [java_binary(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            "-cp", f"{runtime.classpath}:{jar}", MAIN_CLASS, str(config)]
    stopping = threading.Event()
    jvm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=_pdeathsig, text=True, errors="replace", bufsize=1)

    def stop(*_: object) -> None:
        stopping.set()
        if jvm.poll() is None:
            jvm.send_signal(signal.SIGTERM)  # shutdown hook: stop the loop, close, shutdown_complete

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def read_stderr() -> None:
        assert jvm.stderr is not None
        for line in jvm.stderr:
            sys.stderr.write(line)  # the client's log and JVM diagnostics: the worker's own log

    err_thread = threading.Thread(target=read_stderr, name="jvm-stderr", daemon=True)
    err_thread.start()
    assert jvm.stdout is not None
    for line in jvm.stdout:
        translator.feed(line)
        if not translator.clock_ok and jvm.poll() is None and line.startswith('{"e":"start"'):
            jvm.send_signal(signal.SIGTERM)  # times it cannot place: the member stops
    code = jvm.wait()
    err_thread.join(5)
    clean = stopping.is_set() and translator.shutdown and translator.clock_ok
    if not clean and translator.clock_ok:
        events.emit(Kind.ERROR, message=f"the Java share member exited with {code} "
                    f"({'after' if translator.shutdown else 'without'} shutdown_complete)",
                    error_code=None, error_name=None, fatal=True, log_ref=None)
    events.emit(Kind.MEMBER_STOP, group=cfg.group, clean=clean, signal=None)
    events.close()
    return 0 if clean else 1
