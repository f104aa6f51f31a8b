"""Benchmark: what ``chaos explore`` finds, how fast, and how often it is wrong (issue 35).

For each workload, ``chaos explore`` for ``--budget`` on a cluster of its own, then from its archive:

* runs per hour, against the nightly's rate over the same catalogue-sized time (``chaos run --nightly`` of
  ``--nightly`` experiments for ``--nightly-budget``, measured in the same invocation): the ratio is the figure;
* verdicts: on a correct workload every ``false`` is a false alarm (target 0), unknowns at most 5 %, each with
  its explanation grouped by its first line;
* on a broken workload (explored until its first finding, ``--max-findings 1``), the time to that finding and
  what it is (class, checkers, minimal failure rate: at least 2 of 3).

    .venv/bin/python bench/explore.py --budget 60m baseline
    .venv/bin/python bench/explore.py --budget 60m --kafka-version 4.4.0 --group-protocol consumer baseline
    .venv/bin/python bench/explore.py --budget 15m --broken wrong-skip-records \
        examples/python-service/broken-keeps-revoked.yaml

Each exploration runs ``python -m chaos.cli explore`` (what a user runs); a broken workload is explored with its
``expect_violation`` dropped — the explorer is told nothing of what is wrong.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _told_nothing(source: str, tmp: Path) -> str:
    """``source`` (a catalogue name or a file) without its expect_violation and faults, written under ``tmp``
    (loaded first: an app member's directory is resolved, so the file can live anywhere)."""
    from chaos.experiment import load_experiment

    exp = load_experiment(source)
    data = exp.model_dump(mode="json")
    data.update(faults=[], expect_violation=[])
    out = tmp / f"{exp.name}.yaml"
    out.write_text(yaml.safe_dump(data))
    return str(out)


def explore(workload: str, budget: str, out: Path, extra: list[str]) -> dict:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "chaos.cli", "explore", workload, "--budget", budget, "--seed", "35",
                          "--out", str(out), *extra], capture_output=True, text=True, cwd=ROOT)
    summary = json.loads((out / "explore.json").read_text()) if (out / "explore.json").is_file() else {}
    summary["exit"] = res.returncode
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    if res.returncode not in (0, 1):
        summary["stderr"] = res.stderr[-1500:]
    return summary


def nightly_rate(names: list[str], budget: str, out: Path, extra: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--nightly", *names, "--budget", budget, "--seed", "35",
                    "--out", str(out), *extra], capture_output=True, text=True, cwd=ROOT)
    runs = len(list(out.glob("*/*/run-*")))
    return runs / max(time.monotonic() - t0, 1.0) * 3600


def report(name: str, s: dict, broken: bool) -> dict:
    v = s.get("verdicts", {})
    runs = s.get("runs", 0)
    reasons = collections.Counter((u.get("explanation") or "none").splitlines()[0][:140] for u in s.get("unknowns", []))
    row = {"workload": name, "runs": runs, "runs_per_hour": s.get("runs_per_hour"), "verdicts": v,
           "unknown_pct": round(100 * v.get("unknown", 0) / runs, 1) if runs else None,
           "unknown_reasons": dict(reasons.most_common()), "findings": s.get("finding_details", []),
           "coverage_tried": (s.get("coverage") or {}).get("tried"), "exit": s.get("exit"), "wall_s": s.get("wall_s")}
    if broken:
        details = s.get("finding_details", [])
        row["first_red_run_s"] = min((f.get("red_after_s") or f["found_after_s"] for f in details), default=None)
        row["first_finding_s"] = min((f["found_after_s"] for f in details), default=None)
    else:
        row["false_alarms"] = v.get("false", 0)
    if "stderr" in s:
        row["stderr"] = s["stderr"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=["baseline"], help="correct workloads (false verdicts = alarms)")
    ap.add_argument("--broken", nargs="*", default=[], help="broken workloads (time to first finding)")
    ap.add_argument("--budget", default="60m", help="budget of each correct workload's exploration")
    ap.add_argument("--broken-budget", default="15m", help="at most this long to a broken workload's first finding")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--group-protocol", default=None)
    ap.add_argument("--nightly", nargs="*", default=["baseline", "coordinator-kill-stable-eager",
                                                     "consumer-paused-past-session-timeout"],
                    help="experiments whose nightly rate explore's is compared with")
    ap.add_argument("--nightly-budget", default="10m")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    extra = [x for k, v in (("--kafka-version", args.kafka_version), ("--group-protocol", args.group_protocol))
             if v for x in (k, v)]
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-explore-"))
    rows = []
    out.mkdir(parents=True, exist_ok=True)
    for w in args.workloads:
        rows.append(report(w, explore(w, args.budget, out / f"correct-{Path(w).stem}", extra), broken=False))
        print(json.dumps(rows[-1]), flush=True)
    for w in args.broken:
        path = _told_nothing(w, out)
        rows.append(report(w, explore(path, args.broken_budget, out / f"broken-{Path(w).stem}",
                                      [*extra, "--max-findings", "1", "--shrink-share", "0.7"]), broken=True))
        print(json.dumps(rows[-1]), flush=True)
    rate = nightly_rate(args.nightly, args.nightly_budget, out / "nightly", extra) if args.nightly else None
    result = {"budget": args.budget, "kafka_version": args.kafka_version, "group_protocol": args.group_protocol,
              "nightly_runs_per_hour": round(rate, 1) if rate else None, "explorations": rows}
    for r in rows:
        if rate and r.get("runs_per_hour"):
            r["ratio_to_nightly"] = round(r["runs_per_hour"] / rate, 2)
    print(json.dumps(result, indent=1))
    (out / "bench-explore.json").write_text(json.dumps(result, indent=1))
    print(f"archives and bench-explore.json in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
