"""Replay and shrink on the session's real cluster (issue 16 items 1 and 2).

The recorded red run is the catalogue's ``wrong-ignore-revoke`` (consumer-1 keeps processing records of
partitions it was told to revoke; consumer-2 bounced at 3 s makes the rebalance that shows it) with three
more faults that make no rebalance of their own — latency on two members' links and a pause of
consumer-0 far shorter than its session timeout. The replay of that run fails the same checker again, and
the shrink, every candidate run on the cluster, ends with at most two faults and an experiment file that
loads. One run per candidate: a candidate that fails most of the time and passed once keeps a fault that
is not needed, which still leaves at most two of the four. Every run has the quiesce bound the tests give a
wrong consumer (``tests/catalogue.py``).

The nightly-size case — ``tests/integration/experiments/nightly-mixed-broken.yaml``, six seeded faults
around the same broken member — is opt-in (``--run-slow``): its shrink takes about ten minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.experiment import load_experiment
from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec
from chaos.replay import as_fired, load_recorded, read_verdict
from chaos.runner import judge_once, run_experiments
from chaos.shrink import Shrinker
from tests.catalogue import wrong_consumer

HERE = Path(__file__).resolve().parent

NOISE = [
    FaultSpec.build(type="latency", target="member", node="consumer-0", params={"latency_ms": 200}, duration_s=1.5,
              trigger={"at_s": 0.5}),
    FaultSpec.build(type="pause", target="member", node="consumer-0", duration_s=1, trigger={"at_s": 6.5}),
    FaultSpec.build(type="latency", target="member", node="consumer-2", params={"latency_ms": 200}, duration_s=1.5,
              trigger={"at_s": 7}),
]
#: the catalogue's 12 s chaos phase cut to what the faults span: consumer-2 bounced 3-6 s, the noise over by 8.5 s;
#: consumer-1's queue of revoked records (300 at 15 ms) is processed past the phase's end, in the quiesce
CHAOS_S = 9.0


def _noisy() -> Experiment:
    exp = wrong_consumer("wrong-ignore-revoke")
    faults = sorted([*exp.faults, *NOISE], key=lambda f: f.trigger.at_s or 0.0)
    return exp.model_copy(update={"name": "wrong-ignore-revoke-noisy", "faults": tuple(faults),
                                  "phases": exp.phases.model_copy(update={"chaos_s": CHAOS_S})})


@pytest.fixture(scope="module")
def red_run(_chaos_session_cluster, tmp_path_factory) -> Path:
    cluster = _chaos_session_cluster
    run_dir = tmp_path_factory.mktemp("shrink") / "recorded"
    cluster.heal()
    oc = judge_once(cluster, _noisy(), 5101, run_dir)
    assert oc.valid == "false" and "ownership-time" in oc.failed_checkers, (oc.valid, oc.failed_checkers, oc.error)
    return run_dir


def _on(cluster):
    def run(exp, seed, run_dir):
        cluster.heal()
        return judge_once(cluster, exp, seed, run_dir)
    return run


def test_replay_of_a_red_run_is_its_fired_faults_in_order(red_run):
    """The replay of the red run is every recorded fault as it fired, in order; it is run — and fails the same
    checker again — as the shrink's first step (test below), so make test runs it once."""
    rec = load_recorded(red_run)
    replay, notes = as_fired(rec)
    assert notes == [] and len(replay.faults) == 4                       # all four fired, none dropped
    assert [f.trigger.at_s for f in replay.faults] == sorted(f.trigger.at_s for f in replay.faults)
    assert rec.verdict.valid == "false" and "ownership-time" in rec.verdict.failed


