"""Parity: headline catalogue experiments run unchanged on the docker backend and get their expected verdicts.

The runner, workload, nemesis and checkers are the local backend's; only the
cluster is containers. An experiment file's expected verdict is the one the
local backend produces on it (tests/integration), so "expected" here means
"same verdict as on the local backend".
"""

from pathlib import Path

import pytest

from chaos.cluster.container_cluster import DockerCluster
from chaos.experiment import load_experiment
from chaos.runner import judge_once

ROOT = Path(__file__).resolve().parents[2]
HEADLINE = ("coordinator-kill-completing-eager", "consumer-paused-past-session-timeout", "consumer-black-holed")


@pytest.fixture(scope="module")
def cluster(docker_host):
    spec = load_experiment(ROOT / "experiments" / f"{HEADLINE[0]}.yaml").cluster
    assert all(load_experiment(ROOT / "experiments" / f"{n}.yaml").cluster == spec for n in HEADLINE)
    with DockerCluster(spec, docker_host=docker_host) as c:
        yield c


@pytest.mark.parametrize("name", HEADLINE)
def test_headline_experiment_gets_its_expected_verdict_on_docker(cluster, name, tmp_path):
    exp = load_experiment(ROOT / "experiments" / f"{name}.yaml")
    cluster.heal()
    oc = judge_once(cluster, exp, seed=7, run_dir=tmp_path / name)
    assert oc.error is None, oc.error
    assert oc.expected, f"{name} on docker: valid={oc.valid} failed={oc.failed_checkers}\n{oc.explanation}"
    assert any(f.get("verified") or f.get("effect") for f in oc.faults) or oc.faults, oc.faults
