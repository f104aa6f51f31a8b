"""Fault primitives take effect and heal — checked here independently of the nemesis's own evidence —
and a CompletingRebalance trigger kills the coordinator inside that state (checked against the broker's log)."""

import json
import socket
import time
from datetime import datetime

import psutil
import pytest

from chaos.cluster.admin import retry
from chaos.experiment import load_experiment
from chaos.history.event import Kind
from chaos.history.reader import EventTail, read_history
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults import FaultSpec
from chaos.model.workload import ConsumerSpec, ProducerSpec, WorkloadSpec
from chaos.nemesis.faults import Primitives
from chaos.runner import run_once
from chaos.workload.run import WorkloadRun
from tests.scenarios import isr_shrinks_under_a_pairwise_partition

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture
def workload(kafka_cluster, tmp_path):
    spec = WorkloadSpec(partitions=6, consumers=(ConsumerSpec(lane="lane0", session_timeout_ms=4000),
                                                 ConsumerSpec(lane="lane1", session_timeout_ms=4000)),
                        producers=(ProducerSpec(rate=100, lane="lane0"),))
    with WorkloadRun(kafka_cluster, spec, tmp_path / "run") as run:
        run.wait_assigned()
        yield run


def _connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _consumed_after(run, name, t_ns):
    return any(e.kind is Kind.CONSUMED and e.mono_ns > t_ns
               for e in EventTail(run.run_dir / "events" / f"{name}.jsonl").poll())