def test_shrink_finds_at_most_two_faults_and_writes_a_loadable_experiment(kafka_cluster, red_run, tmp_path):
    rec = load_recorded(red_run)
    lines: list[str] = []
    # the fault list is shrunk first: the replay, no fault at all (passes: nothing makes the rebalance), then the
    # half with consumer-2's bounce (fails: two faults kept), then that half's halves: runs of 22, 13 and 22 s on a
    # quiet machine. The budget ends the search there: a candidate is not started when the run estimate
    # (chaos.runner.estimate_s: 25 s) no longer fits, so the third run starts while the first two took up to 55 s
    # (1.5 times the quiet figure) and a fourth only when the three took under 55 s. The later steps (chaos
    # phase, durations, members, partitions) are make test-all's nightly-size shrinks.
    s = Shrinker(rec, tmp_path / "shrunk", budget_s=80, tries=1, confirm=1,
                 checkers=frozenset({"ownership-time"}), run=_on(kafka_cluster), say=lines.append)
    best = s.shrink()
    summary = json.loads((tmp_path / "shrunk" / "shrink.json").read_text())
    assert best is not None, lines
    assert len(best.faults) <= 2, lines
    assert summary["stopped_by"] in ("done", "budget") and summary["minimal_faults"] == len(best.faults)
    assert summary["minimal_failed_runs"] >= 1                            # the kept run at least
    minimal = load_experiment(tmp_path / "shrunk" / "minimal.yaml")
    assert minimal.faults == best.faults and minimal.workload == best.workload
    log = [json.loads(line) for line in (tmp_path / "shrunk" / "shrink-log.jsonl").read_text().splitlines()]
    assert log[0]["step"] == "replay" and log[0]["failing"]
    # the replay (the recorded faults as fired, test above) failed the same checker again, as the recorded run
    (replayed,) = log[0]["runs"]
    again = read_verdict(Path(replayed["run_dir"]))
    assert again.valid == rec.verdict.valid == "false" and "ownership-time" in again.failed, again
    assert len(log) == sum(line.startswith("[") for line in lines)          # a progress line per candidate
    assert sum(a["kept"] for a in log) >= 1
    for a in log:                                                          # every verdict is a real run's
        for r in a["runs"]:
            assert (Path(r["run_dir"]) / "checks.json").exists()


@pytest.mark.slow
def test_shrink_of_a_broken_nightly_mixed_run_ends_with_at_most_two_faults(tmp_path):
    """Nightly size: a red run of nightly-mixed-broken (six seeded faults), shrunk on its own cluster."""
    from chaos.runner import ClusterPool

    exp = load_experiment(HERE / "experiments" / "nightly-mixed-broken.yaml")
    (oc,) = run_experiments([exp], tmp_path / "runs", runs=1, seed=4242)
    assert oc.valid == "false" and "ownership-time" in oc.failed_checkers, oc
    with ClusterPool() as pool:
        s = Shrinker(load_recorded(oc.run_dir), tmp_path / "shrunk", budget_s=1500, tries=2, confirm=2,
                     checkers=frozenset({"ownership-time"}), pool=pool)
        best = s.shrink()
    assert best is not None and len(best.faults) <= 2
    assert load_experiment(tmp_path / "shrunk" / "minimal.yaml").faults == best.faults


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wrong-skip-records", "wrong-commit-before-process", "wrong-ignore-revoke"])
def test_shrink_of_each_wrong_consumer_ends_with_at_most_two_faults(kafka_cluster, tmp_path, name):
    """The catalogue's wrong consumers, as recorded: each shrinks to at most two faults (the first two need
    none — committing before processing and skipping records show without any fault)."""
    exp = wrong_consumer(name)
    kafka_cluster.heal()
    oc = judge_once(kafka_cluster, exp, 5200, tmp_path / "recorded")
    wanted = frozenset(c.value for c in exp.expect_violation)
    assert oc.valid == "false" and wanted <= set(oc.failed_checkers), oc
    s = Shrinker(load_recorded(oc.run_dir), tmp_path / "shrunk", budget_s=900, tries=2, confirm=1,
                 checkers=wanted, run=_on(kafka_cluster))
    best = s.shrink()
    assert best is not None and len(best.faults) <= 2
