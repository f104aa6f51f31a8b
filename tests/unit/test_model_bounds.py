"""Every count of the model that becomes processes or threads is bounded, the bound in the message: the bound
itself loads, one more is refused at load time (before anything starts)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chaos.model.cluster import MAX_BROKERS, MAX_CONTROLLERS, MAX_LANES, MAX_ZOOKEEPERS, ClusterSpec
from chaos.model.experiment import MAX_RUNS, Experiment
from chaos.model.trigger import MAX_FAULTS
from chaos.model.workload import MAX_CONSUMERS, MAX_PARTITIONS, MAX_PRODUCERS, WorkloadSpec


def _refused(build, *says: str) -> None:
    with pytest.raises(ValidationError) as err:
        build()
    text = str(err.value)
    for fragment in says:
        assert fragment in text, text


@pytest.mark.parametrize("field, limit", [("brokers", MAX_BROKERS), ("zookeepers", MAX_ZOOKEEPERS),
                                          ("controllers", MAX_CONTROLLERS), ("lanes", MAX_LANES)])
def test_cluster_counts(field, limit):
    extra = {"replication_factor": 1} if field != "brokers" else {}
    assert getattr(ClusterSpec(**{field: limit}, **extra), field) == limit
    _refused(lambda: ClusterSpec(**{field: limit + 1}, **extra), field, f"less than or equal to {limit}")


@pytest.mark.parametrize("field, limit, what", [("consumers", MAX_CONSUMERS, "members"),
                                                ("producers", MAX_PRODUCERS, "producers")])
def test_members_and_producers_are_processes(field, limit, what):
    assert len(getattr(WorkloadSpec(**{field: [{}] * limit}), field)) == limit
    _refused(lambda: WorkloadSpec(**{field: [{}] * 10_000}), field, f"10000 {what}: at most {limit}",
             "process of its own")


def test_partitions_of_the_topic_and_of_a_fault():
    WorkloadSpec(partitions=MAX_PARTITIONS)
    _refused(lambda: WorkloadSpec(partitions=MAX_PARTITIONS + 1), f"less than or equal to {MAX_PARTITIONS}")
    _refused(lambda: Experiment(name="x", faults=[{"type": "add_partitions", "target": "cluster",
                                                   "partitions": MAX_PARTITIONS + 1}]),
             f"less than or equal to {MAX_PARTITIONS}")


def test_planned_faults_are_threads():
    def exp(count: int, specs: int = 1) -> Experiment:
        fault = {"type": "kill", "target": "random_broker", "duration_s": 1, "trigger": {"random": {"count": count}}}
        return Experiment(name="x", phases={"chaos_s": 60}, faults=[fault] * specs)

    assert len(exp(MAX_FAULTS // 2, 2).faults) == 2
    _refused(lambda: exp(MAX_FAULTS // 2 + 1, 2), f"{MAX_FAULTS + 2} planned faults", f"at most {MAX_FAULTS}")
    _refused(lambda: exp(MAX_FAULTS + 1), f"less than or equal to {MAX_FAULTS}")
    _refused(lambda: Experiment(name="x", faults=[{"type": "kill", "target": "random_broker"}] * (MAX_FAULTS + 1)),
             f"{MAX_FAULTS + 1} faults: at most {MAX_FAULTS}")


def test_runs():
    Experiment(name="x", runs=MAX_RUNS)
    _refused(lambda: Experiment(name="x", runs=MAX_RUNS + 1), f"less than or equal to {MAX_RUNS}")
