"""Experiment files: validation at load time, the catalogue, the schema, seeded schedules."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chaos.errors import UsageError
from chaos.experiment import catalogue, json_schema, load_experiment, parse_experiment
from chaos.nemesis.schedule import plan, timeline

ROOT = Path(__file__).resolve().parents[3]


def test_every_catalogue_experiment_is_valid():
    entries = catalogue(ROOT / "experiments")
    assert len(entries) >= 10
    bad = [(p.name, e) for p, e in entries if isinstance(e, UsageError)]
    assert not bad
    assert {e.name for _, e in entries} >= {"baseline"}
    for p, e in entries:
        assert e.name == p.stem, f"{p.name}: name should match the file name"


def test_docker_only_experiments_are_valid_and_ask_for_docker():
    entries = catalogue(ROOT / "experiments" / "docker")
    assert entries and all(not isinstance(e, UsageError) and e.backend == "docker" for _, e in entries)
    with pytest.raises(UsageError, match="disconnect needs backend docker"):
        parse_experiment({"name": "x", "faults": [{"type": "disconnect", "target": "coordinator"}]}, "x.yaml")


@pytest.mark.parametrize("doc, fragment", [
    ({"name": "x", "faults": [{"type": "kil", "target": "coordinator"}]},
     "faults.0: type 'kil' is not a fault kind: use one of kill, terminate"),
    ({"name": "x", "faults": [{"target": "coordinator"}]}, "faults.0: a fault needs `type`: one of kill"),
    ({"name": "x", "faults": [{"type": "add_partitions", "target": "topic"}]},
     "faults.0: add_partitions needs partitions"),
    ({"name": "x", "faults": [{"type": "latency", "target": "coordinator", "params": {"jitter_ms": 5}}]},
     "faults.0: latency needs params.latency_ms"),
    ({"name": "x", "faults": [{"type": "latency", "target": "coordinator", "params": {"latency_ms": 5, "lag": 1}}]},
     "faults.0.params.lag: unknown field"),
    ({"name": "x", "faults": [{"type": "pause", "target": "coordinator", "params": {"latency_ms": 5}}]},
     "faults.0: params applies to link faults only"),
    ({"name": "x", "workload": {"consumrs": []}}, "workload.consumrs: unknown field"),
    ({"name": "x", "faults": [{"type": "pause", "target": "member", "node": "consumer-7"}]},
     "faults.0.node: 'consumer-7' is not a member"),
    ({"name": "x", "faults": [{"type": "pause", "target": "member"}]}, "target member needs `node`"),
    ({"name": "x", "faults": [{"type": "latency", "target": "coordinator"}]}, "faults.0: latency needs params.latency_ms"),
    ({"name": "x", "faults": [{"type": "kill", "target": "coordinator", "trigger": {"at_s": 1, "state": "Stable"}}]},
     "give exactly one of"),
    ({"name": "x", "cluster": {"brokers": 2}, "workload": {"replication": 3}}, "exceeds cluster.brokers=2"),
    ({"name": "x", "workload": {"consumers": [{"lane": "lane5"}]}}, "lane: 'lane5' does not exist"),
    ({"name": "x", "faults": [{"type": "change_subscription", "target": "coordinator", "subscription": ["extra"]}]},
     "change_subscription applies to one member"),
    ({"name": "x", "faults": [{"type": "change_subscription", "target": "random_member"}]},
     "change_subscription needs subscription"),
    ({"name": "x", "faults": [{"type": "change_subscription", "target": "random_member", "subscription": ["topic"]}]},
     "is the member's subscription already"),
    ({"name": "x", "faults": [{"type": "change_subscription", "target": "random_member", "subscription": ["other"]}]},
     "Input should be 'topic' or 'extra'"),
    ({"name": "x", "faults": [{"type": "kill", "target": "random_member", "subscription": ["extra"]}]},
     "subscription applies to type change_subscription only"),
    ({"name": "x", "workload": {"consumers": [{"client": "java"}]},
      "faults": [{"type": "change_subscription", "target": "random_member", "subscription": ["extra"]}]},
     "change_subscription needs Python clients"),
    # an app or command member owns its subscription (found exploring the python-service example)
    ({"name": "x", "workload": {"consumers": [{}, {"command": ["python3", "c.py"]}]},
      "faults": [{"type": "change_subscription", "target": "member", "node": "consumer-1", "subscription": ["extra"]}]},
     "faults.0: change_subscription on consumer-1: an app or command member owns its subscription"),
    ({"name": "x", "workload": {"consumers": [{}, {"app": "shop.orders:main"}]},
      "faults": [{"type": "change_subscription", "target": "group_leader", "subscription": ["extra"]}]},
     "change_subscription on group_leader (it may pick one): an app or command member owns its subscription"),
    ({"name": "x", "backend": "docker", "faults": [{"type": "disconnect", "target": "member", "node": "consumer-0"}]},
     "disconnect takes a cluster node off its network"),
    ({"name": "x", "workload": {"consumers": [{"client": "kafka-python", "assignor": "cooperative-sticky"}]}},
     "the kafka-python worker has no cooperative-sticky"),
    ({"name": "Bad Name"}, "name: String should match pattern"),
    # KRaft and KIP-848 (issue 13); tests/unit/test_kraft_surface.py has the rest
    ({"name": "x", "faults": [{"type": "switch_protocol", "target": "member", "node": "consumer-0"}]},
     "switch_protocol moves a member between the classic and the KIP-848 consumer protocol, which needs a KRaft"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{"client": "kafka-python"}]},
      "faults": [{"type": "switch_protocol", "target": "member", "node": "consumer-0"}]},
     "consumer-0 uses kafka-python, which has no KIP-848 consumer protocol"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{}, {"client": "kafka-python"}]},
      "faults": [{"type": "switch_protocol", "target": "random_member"}]},
     "may pick a kafka-python member"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"}, "faults": [{"type": "switch_protocol", "target": "coordinator"}]},
     "switch_protocol applies to one member"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"},
      "faults": [{"type": "partition", "target": "coordinator", "peer": "controller"}]},
     "on KRaft a broker reaches the controllers through its quorum links"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"}, "faults": [{"type": "partition", "target": "active_controller"}]},
     "partition cuts brokers from brokers"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{"group_protocol": "consumer"}]},
      "faults": [{"type": "bounce", "target": "group_leader"}]},
     "a KIP-848 group has no group leader"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0", "mode": "zookeeper"}},
     "cluster: mode=zookeeper is not possible on Kafka 4.4.0"),
    ({"name": "x", "workload": {"consumers": [{"group_protocol": "consumer"}]}},
     "workload.consumers.0.group_protocol: consumer (KIP-848) needs a KRaft cluster"),
    ({"name": "x", "cluster": {"kafka_version": "4.4.0"},
      "workload": {"consumers": [{"group_protocol": "consumer", "remote_assignor": "sticky"}]}},
     "remote_assignor: Input should be 'uniform' or 'range'"),
    ({"name": "x", "faults": [{"type": "kill", "target": "active_controller"}]},
     "faults.0: active_controller needs a KRaft cluster"),
    # after_fault: a live trigger waiting for an earlier fault to be over
    ({"name": "x", "faults": [{"type": "bounce", "target": "member", "node": "consumer-0", "trigger": {"at_s": 1}},
                              {"type": "kill", "target": "coordinator", "trigger": {"at_s": 3, "after_fault": "f0"}}]},
     "after_fault f0 applies to live triggers"),
    ({"name": "x", "faults": [{"type": "kill", "target": "coordinator",
                               "trigger": {"state": "Stable", "after_fault": "f1"}},
                              {"type": "bounce", "target": "member", "node": "consumer-0", "trigger": {"at_s": 1}}]},
     "faults.0.trigger.after_fault: the first fault has no fault before it"),
    ({"name": "x", "faults": [{"type": "bounce", "target": "member", "node": "consumer-0", "trigger": {"at_s": 1}},
                              {"type": "kill", "target": "coordinator",
                               "trigger": {"state": "Stable", "after_fault": "f2"}}]},
     "faults.1.trigger.after_fault: f2 must name a fault listed before this one (f0 to f0)"),
    ({"name": "x", "faults": [{"type": "bounce", "target": "random_member", "trigger": {"random": {"count": 2}}},
                              {"type": "kill", "target": "coordinator",
                               "trigger": {"state": "Stable", "after_fault": "f0"}}]},
     "that fires once (not a random trigger)"),
    ({"name": "x", "faults": [{"type": "kill", "target": "coordinator",
                               "trigger": {"state": "Stable", "after_fault": "bounce"}}]},
     "after_fault: String should match pattern"),
])
def test_bad_experiments_fail_with_one_line_naming_file_and_field(doc, fragment):
    with pytest.raises(UsageError) as err:
        parse_experiment(doc, "exp.yaml")
    text = str(err.value)
    assert text.startswith("exp.yaml: ") and fragment in text and "\n" not in text


def test_malformed_yaml_names_the_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\nfaults: [\n  {type: kill\n")
    with pytest.raises(UsageError, match=r"broken.yaml:\d+: not valid YAML"):
        load_experiment(p)


def test_cli_run_on_a_bad_experiment_exits_2_with_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"name": "bad", "phases": {"chaos_s": -1}}))
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(p)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [res.stderr.strip()]
    assert "phases.chaos_s" in res.stderr and "Traceback" not in res.stderr


def test_committed_json_schema_is_current():
    committed = json.loads((ROOT / "experiments" / "schema.json").read_text())
    assert committed == json.loads(json.dumps(json_schema())), "run: chaos schema --out experiments/schema.json"


def _random_experiment():
    return parse_experiment({
        "name": "r", "phases": {"chaos_s": 60},
        "faults": [
            {"type": "kill", "target": "random_broker", "duration_s": 5,
             "trigger": {"random": {"count": 4, "min_gap_s": 8}}},
            {"type": "latency", "target": "random_member", "params": {"latency_ms": 100},
             "trigger": {"random": {"count": 3, "start_s": 5, "end_s": 40}}},
            {"type": "kill", "target": "coordinator", "trigger": {"state": "CompletingRebalance"}},
        ]})


def test_same_seed_same_timeline_and_other_seeds_differ():
    exp = _random_experiment()
    a, b = timeline(plan(exp, 42)), timeline(plan(exp, 42))
    assert a == b
    assert timeline(plan(exp, 43)) != a
    times = [f["at_s"] for f in a if f["fault_id"].startswith("f0.")]
    assert len(times) == 4 and all(abs(x - y) >= 8 for i, x in enumerate(times) for y in times[i + 1:])
    lat = [f["at_s"] for f in a if f["fault_id"].startswith("f1.")]
    assert all(5 <= t <= 40 for t in lat)
    assert [f for f in a if f["fault_id"] == "f2"][0]["at_s"] is None  # state trigger: decided live


def test_random_target_choice_is_seeded():
    pf = plan(_random_experiment(), 7)[0]
    assert pf.target_rng(7).random() == pf.target_rng(7).random()
