"""Members on the client library releases they name (issue 34), on real clusters.

Each client kind runs a release other than its default: confluent-kafka 2.12.0 and 2.14.0 from PyPI, the Java
client (kafka-clients and VerifiableConsumer) 4.1.0 from Maven Central. The run header records what each member's
library reports of itself, every ``member_start`` says the same, and a ``client_upgrade`` fault moves a static
member to another release and back while its instance id stays. The releases are prepared by ``make test``'s
setup (``chaos setup --client``); a run prepares them itself otherwise.
"""

from __future__ import annotations

import json

import pytest

from chaos.history.event import Kind
from chaos.history.reader import read_history
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec
from chaos.model.experiment import Experiment
from chaos.runner import judge_once
from chaos.workload.libraries import reported_by_imports

#: the project's own confluent-kafka: what a member on the default library reports
DEFAULT = reported_by_imports("confluent-kafka")["confluent-kafka"]


def _starts(history, member: str) -> list:
    return [e for e in history.events if e.kind is Kind.MEMBER_START and e.source == member]


def test_each_client_on_another_release_and_a_static_member_upgraded_and_back(kafka_cluster, tmp_path):
    exp = Experiment.model_validate({
        "name": "client-versions",
        "workload": {"partitions": 6, "consumers": [
            {"lane": "lane0", "client_version": "2.12.0", "instance_id": "static-0", "session_timeout_ms": 6000},
            {"lane": "lane1", "client_version": "2.14.0"},
            {"lane": "lane0", "client": "java", "client_version": "4.1.0"}],
            "producers": [{"rate": 100, "lane": "lane0"}]},
        "faults": [{"type": "client_upgrade", "target": "member", "node": "consumer-0", "client_version": None,
                    "trigger": {"at_s": 1}, "duration_s": 6}],
        "phases": {"warmup_s": 0.5, "chaos_s": 9},
    })
    run = tmp_path / "run"
    oc = judge_once(kafka_cluster, exp, 5, run)
    assert oc.valid == "true", (oc.error, oc.explanation)

    header = json.loads((run / "header.json").read_text())
    members = header["member_clients"]
    assert members["consumer-0"] == {"client": "confluent-kafka", "client_version": "2.12.0",
                                     "library": {"confluent-kafka": "2.12.0", "librdkafka": "2.12.0"}}
    assert members["consumer-1"]["library"] == {"confluent-kafka": "2.14.0", "librdkafka": "2.14.0"}
    assert members["consumer-2"] == {"client": "java", "client_version": "4.1.0",
                                     "library": {"kafka-clients": "4.1.0"}}

    h = read_history(run / "history.jsonl")
    assert [e.client_version for e in _starts(h, "consumer-1")] == ["2.14.0 (librdkafka 2.14.0)"]
    assert [e.client_version for e in _starts(h, "consumer-2")] == ["4.1.0"]
    # the upgrade: 2.12.0, then the default, then 2.12.0 again at the heal -- one member, one instance id
    starts = _starts(h, "consumer-0")
    assert [e.client_version.split(" ")[0] for e in starts] == ["2.12.0", DEFAULT, "2.12.0"]
    assert {e.instance_id for e in starts} == {"static-0"}
    stops = [e for e in h.events if e.kind is Kind.MEMBER_STOP and e.source == "consumer-0"]
    assert [s.clean for s in stops[:2]] == [True, True]  # it left cleanly both times
    [fault] = oc.faults
    assert fault["effect_ok"] and fault["healed_ok"], fault
    evidence = {e.stage: e.evidence for e in h.events if e.kind is Kind.FAULT_VERIFIED}
    assert f"started reporting confluent-kafka {DEFAULT}" in evidence["effect"]
    assert "started reporting confluent-kafka 2.12.0" in evidence["healed"]
    assert "coordinator lists consumer-0 (instance static-0)" in evidence["healed"]


KRAFT = ClusterSpec.build(brokers=1, lanes=2, kafka_version=KRAFT_KAFKA_VERSION)


@pytest.fixture
def kraft(_chaos_pool):
    cluster = _chaos_pool.get(KRAFT)
    yield cluster
    cluster.heal()


def test_kip848_members_on_older_releases_and_a_java_member_upgraded(kraft, tmp_path):
    """KIP-848 on the oldest GA releases (librdkafka 2.12.0, kafka-clients 4.1.0 against a 4.4.0 broker); the
    Java member is upgraded to the broker's own release and back."""
    exp = Experiment.model_validate({
        "name": "client-versions-kip848", "cluster": KRAFT.model_dump(),
        "workload": {"partitions": 4, "replication": 1, "consumers": [
            {"lane": "lane0", "client_version": "2.12.0", "group_protocol": "consumer", "session_timeout_ms": 6000},
            {"lane": "lane1", "client": "java", "client_version": "4.1.0", "group_protocol": "consumer",
             "session_timeout_ms": 6000}],
            "producers": [{"rate": 100, "lane": "lane0"}]},
        "faults": [{"type": "client_upgrade", "target": "member", "node": "consumer-1", "client_version": None,
                    "trigger": {"at_s": 1}, "duration_s": 6}],
        "phases": {"warmup_s": 0.5, "chaos_s": 9},
    })
    run = tmp_path / "run"
    oc = judge_once(kraft, exp, 6, run)
    assert oc.valid == "true", (oc.error, oc.explanation)
    h = read_history(run / "history.jsonl")
    assert [e.client_version for e in _starts(h, "consumer-0")] == ["2.12.0 (librdkafka 2.12.0)"]
    assert [e.client_version for e in _starts(h, "consumer-1")] == ["4.1.0", KRAFT_KAFKA_VERSION, "4.1.0"]
    [fault] = oc.faults
    assert fault["effect_ok"] and fault["healed_ok"], fault


@pytest.mark.slow  # make test-all: make test proves each client kind on another release and the upgrade fault above
@pytest.mark.parametrize("name, overrides", [
    ("rolling-client-upgrade", {}),
    ("rolling-client-upgrade-kip848", {}),
    ("mixed-client-versions", {}),
    ("mixed-client-versions", {"kafka_version": KRAFT_KAFKA_VERSION, "group_protocol": "consumer"}),
], ids=["classic", "kip848", "mixed-zookeeper", "mixed-kip848"])
def test_catalogue_client_version_experiments_are_valid(_chaos_pool, tmp_path, name, overrides):
    from chaos.checkers.judge import judge_run
    from chaos.checkers.result import Validity
    from chaos.experiment import apply_overrides
    from chaos.runner import run_once
    from tests.catalogue import experiment

    exp = apply_overrides(experiment(name), **overrides)
    cluster = _chaos_pool.get(exp.cluster)
    run_dir = run_once(cluster, exp, 34, tmp_path / "run")
    verdict = judge_run(run_dir, exp.checkers.names())
    cluster.heal()
    faults = json.loads((run_dir / "faults.json").read_text())
    assert faults and all(f["fired"] and f["effect_ok"] and f["healed_ok"] for f in faults), faults
    assert all(r.valid is Validity.TRUE for r in verdict.results), [(r.checker.value, r.summary) for r in verdict.results]
