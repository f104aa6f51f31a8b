"""KRaft and KIP-848 at the surface (issue 13): what the model, ``chaos run``/``chaos cluster up`` and the
pytest plugin accept and refuse. No cluster: every CLI case is refused before one would start (and the
runtime cache points at an empty directory, so a case that slipped through fails instead of starting one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.errors import UsageError
from chaos.experiment import apply_overrides, catalogue, load_experiment, parse_experiment
from chaos.model.cluster import ClusterMode, ClusterSpec
from chaos.model.workload import Assignor, GroupProtocol, RebalanceProtocol, RemoteAssignor

pytest_plugins = ["pytester"]

CHAOS = [sys.executable, "-m", "chaos.cli"]

KRAFT = "cluster: {kafka_version: '4.4.0'}\n"
ZK = "cluster: {kafka_version: '3.9.1'}\n"


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, KAFKA_CHAOS_STATE=str(tmp_path / "state"), KAFKA_CHAOS_CACHE=str(tmp_path / "cache"))


def refused(argv, env, cwd, *fragments):
    """Run the real ``chaos``; it must say exactly one ``chaos: error:`` line (the last), exit 2, no traceback.
    Returns that line and the whole stderr."""
    res = subprocess.run(CHAOS + argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1 and res.stderr.rstrip().endswith(errors[0]), res.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0], res.stderr


# ------------------------------------------------------------------ bad input: one line, exit 2

FILES = [
    ("zookeeper-mode-on-4x", "cluster: {kafka_version: '4.4.0', mode: zookeeper}\n",
     ["x.yaml: cluster: mode=zookeeper is not possible on Kafka 4.4.0", "use a 3.x version for ZooKeeper"]),
    ("kraft-on-3.6", "cluster: {kafka_version: '3.6.2', mode: kraft}\n", ["use 3.7 or later for KRaft"]),
    ("kip848-on-zookeeper", ZK + "workload: {consumers: [{group_protocol: consumer}]}\n",
     ["workload.consumers.0.group_protocol: consumer (KIP-848) needs a KRaft cluster"]),
    ("kafka-python-kip848", KRAFT + "workload: {consumers: [{client: kafka-python, group_protocol: consumer}]}\n",
     ["workload.consumers.0", "kafka-python has no KIP-848 consumer protocol"]),
    ("unknown-remote-assignor", KRAFT + "workload: {consumers: [{group_protocol: consumer, remote_assignor: sticky}]}\n",
     ["workload.consumers.0.remote_assignor: Input should be 'uniform' or 'range'", "'sticky'"]),
    ("remote-assignor-under-classic", KRAFT + "workload: {consumers: [{remote_assignor: uniform}]}\n",
     ["remote_assignor applies to group_protocol: consumer only"]),
    ("client-assignor-under-kip848",
     KRAFT + "workload: {consumers: [{group_protocol: consumer, assignor: cooperative-sticky}]}\n",
     ["assignor cooperative-sticky is a client-side (classic) assignor", "set remote_assignor"]),
    ("zookeeper-quorum-on-kraft",
     KRAFT + "faults: [{type: kill, target: zookeeper_quorum, trigger: {at_s: 1}}]\n",
     ["faults.0: a KRaft cluster has no ZooKeeper", "controller_quorum"]),
    ("zookeeper-node-on-kraft", KRAFT + "faults: [{type: kill, target: node, node: zk-1}]\n",
     ["faults.0.node: 'zk-1' is not a node"]),
    ("zookeeper-links-on-kraft", KRAFT + "faults: [{type: link_down, target: coordinator, links: zookeeper}]\n",
     ["faults.0.links: a KRaft cluster has no ZooKeeper sessions"]),
    ("active-controller-on-zookeeper", ZK + "faults: [{type: kill, target: active_controller}]\n",
     ["faults.0: active_controller needs a KRaft cluster"]),
    ("controller-quorum-on-zookeeper", ZK + "faults: [{type: kill, target: controller_quorum}]\n",
     ["faults.0: controller_quorum needs a KRaft cluster"]),
    ("controller-quorum-of-one", KRAFT + "faults: [{type: kill, target: controller_quorum}]\n",
     ["controller_quorum needs cluster.controllers: 3"]),
    ("even-quorum", "cluster: {kafka_version: '4.4.0', controllers: 2}\n", ["a KRaft quorum needs an odd size"]),
    ("unknown-version", "cluster: {kafka_version: '5.0.0'}\n",
     ["x.yaml: cluster.kafka_version: unknown Kafka version '5.0.0'", "2.8.x-3.9.x", "3.7.x-4.x"]),
]


@pytest.mark.parametrize("body, fragments", [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_bad_experiment_file_is_one_line_exit_2(body, fragments, tmp_path, env):
    (tmp_path / "x.yaml").write_text("name: x\n" + body)
    refused(["plan", "x.yaml"], env, tmp_path, *fragments)
    # the same file through `chaos run` is refused before anything starts
    refused(["run", "x.yaml"], env, tmp_path, *fragments)


RUNS = [
    ("kip848-on-zookeeper", None, ["run", "baseline", "--kafka-version", "3.9.1", "--group-protocol", "consumer"],
     ["baseline with --kafka-version 3.9.1 --group-protocol consumer:", "consumer (KIP-848) needs a KRaft cluster"]),
    ("kip848-on-default-version", None, ["run", "baseline", "--group-protocol", "consumer"],
     ["baseline with --group-protocol consumer:", "needs a KRaft cluster"]),
    ("kafka-python-under-kip848", "workload: {consumers: [{client: kafka-python}]}\n",
     ["run", "x.yaml", "--kafka-version", "4.4.0", "--group-protocol", "consumer"],
     ["x with --kafka-version 4.4.0 --group-protocol consumer:", "kafka-python has no KIP-848"]),
    ("zookeeper-mode-kept-on-4x", "cluster: {mode: zookeeper}\n", ["run", "x.yaml", "--kafka-version", "4.4.0"],
     ["x with --kafka-version 4.4.0: cluster: mode=zookeeper is not possible on Kafka 4.4.0"]),
    ("zookeeper-quorum-named-on-kraft", None, ["run", "zookeeper-quorum-lost", "--kafka-version", "4.4.0"],
     ["zookeeper-quorum-lost with --kafka-version 4.4.0: faults.0: a KRaft cluster has no ZooKeeper"]),
    ("unknown-protocol", None, ["run", "baseline", "--group-protocol", "eager"], ["--group-protocol", "'eager'"]),
    ("whole-catalogue-on-zookeeper-kip848", None, ["run", "--nightly", "--kafka-version", "3.9.1",
                                                   "--group-protocol", "consumer"],
     ["no catalogue experiment can run so:", "needs a KRaft cluster"]),
]


@pytest.mark.parametrize("body, argv, fragments", [c[1:] for c in RUNS], ids=[c[0] for c in RUNS])
def test_a_bad_run_override_is_one_line_exit_2(body, argv, fragments, tmp_path, env):
    if body is not None:
        (tmp_path / "x.yaml").write_text("name: x\n" + body)
    refused(argv, env, tmp_path, *fragments)


def test_the_whole_catalogue_on_kraft_leaves_out_its_zookeeper_experiments(tmp_path, env):
    # the runtime cache is empty: the first run that would start a cluster stops the batch with exit 2
    argv = ["run", "--nightly", "--kafka-version", "4.4.0", "--budget", "30s", "--out", str(tmp_path / "r")]
    line, stderr = refused(argv, env, tmp_path, "Kafka 4.4.0 is not set up")
    assert "zookeeper" not in line.split("could not run")[0]
    flat = " ".join(stderr.split())  # progress lines are wrapped when not on a terminal
    for name in ("zookeeper-node-killed", "zookeeper-quorum-lost", "broker-isolated-from-zookeeper"):
        assert f"left out: {name} with --kafka-version 4.4.0:" in flat, stderr


def test_setup_help_names_the_version_ranges(env, tmp_path):
    for argv in (["setup", "-h"], ["cluster", "up", "-h"], ["run", "-h"]):
        out = subprocess.run(CHAOS + argv, capture_output=True, text=True, env=env, timeout=60).stdout
        flat = " ".join(out.split())
        assert "2.8.x-3.9.x run ZooKeeper, 3.7.x-4.x KRaft" in flat, argv
    out = subprocess.run(CHAOS + ["cluster", "up", "-h"], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "--controller-placement" in out and "--mode" in out and "--controllers" in out


# ------------------------------------------------------------------ the model: modes and nodes

def _exp(body: dict) -> object:
    return parse_experiment({"name": "x", **body}, "x.yaml")


def test_the_mode_follows_the_version():
    assert _exp({"cluster": {"kafka_version": "4.4.0"}}).cluster.metadata_mode is ClusterMode.KRAFT
    assert _exp({"cluster": {"kafka_version": "4.0.0"}}).cluster.kraft
    assert _exp({}).cluster.metadata_mode is ClusterMode.ZOOKEEPER  # 3.9.1, the default
    assert _exp({"cluster": {"kafka_version": "3.9.1"}}).cluster.metadata_mode is ClusterMode.ZOOKEEPER
    allowed = _exp({"cluster": {"kafka_version": "3.9.1", "mode": "kraft"}})
    assert allowed.cluster.kraft and allowed.cluster.mode is ClusterMode.KRAFT
    assert _exp({"cluster": {"kafka_version": "3.7.2", "mode": "zookeeper"}}).cluster.metadata_mode is ClusterMode.ZOOKEEPER


def test_controller_nodes_and_node_names_per_placement():
    zk = ClusterSpec.build(brokers=3, zookeepers=3)
    assert zk.controller_nodes == () and zk.node_names == ("zk-1", "zk-2", "zk-3", "broker-1", "broker-2", "broker-3")
    combined = ClusterSpec.build(kafka_version="4.4.0", brokers=3, controllers=3, zookeepers=3,
                                 controller_placement="combined")
    assert combined.controller_nodes == ("broker-1", "broker-2", "broker-3")
    assert combined.node_names == ("broker-1", "broker-2", "broker-3")  # no zk-*: zookeepers means nothing on KRaft
    isolated = ClusterSpec.build(kafka_version="4.4.0", brokers=2, controllers=3, controller_placement="isolated")
    assert isolated.controller_nodes == ("controller-1", "controller-2", "controller-3")
    assert isolated.node_names == ("controller-1", "controller-2", "controller-3", "broker-1", "broker-2")


def test_kraft_targets_and_nodes_are_accepted_on_kraft():
    exp = _exp({"cluster": {"kafka_version": "4.4.0", "controllers": 3, "controller_placement": "isolated"},
                "faults": [{"type": "kill", "target": "active_controller", "trigger": {"at_s": 1}},
                           {"type": "kill", "target": "controller_quorum", "trigger": {"at_s": 2}},
                           {"type": "pause", "target": "node", "node": "controller-2", "trigger": {"at_s": 3}}]})
    assert [f.target.value for f in exp.faults] == ["active_controller", "controller_quorum", "node"]


def test_a_kip848_member_in_a_file():
    exp = _exp({"cluster": {"kafka_version": "4.4.0"},
                "workload": {"consumers": [{"group_protocol": "consumer", "remote_assignor": "range"},
                                           {"group_protocol": "consumer", "remote_assignor": "range",
                                            "client": "java"}]}})
    first, second = exp.workload.consumers
    assert first.group_protocol is GroupProtocol.CONSUMER and first.remote_assignor is RemoteAssignor.RANGE
    assert second.client.value == "java" and second.remote_assignor is RemoteAssignor.RANGE
    assert first.protocol is RebalanceProtocol.COOPERATIVE  # KIP-848 revokes only what moves
    unset = _exp({"cluster": {"kafka_version": "4.4.0"}, "workload": {"consumers": [{"group_protocol": "consumer"}]}})
    assert unset.workload.consumers[0].remote_assignor is None  # the broker's default (uniform)


# ------------------------------------------------------------------ overrides (chaos run, the plugin)

def test_a_4x_version_moves_an_experiment_to_kraft():
    base = load_experiment("baseline")
    assert apply_overrides(base) is base
    moved = apply_overrides(base, kafka_version="4.4.0")
    assert moved.cluster.kafka_version == "4.4.0" and moved.cluster.kraft
    assert moved.workload == base.workload and moved.faults == base.faults
    assert not apply_overrides(moved, kafka_version="3.9.1").cluster.kraft


def test_group_protocol_override_sets_every_member_and_sets_client_assignors_aside():
    exp = load_experiment("coordinator-kill-stable-cooperative")
    assert {c.assignor for c in exp.workload.consumers} == {Assignor.COOPERATIVE_STICKY}
    moved = apply_overrides(exp, kafka_version="4.4.0", group_protocol="consumer")
    assert all(c.group_protocol is GroupProtocol.CONSUMER for c in moved.workload.consumers)
    assert all(c.assignor is Assignor.RANGE for c in moved.workload.consumers)  # the default: unused under KIP-848
    assert [c.lane for c in moved.workload.consumers] == [c.lane for c in exp.workload.consumers]
    # back to classic: the remote assignor goes, the members are classic again
    kip848 = _exp({"cluster": {"kafka_version": "4.4.0"},
                   "workload": {"consumers": [{"group_protocol": "consumer", "remote_assignor": "uniform"}]}})
    classic = apply_overrides(kip848, group_protocol="classic")
    assert classic.workload.consumers[0].group_protocol is GroupProtocol.CLASSIC
    assert classic.workload.consumers[0].remote_assignor is None
    with pytest.raises(UsageError, match="^x with --chaos-group-protocol consumer: .*needs a KRaft cluster"):
        apply_overrides(_exp({}), group_protocol="consumer", flag="--chaos-")


def test_the_catalogue_runs_on_kraft_except_what_cannot():
    """Every catalogue experiment moves to 4.4.0 (classic) and to KIP-848, but for its ZooKeeper faults, a partition
    from the controller (behind the quorum links on KRaft) and, under KIP-848, an experiment whose fault targets
    CompletingRebalance. (No catalogue member has a session timeout of
    its own any more; :func:`test_kip848_members_share_one_session_timeout` covers the refusal.)"""
    zookeeper_only = {"zookeeper-node-killed", "zookeeper-quorum-lost", "broker-isolated-from-zookeeper"}
    per_member_session: set[str] = set()
    # a broker<->broker partition "from the controller": on KRaft the controllers are behind the quorum links
    controller_peer = {"brokers-partitioned"}
    # KIP-848 has no group leader (the coordinator assigns)
    group_leader = {"subscription-changed"}
    # CompletingRebalance (the SyncGroup phase) has no KIP-848 counterpart
    completing = {"coordinator-kill-completing-eager", "coordinator-kill-completing-cooperative", "nightly-mixed"}
    # rpc faults on one protocol's group APIs (issue 33): nobody speaks them under the other
    kip848_api = {"rpc-kip848-heartbeat-late-then-fenced"}
    classic_api = {"rpc-sync-group-answer-lost", "rpc-heartbeat-rebalance-in-progress", "rpc-join-group-duplicated"}
    entries = catalogue()
    assert len(entries) >= 10
    for protocol, expected in (("classic", zookeeper_only | controller_peer | kip848_api),
                               ("consumer", zookeeper_only | controller_peer | per_member_session | completing
                                | group_leader | classic_api)):
        refused_names = set()
        for _, exp in entries:
            assert not isinstance(exp, UsageError), exp
            try:
                moved = apply_overrides(exp, kafka_version="4.4.0", group_protocol=protocol)
            except UsageError as exc:
                reasons = [(per_member_session, "session_timeout_ms"), (controller_peer, "through its quorum links"),
                           (kip848_api, "(KIP-848): give a consumer"), (classic_api, "(the classic protocol)"),
                           (group_leader, "has no group leader"),
                           (zookeeper_only - {"zookeeper-node-killed"}, "ZooKeeper"),
                           (zookeeper_only, "'zk-1' is not a node")]
                why = next((w for names, w in reasons if exp.name in names),
                           "CompletingRebalance has no KIP-848 counterpart")
                assert why in str(exc), exc
                refused_names.add(exp.name)
                continue
            assert moved.cluster.kraft
            assert {c.group_protocol.value for c in moved.workload.consumers} <= {protocol}
        assert refused_names == expected, protocol


# ------------------------------------------------------------------ the pytest plugin

SETTINGS_TEST = """
def test_settings(chaos_settings, kafka_cluster_spec):
    print("VERSION", chaos_settings["kafka_version"], "PROTOCOL", chaos_settings["group_protocol"],
          "SPEC", kafka_cluster_spec.kafka_version, kafka_cluster_spec.metadata_mode.value)
