"""chaos.instrument on a real cluster: an application's own loop, instrumented without a code change.

Two member processes run an app-style loop that imports ``confluent_kafka.Consumer`` itself; each is
started the way kafka-chaos starts a white-box member (``chaos/instrument/site`` on ``PYTHONPATH``,
``KAFKA_CHAOS_INSTRUMENT=1``, its events file in ``KAFKA_CHAOS_EVENTS``). The assertions read only the
events files the applications' consumers wrote, then judge them with the real delivery checker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

import chaos.instrument
from chaos.checkers import delivery
from chaos.checkers.bounds import CheckerBounds, resolve
from chaos.checkers.result import Validity
from chaos.cluster.admin import retry
from chaos.cluster.local import LocalCluster
from chaos.cluster.topology import ClusterSpec
from chaos.history import EventWriter, merge_run, read_history
from chaos.history.event import Assigned, Commit, Consumed, Kind, MemberStart, MemberStop, Revoked
from chaos.history.reader import parse_line
from chaos.outcome import Outcome
from tests import waiting

PARTITIONS = 4
SITE = Path(chaos.instrument.__file__).parent / "site"

#: the application: its own loop, commit policy and rebalance listener; nothing of kafka-chaos in it
APP = '''
import os, signal, sys
from confluent_kafka import Consumer, KafkaException, TopicPartition

stopping = False
def stop(*_):
    global stopping
    stopping = True
signal.signal(signal.SIGTERM, stop)

style = sys.argv[1]
done = {}  # next offset per partition, processed so far
c = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": os.environ["KAFKA_GROUP_ID"],
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 1000, "log_level": 0})
print(type(c).__module__, flush=True)

def on_revoke(consumer, partitions):
    mine = [TopicPartition(p.topic, p.partition, done.pop((p.topic, p.partition))) for p in partitions
            if (p.topic, p.partition) in done]
    if mine:
        consumer.commit(offsets=mine, asynchronous=False)

c.subscribe([os.environ["KAFKA_TOPIC"]], on_revoke=on_revoke)
while not stopping:
    if style == "sync":
        msgs = c.consume(50, 0.3)
    else:
        msg = c.poll(0.3)
        msgs = [] if msg is None else [msg]
    records = [m for m in msgs if m.error() is None]
    for m in records:
        done[(m.topic(), m.partition())] = m.offset() + 1
    if records and style == "sync":
        try:
            c.commit(asynchronous=False)
        except KafkaException as exc:
            print("commit failed", exc, flush=True)
    elif records:
        c.commit(message=records[-1])  # asynchronous, the library's default
c.close()
'''


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(ClusterSpec.build(brokers=1, lanes=1)) as c:
        yield c


class App:
    def __init__(self, cluster, run: Path, name: str, topic: str, group: str, style: str):
        self.name = name
        self.path = run / "events" / f"{name}.jsonl"
        (run / "workers").mkdir(exist_ok=True)
        script = run / "app.py"
        script.write_text(APP)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p),
               "KAFKA_CHAOS_INSTRUMENT": "1", "KAFKA_CHAOS_EVENTS": str(self.path), "KAFKA_CHAOS_MEMBER": name,
               "KAFKA_CHAOS_GROUP": group, "KAFKA_BOOTSTRAP_SERVERS": cluster.bootstrap("lane0"),
               "KAFKA_GROUP_ID": group, "KAFKA_TOPIC": topic}
        self.log_path = run / "workers" / f"{name}.out"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, str(script), style], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def events(self, cls=None):
        if not self.path.exists():
            return []
        out = [parse_line(line, f"{self.path}:{i}") for i, line in enumerate(self.path.read_bytes().splitlines(), 1)]
        return [e for e in out if cls is None or isinstance(e, cls)]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def wait_for(what: str, fn, apps, timeout: float = 90):
    return waiting.wait_for(what, fn, timeout, apps)


def produce(cluster, topic: str, start: int, n: int, events: EventWriter) -> set[tuple[int, int]]:
    acked: set[tuple[int, int]] = set()
    p = Producer({"bootstrap.servers": cluster.bootstrap("lane0"), "acks": "all", "enable.idempotence": True})

    def done(err, msg):
        assert err is None, err
        acked.add((msg.partition(), msg.offset()))
        events.emit(Kind.SEND_OK, topic=topic, partition=msg.partition(), offset=msg.offset(), key=None,
                    value=msg.value().decode())

    for i in range(start, start + n):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
    assert p.flush(30) == 0 and len(acked) == n
    return acked


def test_an_applications_own_loop_is_recorded_in_the_schema(cluster, tmp_path):
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    cluster.admin.create_topic(topic, PARTITIONS, 1)
    retry(lambda: True if all(cluster.leader_of(topic, p) for p in range(PARTITIONS)) else None,
          time.monotonic() + 30, "leaders")
    (tmp_path / "header.json").write_bytes(orjson.dumps({"schema_version": 1, "run_id": tmp_path.name, "seed": 0,
                                                         "experiment": {}, "versions": {}, "configs": {}}))
    producer = EventWriter.for_run(tmp_path, "producer-0")
    apps: list[App] = []
    try:
        a = App(cluster, tmp_path, "consumer-0", topic, group, "sync")
        apps.append(a)
        wait_for("consumer-0 assigned", lambda: [e for e in a.events(Assigned) if e.partitions], apps)
        acked = produce(cluster, topic, 0, 200, producer)
        b = App(cluster, tmp_path, "consumer-1", topic, group, "async")
        apps.append(b)
        wait_for("consumer-1 assigned", lambda: [e for e in b.events(Assigned) if e.partitions], apps)
        acked |= produce(cluster, topic, 200, 200, producer)

        def everything_consumed():
            seen = {(e.partition, o) for app in apps for e in app.events(Consumed) for o in e.offsets}
            return seen >= acked

        wait_for("every record processed", everything_consumed, apps)
        assert [a.stop(), b.stop()] == [0, 0]
    finally:
        for app in apps:
            app.kill()
        producer.close()

    for app, style in ((a, "sync"), (b, "async")):
        assert app.log_path.read_text().splitlines()[0] == "chaos.instrument.consumer", "hook not installed"
        starts, stops = app.events(MemberStart), app.events(MemberStop)
        assert len(starts) == 1 and starts[0].group == group and starts[0].session_timeout_ms == 6000
        assert len(stops) == 1 and stops[0].clean
        assigned = [e for e in app.events(Assigned) if e.partitions]
        assert assigned and all(e.generation is not None and e.member_id for e in assigned)
        consumed = app.events(Consumed)
        assert consumed and all(e.generation is not None and e.ts_uncertain_ns is not None for e in consumed)
        commits = app.events(Commit)
        ok = [c for c in commits if c.outcome is Outcome.OK]
        assert ok and all(c.generation is not None and c.offsets and not c.auto for c in ok), style
        # a commit is stamped when sent and answered later; the async ones through the chained on_commit
        assert all(c.answered_ns is None or c.answered_ns >= c.mono_ns for c in commits)
    # consumer-1 joining made consumer-0 give partitions back (eager range), committing them in its
    # on_revoke before its revocation is recorded; then the group moved to a later generation
    revoked = a.events(Revoked)
    assert revoked
    gens = [e.generation for e in a.events(Assigned) if e.partitions]
    assert gens == sorted(gens) and gens[-1] > gens[0]
    history = read_history(merge_run(tmp_path))
    result = delivery.check(history, resolve(CheckerBounds(), history,
                                             [e for e in history.events if isinstance(e, MemberStart)]))
    assert result.valid is Validity.TRUE, result.findings
    assert result.metrics["produced"] == 400 and result.metrics["lost"] == 0
