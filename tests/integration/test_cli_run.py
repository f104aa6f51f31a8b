"""`chaos run` end to end: exit codes, run directories, nightly archives (real clusters)."""

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


def test_failing_invariant_exits_1_and_the_run_directory_holds_everything(tmp_path):
    exp = yaml.safe_load((ROOT / "experiments" / "wrong-skip-records.yaml").read_text())
    exp["name"] = "skip-records-unexpected"
    exp.pop("expect_violation")
    exp["phases"]["chaos_s"] = 4
    path = tmp_path / "skip-records-unexpected.yaml"
    path.write_text(yaml.safe_dump(exp))
    res = chaos("run", str(path), "--seed", "3", "--out", str(tmp_path / "runs"))
    assert res.returncode == 1, res.stderr[-2000:]
    assert "FAIL" in res.stdout and "delivery" in res.stdout
    run_dir = tmp_path / "runs" / "skip-records-unexpected" / "run-000-seed-3"
    for name in ("history.jsonl", "checks.json", "schedule.json", "faults.json", "resolved.json", "outcome.json"):
        assert (run_dir / name).exists(), name
    assert (run_dir / "logs" / "broker-1.log").exists()
    checks = json.loads((run_dir / "checks.json").read_text())
    assert checks["valid"] == "false"


def test_nightly_archives_runs_by_date_within_its_budget(tmp_path):
    res = chaos("run", "--nightly", "--budget", "45s", "--seed", "9", "--out", str(tmp_path / "results"),
                "experiments/baseline.yaml")
    assert res.returncode == 0, res.stderr[-2000:]
    nights = list((tmp_path / "results").iterdir())
    assert len(nights) == 1
    summary = json.loads(next(nights[0].glob("nightly-*.json")).read_text())
    assert summary["runs"] >= 1 and summary["expected"] == summary["runs"]
    runs = list((nights[0] / "baseline").iterdir())
    assert len(runs) == summary["runs"] and all((r / "checks.json").exists() for r in runs)
