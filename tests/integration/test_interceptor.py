"""The kafka-chaos ConsumerInterceptor (java/interceptor/) inside Kafka's own VerifiableConsumer, on a real cluster.

VerifiableConsumer is started as the Java member starts it (:func:`chaos.workload.clients.java.command`:
same argv, same consumer config file) with two changes: ``interceptor.classes`` in its config file and
the interceptor jar (built by :func:`chaos.workload.interceptor.ensure_interceptor`, compiled against
kafka-clients 2.8) on its classpath. Records are produced, the consumer drains them and commits after
each poll. Then the interceptor's lines are translated into events and held against what
VerifiableConsumer printed itself: the same records in the same polls, the same commits in the same
order, each interceptor line made before VerifiableConsumer's own report of it, every stamp on this
machine's CLOCK_MONOTONIC between the JVM's start and its end.

Kafka 3.9.1 (ZooKeeper, classic protocol, the events file named in the consumer config) and 4.4.0
(KRaft, KIP-848 ``consumer`` protocol on AsyncKafkaConsumer, the file named by ``KAFKA_CHAOS_EVENTS``).

The jar itself is also loaded, without a cluster, into the oldest supported client (kafka-clients 2.8.2,
what it is compiled against), 3.9.1 and 4.4.0 (both consumer implementations): a consumer is constructed and
closed; one given no events file fails to construct, naming the config.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer

from chaos.cluster.runtime import cache_root, kafka_runtime
from chaos.history.event import Commit, Consumed
from chaos.history.reader import parse_line
from chaos.history.writer import EventWriter
from chaos.model.cluster import DEFAULT_KAFKA_VERSION, KRAFT_KAFKA_VERSION, ClusterSpec
from chaos.model.workload import ConsumerSpec
from chaos.process import _pdeathsig
from chaos.workload import interceptor
from chaos.workload.clients import java
from chaos.workload.spec import WorkerConfig

PARTITIONS = 3
RECORDS = 300

CASES = [
    pytest.param(DEFAULT_KAFKA_VERSION, "classic", "config", id="3.9.1-classic-config"),
    pytest.param(KRAFT_KAFKA_VERSION, "consumer", "env", id="4.4.0-kip848-env"),
]


#: constructs and closes a consumer with the interceptor: args = events file, group.protocol
LOADER = """
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Load {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", "127.0.0.1:1");  // never reached: construction and close only
        p.put("group.id", "g");
        p.put("client.id", "loader");
        p.put("interceptor.classes", "INTERCEPTOR");
        if (!args[0].isEmpty()) p.put("kafka.chaos.events.path", args[0]);
        if (!args[1].isEmpty()) p.put("group.protocol", args[1]);
        ByteArrayDeserializer d = new ByteArrayDeserializer();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, d, d)) {
            Object impl = c;
            try {  // 3.7+: KafkaConsumer is a facade over ClassicKafkaConsumer or AsyncKafkaConsumer (KIP-848)
                java.lang.reflect.Field f = KafkaConsumer.class.getDeclaredField("delegate");
                f.setAccessible(true);
                impl = f.get(c);
            } catch (ReflectiveOperationException e) {
                // 2.8-3.6: KafkaConsumer itself
            }
            System.out.println("constructed " + impl.getClass().getName());
        }
    }
}
""".replace("INTERCEPTOR", interceptor.INTERCEPTOR_CLASS)


def clients_classpath(version: str) -> str:
    """kafka-clients ``version`` and what it needs: 2.8.2 from the local repository the interceptor's build
    filled (its compile-time dependency), the others from their cached runtime."""
    if version == "2.8.2":
        m2 = cache_root() / "m2"
        return (f"{m2}/org/apache/kafka/kafka-clients/2.8.2/kafka-clients-2.8.2.jar:"
                f"{m2}/org/slf4j/slf4j-api/1.7.30/slf4j-api-1.7.30.jar")
    return kafka_runtime(version).classpath


def load(tmp_path, version: str, events: str, protocol: str = "") -> subprocess.CompletedProcess:
    src = tmp_path / "Load.java"
    src.write_text(LOADER)
    env = {k: v for k, v in os.environ.items() if k != interceptor.PATH_ENV}
    return subprocess.run([java.java_binary(), "-cp", f"{clients_classpath(version)}:{interceptor.ensure_interceptor()}",
                           str(src), events, protocol], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("version, protocol", [("2.8.2", ""), (DEFAULT_KAFKA_VERSION, ""),
                                               (KRAFT_KAFKA_VERSION, "classic"), (KRAFT_KAFKA_VERSION, "consumer")])
def test_the_jar_loads_into_the_oldest_and_newest_clients(tmp_path, version, protocol):
    events = tmp_path / "events.jsonl"
    done = load(tmp_path, version, str(events), protocol)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("AsyncKafkaConsumer" if protocol == "consumer" else "constructed") in done.stdout
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    start, *between, close = lines
    assert (start["event"], close["event"], start["kafka_clients"], start["client_id"], start["group_id"]) == \
        ("start", "close", version, "loader", "g")
    # AsyncKafkaConsumer.close (4.x, auto-commit on, nothing consumed) calls onCommit with no offsets: nothing sent
    assert all(ln["event"] == "commit" and ln["offsets"] == [] for ln in between)
    writer = EventWriter.for_run(tmp_path / "run", "consumer-1")
    t = interceptor.translate_file(events, writer)
    writer.close()
    assert t.notes == [] and t.lines == len(lines)
    assert not (tmp_path / "run" / "events" / "consumer-1.jsonl").read_bytes()  # no event: nothing was consumed


def test_a_consumer_given_no_events_file_fails_to_construct_naming_the_config(tmp_path):
    done = load(tmp_path, DEFAULT_KAFKA_VERSION, "")
    assert done.returncode != 0
    assert ("ConfigException: Invalid value null for configuration kafka.chaos.events.path: kafka-chaos interceptor: "
            "set kafka.chaos.events.path in the consumer config or the environment variable KAFKA_CHAOS_EVENTS"
            ) in done.stderr


def produce(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    acked: set[tuple[int, int]] = set()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

    def done(err, msg):
        assert err is None, err
        acked.add((msg.partition(), msg.offset()))

    for i in range(RECORDS):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
    assert p.flush(30) == 0 and len(acked) == RECORDS
    return acked


def vc_lines(path) -> list[dict]:
    """VerifiableConsumer's own JSON lines (its stdout also holds the client's ``@@log`` lines)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # the last line, being written
    return out


