"""The fault-kind registry and target resolution, without a cluster."""

import random
import subprocess
import sys

import pytest

from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.model.experiment import FaultType
from chaos.model.target import Role
from chaos.nemesis.kinds import kinds
from chaos.nemesis.target import resolve


def test_every_fault_type_is_a_registered_kind_with_a_family_and_an_injection():
    reg = kinds()
    assert [t.value for t in FaultType] and {t.value for t in FaultType} == set(reg)
    for k in reg.values():
        assert k.family in {"process", "link", "network", "topology", "membership", "container"}, k
        assert callable(k.inject) and k.summary and k.targets


def test_the_registry_loads_without_runtime_libraries():
    code = ("import sys; from chaos.nemesis.kinds import kinds; kinds(); "
            "bad = [m for m in ('psutil', 'confluent_kafka', 'kafka', 'docker', 'pyspark', 'requests') "
            "if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr


def test_a_kind_declares_its_capability_and_its_own_fields():
    exp = parse_experiment({"name": "x", "faults": [{"type": "partition", "target": "coordinator", "peer": "controller"}]})
    assert {k: v.value for k, v in exp.required_capabilities().items()} == {"partition": "pair_partition"}
    with pytest.raises(UsageError, match="peer applies to type partition only"):
        parse_experiment({"name": "x", "faults": [{"type": "kill", "target": "coordinator", "peer": "controller"}]})
    with pytest.raises(UsageError, match="crash_replace applies to members"):
        parse_experiment({"name": "x", "faults": [{"type": "crash_replace", "target": "coordinator"}]})
    with pytest.raises(UsageError, match="kill takes target"):
        parse_experiment({"name": "x", "faults": [{"type": "kill", "target": "topic"}]})


class View:
    topic = "t"

    def __init__(self, **answers):
        self.a = answers

    def coordinator(self):
        return self.a.get("coordinator")

    def controller(self):
        return self.a.get("controller")

    def leader(self, partition):
        return self.a.get("leaders", {}).get(partition)

    def group_leader(self):
        return self.a.get("group_leader")

    def live_members(self):
        return self.a.get("live", [])

    def all_members(self):
        return self.a.get("members", [])

    def running_brokers(self):
        return self.a.get("running", [])

    def all_brokers(self):
        return ["broker-1", "broker-2", "broker-3"]

    def zookeepers(self):
        return ["zk-1", "zk-2", "zk-3"]

    def controllers(self):
        return self.a.get("controllers", [])


def test_target_resolution_is_a_function_of_the_view_and_the_seed():
    v = View(coordinator="broker-2", controller="broker-1", leaders={3: "broker-3"}, group_leader="consumer-0",
             live=["consumer-2", "consumer-0"], members=["consumer-1", "consumer-0"], running=["broker-1", "broker-3"])
    rng = lambda: random.Random("7:f0:target")  # noqa: E731
    assert resolve(Role.COORDINATOR, v, rng()) == ["broker-2"]
    assert resolve(Role.LEADER, v, rng(), partition=3) == ["broker-3"]
    assert resolve(Role.LEADER, v, rng(), partition=1) == []            # no leader now: nobody
    assert resolve(Role.RANDOM_MEMBER, v, rng()) == resolve(Role.RANDOM_MEMBER, v, rng())  # seeded
    assert resolve(Role.RANDOM_MEMBER, v, rng())[0] in {"consumer-0", "consumer-2"}
    assert resolve(Role.RANDOM_BROKER, View(running=[]), rng()) == []
    assert resolve(Role.ZOOKEEPER_QUORUM, v, rng()) == resolve(Role.ZOOKEEPER_QUORUM, v, rng())
    assert len(resolve(Role.ZOOKEEPER_QUORUM, v, rng())) == 2
    assert resolve(Role.ALL_MEMBERS, v, rng()) == ["consumer-0", "consumer-1"]
    assert resolve(Role.NODE, v, rng(), node="zk-2") == ["zk-2"]
    assert resolve(Role.TOPIC, v, rng()) == ["t"]


def test_kraft_roles_resolve_to_the_quorum_leader_and_a_majority_of_voters():
    v = View(controller="controller-2", controllers=["controller-1", "controller-2", "controller-3"])
    rng = lambda: random.Random("7:f0:target")  # noqa: E731
    assert resolve(Role.ACTIVE_CONTROLLER, v, rng()) == ["controller-2"]
    majority = resolve(Role.CONTROLLER_QUORUM, v, rng())
    assert majority == resolve(Role.CONTROLLER_QUORUM, v, rng()) and len(majority) == 2
    assert set(majority) <= {"controller-1", "controller-2", "controller-3"}
    assert resolve(Role.ACTIVE_CONTROLLER, View(), rng()) == []   # no leader elected now: nobody
