"""The fault-kind registry and target resolution, without a cluster."""

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import chaos
from chaos.errors import UsageError
from chaos.experiment import parse_experiment
from chaos.model.faults import declarations
from chaos.model.faults.base import FAMILIES
from chaos.model.target import Role
from chaos.nemesis.kinds import kinds
from chaos.nemesis.target import resolve


def test_every_declared_kind_has_one_injection_a_family_and_a_summary():
    reg, declared = kinds(), declarations()
    assert list(reg) == list(declared) and len(reg) >= 19
    for name, k in reg.items():
        assert k.spec is declared[name] and k.spec.kind_name() == name
        assert k.family in FAMILIES, k
        assert callable(k.inject) and k.summary and k.targets


def test_a_kind_declared_without_an_injection_is_refused_when_the_registry_loads(tmp_path):
    """A declaration alone (a new model in chaos.model.faults, no injection module) fails loudly, naming it."""
    root = _copy_package(tmp_path)
    (root / "chaos" / "model" / "faults" / "skew.py").write_text(_SKEW_MODEL)
    out = _python(root, "from chaos.nemesis.kinds import kinds; kinds()", ok=False)
    assert "fault kinds declared without an injection: ['clock_skew']" in out.stderr


def test_a_new_kind_is_one_declaration_and_one_injection_module(tmp_path):
    """Issue 32: a kind written as one model (chaos/model/faults/skew.py) and one injection module
    (chaos/nemesis/kinds/skew.py), nothing else edited, is validated with its own fields, refused where its model
    says, has its own JSON Schema entry, is planned, and is injected through the registry."""
    root = _copy_package(tmp_path)
    (root / "chaos" / "model" / "faults" / "skew.py").write_text(_SKEW_MODEL)
    (root / "chaos" / "nemesis" / "kinds" / "skew.py").write_text(_SKEW_INJECTION)
    code = (
        "import json\n"
        "from chaos.experiment import parse_experiment, json_schema\n"
        "from chaos.errors import UsageError\n"
        "from chaos.nemesis.kinds import kinds\n"
        "from chaos.nemesis.schedule import plan\n"
        "exp = parse_experiment({'name': 'x', 'faults': [{'type': 'clock_skew', 'target': 'node', 'node': 'broker-1',"
        " 'skew_s': 30}]})\n"
        "f = exp.faults[0]\n"
        "print(type(f).__name__, f.skew_s, sorted(t.value for t in f.traits), f.family)\n"
        "for bad in ({'type': 'clock_skew', 'target': 'coordinator'}, {'type': 'kill', 'target': 'coordinator',"
        " 'skew_s': 1}, {'type': 'clock_skew', 'target': 'coordinator', 'skew_s': 0}):\n"
        "    try:\n"
        "        parse_experiment({'name': 'x', 'faults': [bad]}, 'f.yaml')\n"
        "    except UsageError as e:\n"
        "        print(e)\n"
        "print('ClockSkew' in json.dumps(json_schema()), [p.spec.type for p in plan(exp, 1)])\n"
        "print(kinds()['clock_skew'].inject.__module__)\n")
    lines = _python(root, code).stdout.splitlines()
    assert lines[0] == "ClockSkew 30.0 ['takes_target_out'] process"
    assert lines[1] == "f.yaml: faults.0: clock_skew needs skew_s"
    assert lines[2] == "f.yaml: faults.0: skew_s applies to type clock_skew only"
    assert lines[3].startswith("f.yaml: faults.0.skew_s: Input should be greater than 0")
    assert lines[4] == "True ['clock_skew']"
    assert lines[5] == "chaos.nemesis.kinds.skew"


#: the declaration of a kind this project does not have (a broker's clock moved): fields, validation, traits
_SKEW_MODEL = """
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.target import Role


class ClockSkew(FaultSpec):
    type: Literal["clock_skew"]
    family: ClassVar[Family] = "process"
    summary: ClassVar[str] = "the node's clock moved by skew_s (back at the heal)"
    targets: ClassVar[frozenset[Role]] = frozenset({Role.NODE, Role.COORDINATOR})
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.TAKES_TARGET_OUT})
    skew_s: Annotated[float, Field(gt=0)]
"""

#: its injection: registered for the declaration, typed against it
_SKEW_INJECTION = """
from chaos.model.faults.skew import ClockSkew
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register


def _inject(inj: Injection[ClockSkew]) -> list[Active]:
    return [Active(inj.nodes, lambda: None, lambda: (True, f"skewed {inj.spec.skew_s}s"), lambda: (True, "back"))]


register(ClockSkew, _inject)
"""


def _copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(Path(chaos.__file__).parent, root / "chaos", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _python(root: Path, code: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=root)
    assert (out.returncode == 0) is ok, out.stderr
    return out


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
