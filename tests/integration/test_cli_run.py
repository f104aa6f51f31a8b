"""`chaos run` end to end: exit codes, run directories, replay, shrink, nightly archives (real clusters).

Every command runs on the session's cluster (``--cluster``, tests/integration/conftest.py): a command that
starts a cluster of its own is proven by test_installed_package.py and test_driver_killed.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def chaos(*args, cwd=ROOT, timeout=600):
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=dict(os.environ))


def test_failing_invariant_exits_1_and_the_run_directory_holds_everything(shared_cluster, tmp_path):
    exp = yaml.safe_load((ROOT / "experiments" / "wrong-skip-records.yaml").read_text())
    exp["name"] = "skip-records-unexpected"
    exp.pop("expect_violation")
    exp["phases"]["chaos_s"] = 4
    path = tmp_path / "skip-records-unexpected.yaml"
    path.write_text(yaml.safe_dump(exp))
    with shared_cluster.lent() as attach:
        res = chaos("run", str(path), "--seed", "3", "--out", str(tmp_path / "runs"), *attach)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "FAIL" in res.stdout and "delivery" in res.stdout
    run_dir = tmp_path / "runs" / "skip-records-unexpected" / "run-000-seed-3"
    for name in ("history.jsonl", "checks.json", "schedule.json", "faults.json", "resolved.json", "outcome.json"):
        assert (run_dir / name).exists(), name
    assert (run_dir / "logs" / "broker-1.log").exists()
    checks = json.loads((run_dir / "checks.json").read_text())
    assert checks["valid"] == "false"

    # the same experiment and seed into the same --out again: a run of its own beside the first, which is kept
    # as it was (a run that wrote into it would append to its event files and mix two runs in one history)
    first = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    with shared_cluster.lent() as attach:
        res = chaos("run", str(path), "--seed", "3", "--out", str(tmp_path / "runs"), *attach)
    assert res.returncode == 1, res.stderr[-2000:]
    again = tmp_path / "runs" / "skip-records-unexpected" / "run-001-seed-3"
    assert str(again) in res.stdout, res.stdout
    assert {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == first
    groups = {json.loads(line).get("group") for line in (again / "history.jsonl").read_text().splitlines()[1:]}
    assert len(groups - {None}) == 1, groups

    # the red run replayed: the same checker fails again (skipping records needs no fault, so it must)
    with shared_cluster.lent() as attach:
        res = chaos("replay", str(run_dir), "--out", str(tmp_path / "replay"), *attach)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("reproduced") and "delivery" in res.stdout, res.stdout
    (again,) = (tmp_path / "replay" / "skip-records-unexpected").iterdir()
    assert json.loads((again / "replay.json").read_text())["reproduced"] is True
    assert json.loads((again / "checks.json").read_text())["valid"] == "false"

    # and shrunk, within a budget that holds the replay (a run of it is estimated at 17.5 s, and takes about 10)
    # and at most a shorter candidate or two (the search's own steps are test_shrink's): whatever it reached is a
    # loadable experiment that failed
    with shared_cluster.lent() as attach:
        res = chaos("shrink", str(run_dir), "--budget", "20s", "--confirm", "0", "--out", str(tmp_path / "shrunk"),
                    *attach)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("minimal: 0 of 0 faults"), res.stdout
    minimal = yaml.safe_load((tmp_path / "shrunk" / "minimal.yaml").read_text())
    assert minimal["name"] == "skip-records-unexpected-minimal"
    summary = json.loads((tmp_path / "shrunk" / "shrink.json").read_text())
    assert summary["minimal_failed_runs"] >= 1 and summary["stopped_by"] in ("done", "budget")
    steps = [json.loads(line)["step"] for line in (tmp_path / "shrunk" / "shrink-log.jsonl").read_text().splitlines()]
    assert steps[0] == "replay", steps


def test_nightly_archives_runs_by_date_within_its_budget(shared_cluster, tmp_path):
    # a budget that holds one baseline run (estimated at 23.5 s)
    with shared_cluster.lent() as attach:
        res = chaos("run", "--nightly", "--budget", "30s", "--seed", "9", "--out", str(tmp_path / "results"),
                    "experiments/baseline.yaml", *attach)
    assert res.returncode == 0, res.stderr[-2000:]
    nights = list((tmp_path / "results").iterdir())
    assert len(nights) == 1
    summary = json.loads(next(nights[0].glob("nightly-*.json")).read_text())
    assert summary["runs"] >= 1 and summary["expected"] == summary["runs"]
    runs = list((nights[0] / "baseline").iterdir())
    assert len(runs) == summary["runs"] and all((r / "checks.json").exists() for r in runs)


def test_nightly_interleaves_exploration_with_the_catalogue(shared_cluster, tmp_path):
    # seed 19: the exploration plan starts with one short fault (a reset of the group leader's links, about
    # 28 s estimated), so a minute holds one baseline run and one explored run, half the budget each
    with shared_cluster.lent() as attach:
        res = chaos("run", "--nightly", "experiments/baseline.yaml", "--explore", "baseline", "--explore-share",
                    "0.5", "--budget", "60s", "--seed", "19", "--out", str(tmp_path / "results"), *attach)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    (night,) = (tmp_path / "results").iterdir()
    summary = json.loads(next(night.glob("nightly-*.json")).read_text())
    assert summary["runs"] >= 1 and summary["expected"] == summary["runs"]
    explored = summary["explore"]
    assert explored["runs"] >= 1 and explored["verdicts"]["true"] == explored["runs"], explored
    archive = night / explored["archive"]
    detail = json.loads((archive / "explore.json").read_text())
    assert detail["seed"] == summary["base_seed"] == 19 and detail["runs"] == explored["runs"]
    assert detail["plan_indices"][0] == 0 and detail["spent_s"] > 0
    explore_runs = sorted((archive / "baseline-explore").iterdir())
    assert len(explore_runs) == explored["runs"] and all((r / "checks.json").exists() for r in explore_runs)
    # one line per run on stdout, the catalogue's and the explorer's
    assert "baseline run 0 seed" in res.stdout and "baseline-explore run 0 seed" in res.stdout, res.stdout
