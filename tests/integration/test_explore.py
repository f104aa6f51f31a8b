"""``chaos explore`` end to end on real clusters (issue 35).

In ``make test``: the catalogue's skip-records consumer as the workload, its expectation dropped — the
explorer is told nothing of what is wrong. Its first generated run is red; the replay is red too; the shrink
finds that no fault is needed, and the finding is filed with the original run, the minimal experiment, the
replay's verdict and an explanation that starts with what happened. The archive's runs are the plan's: the
same seed gives the same experiments. It runs on the session's cluster (``--cluster``).

Nightly size (``--run-slow``, ``make test-all``): two shards of one plan against the plan run on one machine,
each wrong mode and broken example found from its workload alone, shrunk to a minimal experiment that fails in
at least two of three runs, and the CI-sized version of the no-false-alarm benchmark (``bench/explore.py``): the
first runs of the plan on correct consumers, per Kafka release and group protocol, without a false verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chaos.experiment import load_experiment
from chaos.explore.plan import Plan
from tests.catalogue import WRONG_QUIESCE_S

ROOT = Path(__file__).resolve().parents[2]


def chaos(*args, cwd=ROOT, timeout=900):
    # the virtualenv first on PATH, as for a user who activated it: a black-box member's command is `python3`
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


def _workload(tmp_path: Path, name: str, source: Path) -> Path:
    exp = yaml.safe_load(source.read_text())
    exp["name"] = name
    exp.pop("expect_violation", None)  # explore is told nothing of what is wrong
    exp.pop("faults", None)
    exp["phases"]["quiesce_s"] = WRONG_QUIESCE_S
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def test_explore_finds_a_consumer_that_skips_records_and_shrinks_it_to_no_fault(shared_cluster, tmp_path):
    workload = _workload(tmp_path, "skipper", ROOT / "experiments" / "wrong-skip-records.yaml")
    out = tmp_path / "archive"
    with shared_cluster.lent() as attach:
        res = chaos("explore", str(workload), "--budget", "200s", "--seed", "5", "--families", "process",
                    "--runs", "2", "--shrink-share", "0.6", "--out", str(out), *attach)
    assert res.returncode == 1, res.stdout[-1500:] + res.stderr[-3000:]
    summary = json.loads((out / "explore.json").read_text())
    assert summary["runs"] >= 1 and sum(summary["verdicts"].values()) == summary["runs"]
    assert summary["verdicts"]["false"] >= 1 and summary["verdicts"]["error"] == 0
    [sig] = summary["findings"]
    finding = json.loads((out / "findings" / sig / "finding.json").read_text())
    assert finding["finding_class"] == "without_faults" and finding["fault_kinds"] == []
    assert "delivery" in finding["checkers"]
    assert finding["replay"]["valid"] == "false"  # replayed once before it was shrunk
    assert finding["minimal_failed_runs"] >= 1
    minimal = load_experiment(out / "findings" / sig / "minimal.yaml")
    assert minimal.faults == ()  # the consumer fails on its own
    explanation = (out / "findings" / sig / "explanation.md").read_text()
    assert explanation.startswith("The consumer breaks") and "delivery" in explanation
    assert (out / "findings" / sig / "run" / "history.jsonl").is_file()
    assert (out / "findings" / sig / "shrink" / "shrink-log.jsonl").is_file()
    assert sig in res.stdout and "without_faults" in res.stdout
    # the archive holds the plan: run i of seed 5 is the plan's run i, faults and seed alike
    plan = Plan(load_experiment(workload), 5, families=("process",))
    for i in summary["plan_indices"]:
        planned = plan.next()
        assert planned.index == i
        run_dir = out / "skipper-explore" / f"run-{i:03d}-seed-{planned.seed}"
        resolved = json.loads((run_dir / "resolved.json").read_text())
        assert [f["type"] for f in resolved["faults"]] == [f.type for f in planned.experiment.faults]
        assert resolved["phases"]["chaos_s"] == planned.experiment.phases.chaos_s


@pytest.mark.slow
def test_two_shards_run_exactly_the_plan_one_machine_runs(shared_cluster, tmp_path):
    """Shards 1/2 and 2/2 of seed 21's first four runs against the four run unsharded: the same runs (index,
    seed, experiment), each in one shard only; the baseline's members are correct, so every verdict is true; and
    ``chaos report`` over the two shard archives says what it says over the unsharded one."""
    def explore(*extra: str) -> dict:
        out = tmp_path / ("-".join(extra) or "whole").replace("/", "of")
        with shared_cluster.lent() as attach:
            res = chaos("explore", "baseline", "--budget", "20m", "--seed", "21", "--runs", "4", "--out", str(out),
                        *extra, *attach, timeout=1500)
        assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-3000:]
        return {"out": out, **json.loads((out / "explore.json").read_text())}

    whole = explore()
    one, two = explore("--shard", "1/2"), explore("--shard", "2/2")
    assert whole["plan_indices"] == [0, 1, 2, 3]
    assert one["plan_indices"] == [0, 2] and two["plan_indices"] == [1, 3]

    def runs(arch: dict) -> dict[str, dict]:
        return {p.name: json.loads((p / "resolved.json").read_text())["faults"]
                for p in sorted((arch["out"] / "baseline-explore").iterdir())}

    assert runs(whole) == {**runs(one), **runs(two)}
    assert whole["verdicts"]["true"] == 4 and one["verdicts"]["true"] + two["verdicts"]["true"] == 4

    def report(*archives: dict) -> tuple[dict, str]:
        out = tmp_path / f"report-of-{len(archives)}"
        res = chaos("report", *(str(a["out"]) for a in archives), "--out", str(out), timeout=900)
        assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-3000:]
        return json.loads((out / "summary.json").read_text()), (out / "pass_rates.csv").read_text()

    (alone, rates_alone), (merged, rates_merged) = report(whole), report(one, two)
    assert {k: alone[k] for k in ("runs", "passed", "failed")} == {k: merged[k] for k in ("runs", "passed", "failed")}
    assert rates_alone == rates_merged  # the report over both shards is the report over the one machine


#: every wrong mode of the reference consumer and every broken example, by the file that shows it
BROKEN = ["experiments/wrong-skip-records.yaml", "experiments/wrong-commit-before-process.yaml",
          "experiments/wrong-ignore-revoke.yaml", "examples/python-service/broken-commit-before-process.yaml",
          "examples/python-service/broken-keeps-revoked.yaml", "examples/black-box/broken-commit-before-process.yaml"]


@pytest.mark.slow
@pytest.mark.parametrize("source", BROKEN, ids=[Path(b).stem + ("-" + Path(b).parent.name if "examples" in b else "")
                                               for b in BROKEN])
def test_explore_finds_each_broken_consumer_from_its_workload_alone(source, shared_cluster, tmp_path):
    """The workload alone (faults and expect_violation dropped): explore files a finding that fails one of the
    checkers the experiment exists to show, shrunk to a minimal experiment that failed in at least 2 of 3 runs."""
    exp = load_experiment(ROOT / source)  # an app member's cwd resolved: the workload file can live anywhere
    expected = {c.value for c in exp.expect_violation}
    data = exp.model_dump(mode="json")
    data.update(name=exp.name + "-told-nothing", faults=[], expect_violation=[])
    data["phases"]["quiesce_s"] = min(data["phases"]["quiesce_s"], 20)
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump(data))
    out = tmp_path / "archive"
    with shared_cluster.lent() as attach:
        res = chaos("explore", str(workload), "--budget", "25m", "--seed", "35", "--max-findings", "1",
                    "--shrink-share", "0.7", "--out", str(out), *attach, timeout=2400)
    assert res.returncode == 1, res.stdout[-1500:] + res.stderr[-3000:]
    summary = json.loads((out / "explore.json").read_text())
    [finding] = summary["finding_details"]
    assert expected & set(finding["checkers"]), (expected, finding)
    assert finding["minimal_runs"] >= 3 and finding["minimal_failed_runs"] >= 2, finding



#: correct workloads x (Kafka release, group protocol): the benchmark's configurations, CI-sized
CORRECT = [("baseline", None, None), ("baseline", "4.4.0", "classic"), ("baseline", "4.4.0", "consumer"),
           ("examples/python-service/orders-coordinator-kill.yaml", None, None)]


@pytest.mark.slow
@pytest.mark.parametrize("workload,version,protocol", CORRECT,
                         ids=[f"{Path(w).stem}-{v or 'default'}-{p or 'default'}" for w, v, p in CORRECT])
def test_explore_raises_no_false_alarm_on_correct_consumers(workload, version, protocol, tmp_path):
    """The plan's first eight runs on a correct workload: no ``false`` verdict (each would be a false alarm), and
    every ``unknown`` explained. On a cluster of the configuration's own (the session's is 3.9.1 only)."""
    extra = [x for k, v in (("--kafka-version", version), ("--group-protocol", protocol)) if v for x in (k, v)]
    out = tmp_path / "archive"
    res = chaos("explore", workload, "--budget", "30m", "--seed", "35", "--runs", "8", "--out", str(out), *extra,
                timeout=2400)
    summary = json.loads((out / "explore.json").read_text())
    assert summary["runs"] == 8, res.stdout[-1500:] + res.stderr[-3000:]
    assert summary["verdicts"]["false"] == 0 and res.returncode == 0, summary["finding_details"]
    assert all(u["explanation"] for u in summary["unknowns"]), summary["unknowns"]
