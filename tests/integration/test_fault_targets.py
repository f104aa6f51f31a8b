"""Every fault acts on the process or link actually under test, and the verdict says when one did not fire.

The kernel state of each process is read here with psutil, independently of the fault's own evidence;
the coordinator's view (DescribeGroups) shows that a paused member really stopped heartbeating.
"""

import time
import uuid

import psutil
import pytest

from chaos.checkers.result import Validity
from chaos.cluster.admin import retry
from chaos.model.checker_name import CheckerName
from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec
from chaos.model.workload import ConsumerSpec, WorkloadSpec
from chaos.nemesis.faults import Primitives
from chaos.runner import judge_once
from chaos.workload.run import WorkloadRun

CLIENTS = ["confluent-kafka", "kafka-python", "java"]


@pytest.fixture(scope="module")
def one_member_per_client(_chaos_session_cluster, tmp_path_factory):
    """A group with one member of each client library (a Java member is a Python worker and its JVM)."""
    spec = WorkloadSpec(partitions=6, producers=(),
                        consumers=tuple(ConsumerSpec(client=c, lane=f"lane{i}", session_timeout_ms=4000,
                                                     heartbeat_interval_ms=500)
                                        for i, c in enumerate(CLIENTS)))
    with WorkloadRun(_chaos_session_cluster, spec, tmp_path_factory.mktemp("targets") / "run") as run:
        run.wait_assigned(timeout=90)
        yield run
    _chaos_session_cluster.heal()


def _states(pids):
    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            out[pid] = "gone"
    return out


def _members_at_coordinator(run):
    info = run.admin.describe_group(run.group)
    return {m.client_id for m in info.members}


@pytest.mark.parametrize("member, client", [(f"consumer-{i}", c) for i, c in enumerate(CLIENTS)])
def test_pause_stops_every_process_of_the_member_and_the_coordinator_evicts_it(one_member_per_client, member,
                                                                               client):
    run = one_member_per_client
    prims = Primitives(run.cluster, run)
    tree = run.members[member].tree()
    if client == "java":
        assert len(tree) >= 2, f"a Java member is a worker and its JVM, got {tree}"
    active = prims.process(FaultSpec.build(type="pause", target="member", node=member), member)
    try:
        ok, evidence = active.verify_effect()
        assert ok, evidence
        states = _states(tree)
        assert set(states.values()) == {psutil.STATUS_STOPPED}, states
        # a frozen member sends no heartbeats: the coordinator removes it after session.timeout.ms (4 s)
        retry(lambda: True if member not in _members_at_coordinator(run) else None, time.monotonic() + 30,
              f"the coordinator to evict paused {member}")
    finally:
        active.heal()
    ok, evidence = active.verify_healed()
    assert ok, evidence
    assert psutil.STATUS_STOPPED not in _states(tree).values()
    # thawed, it finds itself evicted and rejoins (under a new member id)
    retry(lambda: True if member in _members_at_coordinator(run) else None, time.monotonic() + 60,
          f"resumed {member} to rejoin the group")
    run.wait_assigned(timeout=60)


def test_kill_of_a_java_member_ends_its_jvm_too(one_member_per_client):
    run = one_member_per_client
    member = f"consumer-{CLIENTS.index('java')}"
    tree = run.members[member].tree()
    assert len(tree) >= 2, tree
    active = Primitives(run.cluster, run).process(FaultSpec.build(type="kill", target="member", node=member), member)
    try:
        ok, evidence = active.verify_effect()
        assert ok, evidence
        assert set(_states(tree).values()) <= {"gone", psutil.STATUS_ZOMBIE}, _states(tree)
    finally:
        active.heal()
    assert active.verify_healed()[0]
    run.wait_assigned(timeout=90)


def test_pause_of_a_zookeeper_node_stops_it(kafka_cluster, tmp_path):
    spec = WorkloadSpec(partitions=3, producers=(), consumers=(ConsumerSpec(lane="lane0"),))
    with WorkloadRun(kafka_cluster, spec, tmp_path / "run") as run:
        pid = kafka_cluster.process("zk-1").pid
        active = Primitives(kafka_cluster, run).process(FaultSpec.build(type="pause", target="node", node="zk-1"), "zk-1")
        try:
            assert active.verify_effect()[0]
            assert _states([pid]) == {pid: psutil.STATUS_STOPPED}
        finally:
            active.heal()
        assert _states([pid])[pid] not in (psutil.STATUS_STOPPED, "gone")


def test_role_queries_wait_through_a_topic_just_created(kafka_cluster):
    """UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE right after CreateTopics are waited through: the
    public queries name a broker instead of raising (this race failed CI runs before)."""
    brokers = {b.node for b in kafka_cluster.topology.brokers}
    for _ in range(10):
        topic = f"fresh-{uuid.uuid4().hex[:8]}"
        kafka_cluster.admin.create_topic(topic, 3, 3, wait=False)  # ask at once, as a user would
        assert kafka_cluster.leader_of(topic, 2) in brokers
        assert len(kafka_cluster.admin.partitions(topic)) == 3
        assert kafka_cluster.coordinator_of(f"g-{topic}") in brokers
    assert kafka_cluster.controller() in brokers


def test_a_fault_whose_trigger_never_comes_makes_the_run_unknown(kafka_cluster, tmp_path):
    """No rebalance is provoked, so the CompletingRebalance trigger never fires: the run must not pass."""
    exp = Experiment.model_validate({
        "name": "never-fires",
        "workload": {"partitions": 3, "consumers": [{"lane": "lane0"}, {"lane": "lane1"}],
                     "producers": [{"rate": 50, "lane": "lane0"}]},
        "faults": [{"type": "kill", "target": "coordinator", "duration_s": 1,
                    "trigger": {"state": "CompletingRebalance", "not_before_s": 0.5, "timeout_s": 3}}],
        "phases": {"warmup_s": 0.5, "chaos_s": 4},
    })
    oc = judge_once(kafka_cluster, exp, 5, tmp_path / "run")
    assert oc.valid == "unknown", (oc.valid, oc.error, oc.explanation)
    from chaos.checkers.judge import judge_run

    verdict = judge_run(tmp_path / "run")
    faults = verdict.result(CheckerName.FAULTS)
    assert faults.valid is Validity.UNKNOWN and "never fired" in faults.summary, faults.summary
    assert all(r.valid is Validity.TRUE for r in verdict.results if r.checker is not CheckerName.FAULTS), \
        [(r.checker.value, r.summary) for r in verdict.results if r.valid is not Validity.TRUE]