"""


def test_plugin_options_reach_the_settings_and_the_shared_cluster(pytester: pytest.Pytester):
    pytester.makepyfile(test_s=SETTINGS_TEST)
    res = pytester.runpytest("-p", "no:cacheprovider", "-s", "--chaos-kafka-version", "4.4.0",
                             "--chaos-group-protocol", "consumer")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*VERSION 4.4.0 PROTOCOL consumer SPEC 4.4.0 kraft*"])
    # nothing given: the experiments' own; the shared cluster is 3.9.1 ZooKeeper; the old spelling still works
    res = pytester.runpytest("-p", "no:cacheprovider", "-s")
    res.stdout.fnmatch_lines(["*VERSION None PROTOCOL None SPEC 3.9.1 zookeeper*"])
    res = pytester.runpytest("-p", "no:cacheprovider", "-s", "--kafka-version", "3.8.1")
    res.stdout.fnmatch_lines(["*VERSION 3.8.1 PROTOCOL None SPEC 3.8.1 zookeeper*"])
    pytester.makeini("[pytest]\nchaos_kafka_version = 4.4.0\nchaos_group_protocol = classic\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "-s")
    res.stdout.fnmatch_lines(["*VERSION 4.4.0 PROTOCOL classic SPEC 4.4.0 kraft*"])


@pytest.mark.parametrize("args, message", [
    (["--chaos-group-protocol", "consumer"], "--chaos-group-protocol consumer (KIP-848) needs a KRaft cluster"),
    (["--chaos-kafka-version", "3.9.1", "--chaos-group-protocol", "consumer"], "needs a KRaft cluster"),
    (["--chaos-kafka-version", "5.0.0"], "--chaos-kafka-version: unknown Kafka version '5.0.0'"),
    (["--chaos-group-protocol", "eager"], "invalid choice: 'eager'"),
    (["--chaos-cluster", "cluster-of-nobody"], "--chaos-cluster 'cluster-of-nobody': no running local cluster"),
])
def test_plugin_refuses_bad_options_before_any_test(pytester: pytest.Pytester, args, message):
    pytester.makepyfile(test_s=SETTINGS_TEST)
    res = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert message in res.stderr.str()


def test_plugin_run_experiment_moves_or_skips(pytester: pytest.Pytester, tmp_path, monkeypatch):
    # an empty runtime cache: were an experiment run, it would fail at once rather than start a cluster
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))
    pytester.makepyfile(test_r="""
        from chaos.experiment import load_experiment
        from chaos.pytest_plugin import experiment_on

        def test_zookeeper_experiment(run_experiment):
            run_experiment("zookeeper-quorum-lost")

        def test_moved(chaos_settings):
            exp = experiment_on(load_experiment("coordinator-kill-stable-cooperative"), chaos_settings)
            assert exp.cluster.kraft and exp.cluster.kafka_version == "4.4.0"
            assert {c.group_protocol.value for c in exp.workload.consumers} == {"consumer"}
    """)
    res = pytester.runpytest("-p", "no:cacheprovider", "-rs", "--chaos-kafka-version", "4.4.0",
                             "--chaos-group-protocol", "consumer", f"--chaos-out={tmp_path / 'runs'}")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["*SKIPPED*cannot run here: zookeeper-quorum-lost with --chaos-kafka-version 4.4.0 "
                              "--chaos-group-protocol consumer: faults.0: a KRaft cluster has no ZooKeeper*"])
    assert not Path(tmp_path / "runs" / "zookeeper-quorum-lost").exists()


def test_kip848_members_share_one_session_timeout():
    """Under KIP-848 the session timeout is the group's (``consumer.session.timeout.ms``, a group config): members
    asking for different ones are refused at load time with what to change."""
    with pytest.raises(UsageError, match="use different session_timeout_ms .*give them one value"):
        _exp({"cluster": {"kafka_version": "4.4.0"},
              "workload": {"consumers": [{"group_protocol": "consumer", "session_timeout_ms": 3000},
                                         {"group_protocol": "consumer", "session_timeout_ms": 6000}]}})
