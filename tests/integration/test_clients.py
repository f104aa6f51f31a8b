"""Client adapters against a real cluster: kafka-python, and the Java VerifiableConsumer mixed with Python.

Each member is a real worker process (``python -m chaos.workload.worker``);
the assertions read only the events files the workers wrote.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.cluster.admin import retry
from chaos.cluster.local import LocalCluster
from chaos.history.event import Assigned, Commit, Consumed, MemberStart, MemberStop, Revoked
from chaos.model.cluster import ClusterSpec
from chaos.model.workload import ConsumerSpec
from chaos.workload.spec import WorkerConfig
from tests import waiting
from tests.member_process import MemberProcess

PARTITIONS = 6
RECORDS = 300


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(ClusterSpec.build(brokers=3, lanes=2)) as c:
        yield c


@pytest.fixture
def topic(cluster):
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.admin.create_topic(name, PARTITIONS, 3)
    retry(lambda: True if all(cluster.leader_of(name, p) for p in range(PARTITIONS)) else None,
          time.monotonic() + 30, "leaders")
    return name


def produce(cluster, topic: str, n: int = RECORDS) -> set[tuple[int, int]]:
    """(partition, offset) of every acknowledged record."""
    acked: set[tuple[int, int]] = set()
    p = Producer({"bootstrap.servers": cluster.bootstrap("lane1"), "acks": "all", "enable.idempotence": True})

    def done(err, msg):
        assert err is None, err
        acked.add((msg.partition(), msg.offset()))

    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
    assert p.flush(30) == 0
    assert len(acked) == n
    return acked


class Worker(MemberProcess):
    def __init__(self, run_dir: Path, cfg: WorkerConfig):
        self.cfg = cfg
        wdir = run_dir / "workers"  # as the workload runner lays it out
        wdir.mkdir(exist_ok=True)
        conf = wdir / f"{cfg.name}.json"
        conf.write_text(cfg.model_dump_json())
        super().__init__([sys.executable, "-m", "chaos.workload.worker", str(conf)],
                         run_dir / "events" / f"{cfg.name}.jsonl", wdir / f"{cfg.name}.out")


def start(cluster, run_dir: Path, name: str, topic: str, group: str, lane: str = "lane0", **spec) -> Worker:
    cfg = WorkerConfig(role="consumer", name=name, run_id=run_dir.name, run_dir=str(run_dir),
                       bootstrap=cluster.bootstrap(lane), topic=topic, group=group,
                       consumer=ConsumerSpec(session_timeout_ms=6000, heartbeat_interval_ms=1000, lane=lane, **spec))
    return Worker(run_dir, cfg)


def wait_for(what: str, fn, timeout: float = 60, workers=()):
    return waiting.wait_for(what, fn, timeout, workers, name=lambda w: w.cfg.name)


def last_assigned(w: Worker) -> Assigned | None:
    got = w.events(Assigned)
    return got[-1] if got else None


def stable_split(members: list[Worker]):
    """The members' latest assignments if they share a generation and cover every partition."""
    last = [last_assigned(w) for w in members]
    if any(a is None for a in last) or len({a.generation for a in last}) != 1:
        return None
    if sum(len(a.partitions) for a in last) != PARTITIONS:
        return None
    return last


def consumed_offsets(members: list[Worker]) -> set[tuple[int, int]]:
    return {(e.partition, o) for w in members for e in w.events(Consumed) for o in e.offsets}


def assert_commits_ok_with_sent_generation(w: Worker) -> None:
    commits = w.events(Commit)
    assert commits, f"{w.cfg.name} recorded no commit"
    ok = [c for c in commits if c.outcome.value == "ok"]
    assert ok, f"{w.cfg.name}: no successful commit: {commits[:3]}"
    gens = {a.generation for a in w.events(Assigned)}
    for c in ok:
        assert c.generation in gens and c.member_id, f"{w.cfg.name}: commit without its generation: {c}"


def assert_left_cleanly(w: Worker, code: int) -> None:
    assert code == 0, w.log_path.read_text()[-3000:]
    stops = w.events(MemberStop)
    assert stops and stops[-1].clean


def assert_commits_reach_the_end(members: list[Worker], produced: set[tuple[int, int]]) -> None:
    """The highest ok commit per partition is the next offset after the last produced record."""
    ends: dict[int, int] = {}
    for w in members:
        for c in w.events(Commit):
            if c.outcome.value == "ok":
                for _, p, o in c.offsets:
                    ends[p] = max(ends.get(p, 0), o)
    want = {}
    for p, o in produced:
        want[p] = max(want.get(p, 0), o + 1)
    assert ends == want