def test_kill_broker_then_heal_restarts_it(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    pid = kafka_cluster.process("broker-3").pid
    active = prims.process(FaultSpec.build(type="kill", target="node", node="broker-3"), "broker-3")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    active.heal()
    kafka_cluster.wait_broker_registered("broker-3")
    assert kafka_cluster.process("broker-3").pid != pid and psutil.pid_exists(kafka_cluster.process("broker-3").pid)


def test_pause_member_freezes_it_and_resume_lets_it_consume_again(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    pid = workload.members["consumer-1"].pid
    active = prims.process(FaultSpec.build(type="pause", target="member", node="consumer-1"), "consumer-1")
    retry(lambda: True if psutil.Process(pid).status() == psutil.STATUS_STOPPED else None,
          time.monotonic() + 5, "the kernel to stop consumer-1")
    time.sleep(1)
    t = time.monotonic_ns()
    active.heal()
    assert psutil.Process(pid).status() != psutil.STATUS_STOPPED
    retry(lambda: True if _consumed_after(workload, "consumer-1", t) else None, time.monotonic() + 30,
          "consumer-1 consuming again")


def test_link_down_on_a_members_lane_refuses_connections_until_healed(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    links = kafka_cluster.links_of("lane1")
    ports = [kafka_cluster.topology.link(l).listen_port for l in links]
    active = prims.links(FaultSpec.build(type="link_down", target="member", node="consumer-1"), "t1", links)
    assert not any(_connect(p) for p in ports)
    assert all(_connect(kafka_cluster.topology.link(l).listen_port) for l in kafka_cluster.links_of("lane0"))
    active.heal()
    assert all(_connect(p) for p in ports)


def test_black_hole_on_a_brokers_client_links_stops_its_produce_path_until_healed(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    topic = workload.topic
    leader = kafka_cluster.leader_of(topic, 0)
    links = [l for l in kafka_cluster.links_of(leader) if l.startswith("lane1.")]
    active = prims.links(FaultSpec.build(type="black_hole", target="node", node=leader, links="clients"), "t2", links)
    assert kafka_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=3) is None
    active.heal()
    assert kafka_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=15) is not None


def test_latency_toxic_slows_round_trips(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    topic = workload.topic
    leader = kafka_cluster.leader_of(topic, 0)
    links = [f"lane1.{leader}"]
    t0 = time.monotonic()
    kafka_cluster.produce_probe(topic, lane="lane1", partition=0)
    base = time.monotonic() - t0
    slow = FaultSpec.build(type="latency", target="node", node=leader, params={"latency_ms": 400})
    active = prims.links(slow, "t3", links)
    try:
        t0 = time.monotonic()
        assert kafka_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=20) is not None
        slowed = time.monotonic() - t0
    finally:
        active.heal()
    assert slowed >= 0.8 > base  # request and response each delayed 400 ms


def test_brokers_zookeeper_link_down_deregisters_it_until_healed(kafka_cluster, workload):
    prims = Primitives(kafka_cluster, workload)
    victim = next(b for b in ("broker-1", "broker-2", "broker-3") if b != kafka_cluster.controller())
    bid = int(victim.split("-")[1])
    links = [l for l in kafka_cluster.links_of(victim) if ".zk-" in l]
    active = prims.links(FaultSpec.build(type="link_down", target="node", node=victim, links="zookeeper"), "t4", links)
    try:
        retry(lambda: True if bid not in kafka_cluster.admin.broker_ids() else None, time.monotonic() + 30,
              f"{victim} deregistered")
    finally:
        active.heal()
    kafka_cluster.wait_broker_registered(victim)


def test_add_partitions_grows_the_topic(kafka_cluster, workload):
    active = Primitives(kafka_cluster, workload).add_partitions(9)
    assert active.verify_effect()[0], active.verify_effect()
    # checked apart from the primitive: the cluster's metadata lists 9 partitions (it follows the
    # controller's answer asynchronously, so wait for it, bounded)
    retry(lambda: True if len(kafka_cluster.admin.partitions(workload.topic)) == 9 else None,
          time.monotonic() + 15, "9 partitions in the metadata")


def _log_lines_before(path, group, t_wall):
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if group in line and line.startswith("["):
            ts = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if ts <= t_wall:
                out.append(line)
    return out


def test_completing_rebalance_trigger_kills_the_coordinator_inside_that_state(kafka_cluster, tmp_path):
    exp = load_experiment(ROOT / "experiments" / "coordinator-kill-completing-eager.yaml")
    exp = exp.with_overrides(**{"phases.chaos_s": 10.0})
    # CompletingRebalance lasts from the join's completion to the leader's SyncGroup: a few ms, which a
    # loaded machine's kill (tens of ms from wake-up to signal, measured in CI-like runs) can miss every
    # time. 150 ms of latency on every member's lane (JoinGroup response down, SyncGroup up) widens it
    # to >= 300 ms, so whether the kill lands is decided by the nemesis, not by the machine's load.
    slow = tuple(FaultSpec.build(type="latency", target="member", node=f"consumer-{i}", params={"latency_ms": 150},
                           trigger={"at_s": 0.2}, duration_s=9.5) for i in range(len(exp.workload.consumers)))
    exp = exp.model_copy(update={"faults": exp.faults + slow})
    confirmed = 0
    for attempt in range(3):
        run_dir = run_once(kafka_cluster, exp, 100 + attempt, tmp_path / f"run{attempt}")
        kill = [f for f in json.loads((run_dir / "faults.json").read_text()) if f["type"] == "kill"][0]
        assert kill["fired"], kill
        h = read_history(run_dir / "history.jsonl")
        start = next(e for e in h.events if e.kind is Kind.FAULT_START and e.fault_type == "kill")
        assert start.traits == (FaultTrait.TAKES_TARGET_OUT,)  # recorded as the kind declares it, for the checkers
        group = h.header.experiment["group"]
        # the killed broker's own log: its last line about the group before the kill
        broker_log = run_dir / "logs" / f"{start.node}.log"
        lines = _log_lines_before(broker_log, group, start.ts + 0.001)
        last = [l for l in lines if "Stabilized group" in l or "Preparing to rebalance" in l][-1]
        gen = int(last.split(" generation ")[1].split()[0]) if "Stabilized group" in last else None
        # landing is judged at the effect (the SIGKILL sent), which follows fault_start by the injection time:
        # an assignment in between means the group completed the rebalance before the kill took hold
        in_completing = gen is not None and not any(
            e.kind is Kind.ASSIGNED and e.generation == gen and e.mono_ns <= kill["effect_ns"] for e in h.events)
        assert kill["landed"] == in_completing, (kill, last)  # the nemesis's verdict agrees with the broker
        confirmed += in_completing
        kafka_cluster.heal()
        if confirmed:
            break
    assert confirmed >= 1


@pytest.mark.slow
def test_pairwise_partition_shrinks_the_isr_then_heals(tmp_path):
    """Opt-in (``--run-slow``) like its docker twin: in a busy-core fresh-clone run the leader never logged the
    ISR shrink within 40 s with the rules in place (docs/known-gaps.md); the cause is not found yet."""
    from chaos.cluster.firewall import unavailable_reason
    from chaos.cluster.local import LocalCluster
    from chaos.model.cluster import ClusterSpec

    if unavailable_reason():
        pytest.skip(unavailable_reason())
    # a cluster of its own: a fresh controller and fresh metadata, whatever earlier tests did
    with LocalCluster(ClusterSpec.build(brokers=3, lanes=1)) as cluster:
        isr_shrinks_under_a_pairwise_partition(cluster)


def test_a_fault_that_cannot_be_injected_says_why_and_makes_the_run_unknown(kafka_cluster, tmp_path):
    """consumer-1 is killed for 6 s; a subscription change aimed at it meanwhile cannot be injected (the member
    is not running). faults.json, the history and the verdict say so — not "did not fire in time"."""
    from chaos.checkers.judge import judge_run
    from chaos.checkers.result import Validity
    from chaos.experiment import parse_experiment

    exp = parse_experiment({
        "name": "uninjectable", "cluster": {"brokers": 3, "lanes": 2},
        "workload": {"partitions": 4, "consumers": [{"lane": "lane0"}, {"lane": "lane1"}],
                     "producers": [{"rate": 50, "lane": "lane0"}]},
        "faults": [{"type": "kill", "target": "member", "node": "consumer-1", "trigger": {"at_s": 0.5}, "duration_s": 6},
                   {"type": "change_subscription", "target": "member", "node": "consumer-1", "subscription": ["extra"],
                    "trigger": {"at_s": 2}, "duration_s": 1}],
        "phases": {"warmup_s": 0.5, "chaos_s": 8, "quiesce_s": 60}}, "uninjectable")
    run_dir = run_once(kafka_cluster, exp, 5, tmp_path / "run")
    change = next(f for f in json.loads((run_dir / "faults.json").read_text()) if f["fault_id"] == "f1")
    assert not change["fired"], change
    assert change["skipped_reason"].startswith("injection failed: InfrastructureError: consumer-1 is not running"), change
    verdict = judge_run(run_dir, exp.checkers.names())
    faults = next(r for r in verdict.results if r.checker.value == "faults")
    assert faults.valid is Validity.UNKNOWN and "injection failed" in faults.summary, faults.summary
