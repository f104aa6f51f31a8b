"""The catalogue on Kafka 4.4.0 (KRaft), with the classic protocol and with KIP-848's consumer protocol.

Each experiment is the catalogue's own file moved to 4.4.0 the way `chaos run --kafka-version 4.4.0
--group-protocol P` moves it (:func:`chaos.experiment.apply_overrides`), run once on a real KRaft cluster and judged.
"""

from pathlib import Path

import pytest

from chaos.checkers.judge import judge_run
from chaos.checkers.result import Validity
from chaos.experiment import apply_overrides, load_experiment
from chaos.model.cluster import KRAFT_KAFKA_VERSION
from chaos.runner import run_once

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _run(pool, name, protocol, seed, tmp_path):
    exp = apply_overrides(load_experiment(EXPERIMENTS / f"{name}.yaml"), kafka_version=KRAFT_KAFKA_VERSION,
                          group_protocol=protocol)
    assert exp.cluster.kraft
    cluster = pool.get(exp.cluster)
    run_dir = run_once(cluster, exp, seed, tmp_path / f"{name}-{protocol}-{seed}")
    verdict = judge_run(run_dir, exp.checkers.names())
    cluster.heal()
    return exp, run_dir, {r.checker.value: r for r in verdict.results}


def test_classic_group_on_kraft_survives_its_coordinator_killed(_chaos_pool, tmp_path):
    _, _, got = _run(_chaos_pool, "coordinator-kill-stable-cooperative", "classic", 31, tmp_path)
    assert all(r.valid is Validity.TRUE for r in got.values()), {k: (r.valid, r.summary) for k, r in got.items()}


def test_kip848_group_without_faults_passes_every_checker(_chaos_pool, tmp_path):
    _, run_dir, got = _run(_chaos_pool, "baseline", "consumer", 32, tmp_path)
    assert all(r.valid is Validity.TRUE for r in got.values()), {k: (r.valid, r.summary) for k, r in got.items()}
    # the members really ran KIP-848: the observer saw consumer-type samples with member epochs
    text = (run_dir / "history.jsonl").read_text()
    assert '"group_type":"consumer"' in text and '"member_epoch"' in text


@pytest.mark.parametrize("name", ["wrong-skip-records", "wrong-commit-before-process", "wrong-ignore-revoke"])
def test_wrong_consumer_is_caught_under_kip848(_chaos_pool, tmp_path, name):
    exp, _, got = _run(_chaos_pool, name, "consumer", 33, tmp_path)
    for checker in exp.expect_violation:
        assert got[checker.value].valid is Validity.FALSE, {k: (r.valid, r.summary) for k, r in got.items()}


@pytest.mark.slow
def test_kip848_group_survives_its_coordinator_killed_while_members_reconcile(_chaos_pool, tmp_path):
    """The kill fires on the new coordinator's "Bumped group epoch" line (a reconciliation starts) and the run
    is judged valid; faults.json says where it landed.

    Opt-in (``--run-slow``) until a finding is explained: in 1 of 3 runs (seed 34) committed-offsets failed — a
    commit of a leaving member answered OK 5 ms before the coordinator's SIGKILL was missing from the next
    coordinator's offsets (README, "Known gaps"). The other checkers agreed in every run.
    """
    import json

    _, run_dir, got = _run(_chaos_pool, "coordinator-kill-preparing-eager", "consumer", 34, tmp_path)
    kill = next(f for f in json.loads((run_dir / "faults.json").read_text()) if f["type"] == "kill")
    assert kill["fired"] and kill["effect_ok"], kill
    assert all(r.valid is Validity.TRUE for r in got.values()), {k: (r.valid, r.summary) for k, r in got.items()}