@pytest.mark.parametrize("version, protocol, named_by", CASES)
def test_the_interceptor_records_what_verifiable_consumer_reports(_chaos_pool, tmp_path, version, protocol, named_by):
    cluster = _chaos_pool.get(ClusterSpec.build(brokers=1, lanes=1, kafka_version=version))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:6]}"
    cluster.admin.create_topic(topic, PARTITIONS, 1)
    produced = produce(cluster.bootstrap("lane0"), topic)
    end = {p: max(o for q, o in produced if q == p) + 1 for p in range(PARTITIONS)}

    jar = interceptor.ensure_interceptor()
    runtime = kafka_runtime(version)
    run_dir = tmp_path / "run"
    # max.poll.records 40: several polls, each committed, so order and per-poll matching are exercised
    spec = (ConsumerSpec(client="java", session_timeout_ms=6000, heartbeat_interval_ms=1000, lane="lane0", max_records=40)
            if protocol == "classic" else
            ConsumerSpec(client="java", group_protocol="consumer", remote_assignor="uniform", lane="lane0", max_records=40))
    cfg = WorkerConfig(role="consumer", name="consumer-1", run_id="r", run_dir=str(run_dir),
                       bootstrap=cluster.bootstrap("lane0"), topic=topic, group=group, consumer=spec,
                       kafka_version=version)
    workdir = run_dir / "workers"
    argv = java.command(cfg, runtime, workdir)
    cp = argv.index("-cp") + 1
    argv[cp] = f"{argv[cp]}:{jar}"
    events_file = run_dir / "interceptor" / "consumer-1.jsonl"
    props = workdir / "consumer-1.consumer.properties"
    env = dict(os.environ)
    if named_by == "config":
        extra = interceptor.properties_lines(events_file)
    else:
        extra = [f"interceptor.classes={interceptor.INTERCEPTOR_CLASS}"]
        env[interceptor.PATH_ENV] = str(events_file)
    props.write_text(props.read_text() + "\n".join(extra) + "\n")

    out_path = workdir / "vc.out"
    t0 = time.monotonic_ns()
    with open(out_path, "wb") as out:
        jvm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                               preexec_fn=_pdeathsig)
    try:
        deadline = time.monotonic() + 120

        def done() -> bool:
            commits = [c for c in vc_lines(out_path) if c.get("name") == "offsets_committed" and c.get("success")]
            reached = {o["partition"]: o["offset"] for c in commits for o in c["offsets"]}
            return all(reached.get(p) == n for p, n in end.items())

        while not done():
            assert jvm.poll() is None, f"VerifiableConsumer exited {jvm.returncode}: {out_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no commit of the end offsets: {out_path.read_text()[-3000:]}"
            time.sleep(0.3)
        jvm.send_signal(signal.SIGTERM)  # shutdown hook: close() -> the interceptor's close line
        jvm.wait(30)  # 143 (SIGTERM) even after a clean close: shutdown_complete below says it was clean
    finally:
        if jvm.poll() is None:
            jvm.kill()
            jvm.wait()
    t1 = time.monotonic_ns()

    vc = vc_lines(out_path)
    assert vc[-1]["name"] == "shutdown_complete"
    writer = EventWriter.for_run(run_dir, "consumer-1")
    translator = interceptor.translate_file(events_file, writer)
    writer.close()
    events = [parse_line(raw, "consumer-1") for raw in (run_dir / "events" / "consumer-1.jsonl").read_bytes().splitlines()]
    consumed = [e for e in events if type(e) is Consumed]
    commits = [e for e in events if type(e) is Commit]
    raw_lines = [json.loads(line) for line in events_file.read_text().splitlines()]

    # one stream, started and closed, nothing lost; nanoTime is CLOCK_MONOTONIC (checked by the translator
    # against the start line, and here far tighter than its 1 s tolerance)
    assert translator.notes == [] and [ln["event"] for ln in raw_lines][::len(raw_lines) - 1] == ["start", "close"]
    (stream,) = translator.streams.values()
    assert stream.nano_trusted
    start = raw_lines[0]
    offset_now = time.time_ns() - time.monotonic_ns()
    assert abs(start["wall_ms"] * 1_000_000 - start["nano"] - offset_now) < 50_000_000
    assert start["group_id"] == group and start["client_id"] == "consumer-1" and start["auto_commit"] is False
    assert start["kafka_clients"] == java.client_version(runtime)

    # the same records, in the same polls, each seen by the interceptor before VerifiableConsumer reported the poll
    vc_polls = [ln for ln in vc if ln["name"] == "records_consumed"]
    ic_polls = [ln for ln in raw_lines if ln["event"] == "consumed"]
    assert len(ic_polls) == len(vc_polls) >= RECORDS // 40
    for ic, rc in zip(ic_polls, vc_polls, strict=True):
        assert {(p["partition"], min(p["offsets"]), max(p["offsets"]), len(p["offsets"])) for p in ic["partitions"]} == \
            {(p["partition"], p["minOffset"], p["maxOffset"], p["count"]) for p in rc["partitions"]}
        assert ic["wall_ms"] <= rc["timestamp"]
    vc_records = sorted((ln["partition"], ln["offset"]) for ln in vc if ln["name"] == "record_data")
    assert sorted((e.partition, o) for e in consumed for o in e.offsets) == vc_records
    assert set(vc_records) == produced
    assert all(e.group == group and e.topic == topic and e.generation is None and e.member_id is None for e in consumed)

    # the same commits in the same order (VerifiableConsumer commits after each poll; onCommit is success only)
    vc_commits = [sorted((o["topic"], o["partition"], o["offset"]) for o in ln["offsets"])
                  for ln in vc if ln["name"] == "offsets_committed" and ln["offsets"]]
    assert all(ln["success"] for ln in vc if ln["name"] == "offsets_committed")
    assert [list(c.offsets) for c in commits] == [[tuple(o) for o in c] for c in vc_commits]
    ic_commit_lines = [ln for ln in raw_lines if ln["event"] == "commit"]
    for c, ln, rc in zip(commits, ic_commit_lines, [ln for ln in vc if ln["name"] == "offsets_committed" and ln["offsets"]],
                         strict=True):
        assert c.outcome.value == "ok" and c.auto is False and c.generation is None
        assert ln["wall_ms"] <= rc["timestamp"]  # onCommit ran before commitSync returned
        assert c.answered_ns is not None and c.mono_ns <= c.answered_ns

    # every stamp on this machine's CLOCK_MONOTONIC, inside the JVM's lifetime; a commit is sent after the
    # poll that returned the records it commits
    for e in events:
        assert t0 <= e.mono_ns <= t1
    by_offset = {(e.partition, o): e.mono_ns for e in consumed for o in e.offsets}
    for c in commits:
        assert c.answered_ns is not None and c.answered_ns <= t1
        assert c.mono_ns == max(by_offset[(p, n - 1)] for _, p, n in c.offsets)