@pytest.mark.parametrize("stays, leaves", [("kafka-python", "kafka-python"), ("java", "confluent-kafka")],
                         ids=["kafka-python", "java-with-confluent"])
def test_members_share_a_group_and_hand_over_on_leave(cluster, topic, tmp_path, stays, leaves):
    """Two members split 6 partitions in one generation; when one leaves, the other gets all in a later one."""
    produced = produce(cluster, topic, RECORDS // 3)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = start(cluster, tmp_path, "consumer-1", topic, group, client=stays, assignor="range")
    b = start(cluster, tmp_path, "consumer-2", topic, group, lane="lane1", client=leaves, assignor="range")
    members = [a, b]
    try:
        split = wait_for("a stable split between both members", lambda: stable_split(members), workers=members)
        assert set(split[0].partitions).isdisjoint(split[1].partitions)
        assert split[0].member_id != split[1].member_id
        gen = split[0].generation
        produced |= produce(cluster, topic, RECORDS // 3)  # consumed and committed by both, in generation gen
        wait_for("every produced record consumed", lambda: consumed_offsets(members) >= produced, workers=members)
        for w in members:
            assert [s.client.value for s in w.events(MemberStart)] == [w.cfg.consumer.client.value]
            assert any(c.generation == gen and c.outcome.value == "ok" for c in w.events(Commit)), w.cfg.name

        assert_left_cleanly(b, b.stop())
        after = wait_for("consumer-1 owning all partitions in a later generation",
                         lambda: (x := last_assigned(a)) and len(x.partitions) == PARTITIONS and x, workers=[a])
        assert after.generation > gen
        revoked = [r for r in a.events(Revoked) if r.generation == gen]
        assert revoked and set(revoked[-1].partitions) == set(split[0].partitions)
        leaver = b.events(Revoked)
        assert leaver and leaver[-1].generation == gen  # the leaver revoked (and committed) before leaving
        produced |= produce(cluster, topic, RECORDS // 3)
        wait_for("the rest consumed by consumer-1", lambda: consumed_offsets(members) >= produced, workers=[a])
        assert_left_cleanly(a, a.stop())
        for w in members:
            assert_commits_ok_with_sent_generation(w)
        assert any(c.generation == after.generation and c.outcome.value == "ok" for c in a.events(Commit))
        assert_commits_reach_the_end(members, produced)
    finally:
        for w in members:
            w.kill()


def test_kafka_python_auto_commits_are_recorded_with_their_generation(cluster, topic, tmp_path):
    produced = produce(cluster, topic, 60)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = start(cluster, tmp_path, "consumer-1", topic, group, client="kafka-python", assignor="roundrobin",
              commit_mode="auto", auto_commit_interval_ms=500)
    try:
        wait_for("every produced record consumed", lambda: consumed_offsets([a]) >= produced, workers=[a])
        want = {(topic, p, max(o for q, o in produced if q == p) + 1) for p in range(PARTITIONS)}

        def auto_commit_of_the_end():
            return [c for c in a.events(Commit) if c.auto and c.outcome.value == "ok" and set(c.offsets) >= want]

        commits = wait_for("an auto-commit of the end offsets", auto_commit_of_the_end, workers=[a])
        assigned = a.events(Assigned)
        assert commits[0].generation == assigned[-1].generation and commits[0].member_id == assigned[-1].member_id
        assert_left_cleanly(a, a.stop())
    finally:
        a.kill()


def test_java_member_does_not_outlive_a_killed_worker(cluster, topic, tmp_path):
    w = start(cluster, tmp_path, "consumer-1", topic, f"g-{uuid.uuid4().hex[:6]}", client="java")
    try:
        wait_for("the Java member's assignment", lambda: last_assigned(w), workers=[w])
        children = Path(f"/proc/{w.proc.pid}/task/{w.proc.pid}/children").read_text().split()
        assert len(children) == 1
        jvm = int(children[0])
        assert "VerifiableConsumer" in Path(f"/proc/{jvm}/cmdline").read_text()
        w.proc.kill()
        w.proc.wait()

        def jvm_gone():
            try:
                return Path(f"/proc/{jvm}/stat").read_text().split(") ", 1)[1].startswith("Z")
            except FileNotFoundError:
                return True

        wait_for("the JVM to die with its worker (PR_SET_PDEATHSIG)", jvm_gone, timeout=10)
    finally:
        w.kill()
