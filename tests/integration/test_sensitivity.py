"""Checkers on real clusters: each deliberately wrong consumer is caught; the no-fault baseline never is.

A checker is only trusted once it has caught known-bad histories (docs/architecture.md, "Invariants").
"""

import pytest

from chaos.checkers.judge import judge_run
from chaos.checkers.result import Validity
from chaos.runner import run_once
from tests.catalogue import experiment


def _judge(cluster, name, seed, tmp_path):
    exp = experiment(name)
    run_dir = run_once(cluster, exp, seed, tmp_path / f"{name}-{seed}")
    verdict = judge_run(run_dir, exp.checkers.names())
    cluster.heal()
    return exp, {r.checker.value: r.valid for r in verdict.results}


@pytest.mark.parametrize("name", ["wrong-skip-records",
                                  # make test-all only: the black-box example's broken variant commits before
                                  # processing in make test (delivery fires there and on skip-records here)
                                  pytest.param("wrong-commit-before-process", marks=pytest.mark.slow),
                                  # make test-all only: make test records this experiment, with three more faults
                                  # that make no rebalance, as test_shrink's red run, which must fail ownership-time
                                  pytest.param("wrong-ignore-revoke", marks=pytest.mark.slow)])
def test_wrong_consumer_is_caught_by_the_right_checker(kafka_cluster, tmp_path, name):
    exp, got = _judge(kafka_cluster, name, 11, tmp_path)
    for checker in exp.expect_violation:
        assert got[checker.value] is Validity.FALSE, got


@pytest.mark.parametrize("seed", [21, pytest.param(22, marks=pytest.mark.slow)])
def test_no_fault_baseline_passes_every_checker(kafka_cluster, tmp_path, seed):
    _, got = _judge(kafka_cluster, "baseline", seed, tmp_path)
    assert all(v is Validity.TRUE for v in got.values()), got


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 120))
def test_no_fault_baseline_many_times(kafka_cluster, tmp_path, seed):
    _, got = _judge(kafka_cluster, "baseline", seed, tmp_path)
    assert all(v is Validity.TRUE for v in got.values()), got
