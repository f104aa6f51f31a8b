"""Benchmark: measured trust. Runs the catalogue for a time budget with fresh seeds and counts what a
user could not trust.

Per experiment: runs, unexpected verdicts (a ``false``/``unknown``/``error`` where ``true`` was due — a
false positive or an unusable run — or a wrong consumer that no checker caught), phase hits (state-
triggered faults that landed in the intended group state, from ``faults.json``) — and, after the whole
soak, anything left behind: processes started under this soak's state directory, state directories,
iptables chains, network namespaces of ours.

Targets (issue 10): 0 unexpected verdicts, phase hits ≥ 98 %, 0 orphans.

    .venv/bin/python bench/soak.py --budget 60m [--seed 1] [--out DIR] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def _leftovers(state: Path, before_chains: set[str], me: int) -> dict[str, list[str]]:
    from chaos.cluster import firewall

    procs = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.info["pid"] != me and str(state) in cmd:
            procs.append(f"{p.info['pid']} {cmd[:120]}")
    chains: set[str] = set()
    if firewall.unavailable_reason() is None:
        out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=30).stdout
        chains = {line.split()[1] for line in out.splitlines() if line.startswith("-N KC")}
    try:
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    except FileNotFoundError:
        ns = ""
    return {"processes": procs,
            "state_dirs": sorted(p.name for p in state.iterdir()) if state.exists() else [],
            "iptables_chains": sorted(chains - before_chains),
            "netns": [l.split()[0] for l in ns.splitlines() if l.startswith("kafka-chaos")]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="experiments (default: the whole catalogue)")
    ap.add_argument("--budget", default="60m", help="time budget (e.g. 60m, 2h)")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default random; printed)")
    ap.add_argument("--out", type=Path, default=None, help="where runs go (default: a temp directory)")
    args = ap.parse_args()

    # the soak's own state directory: orphans are whatever still mentions it afterwards
    state = Path(tempfile.mkdtemp(prefix="soak-state-"))
    os.environ["KAFKA_CHAOS_STATE"] = str(state)
    from chaos.cluster import firewall
    from chaos.errors import UsageError
    from chaos.experiment import catalogue
    from chaos.runner import BatchStopped, parse_budget, run_nightly

    before_chains: set[str] = set()
    if firewall.unavailable_reason() is None:
        out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=30).stdout
        before_chains = {line.split()[1] for line in out.splitlines() if line.startswith("-N KC")}
    exps = [e for _, e in catalogue(ROOT / "experiments") if not isinstance(e, UsageError)]
    if args.names:
        exps = [e for e in exps if e.name in args.names]
    out = args.out or Path(tempfile.mkdtemp(prefix="soak-runs-"))
    t0 = time.monotonic()
    stopped = None
    outcomes = []

    def on_run(o) -> None:
        outcomes.append(o)
        mark = "ok" if o.expected else "UNEXPECTED"
        print(f"  [{len(outcomes):3d}] {o.experiment:42s} seed {o.seed:<11d} {o.valid:7s} {o.wall_s:6.1f}s {mark}"
              + (f"  {o.error or ','.join(o.failed_checkers)}" if not o.expected else ""), flush=True)

    try:
        run_nightly(exps, out, parse_budget(args.budget), seed=args.seed, on_run=on_run)
    except BatchStopped as exc:
        stopped = str(exc)
    wall = time.monotonic() - t0
    left = _leftovers(state, before_chains, os.getpid())

    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for o in outcomes:
        row = per[o.experiment]
        row["runs"] += 1
        row["unexpected"] += 0 if o.expected else 1
        for f in o.faults:
            if f.get("intended_state"):
                row["phased"] += 1
                row["landed"] += 1 if f.get("landed") else 0
    print(f"\n{'experiment':42s} {'runs':>4s} {'unexpected':>10s} {'phase hits':>10s}")
    for name in sorted(per):
        r = per[name]
        hits = f"{int(r['landed'])}/{int(r['phased'])}" if r["phased"] else "-"
        print(f"{name:42s} {int(r['runs']):4d} {int(r['unexpected']):10d} {hits:>10s}")
    runs = len(outcomes)
    unexpected = sum(1 for o in outcomes if not o.expected)
    phased = sum(r["phased"] for r in per.values())
    landed = sum(r["landed"] for r in per.values())
    orphans = sum(len(v) for v in left.values())
    # the figures bench/experiments.py reports, with its definitions: wall time against the floor the phases
    # imply, trigger->effect latency of state-triggered faults (from the broker's own log line), time triggers
    by_name = {e.name: e for e in exps}
    ratios = sorted(o.wall_s / floor for o in outcomes if o.valid != "error" and by_name[o.experiment].faults
                    and not by_name[o.experiment].expect_violation
                    and (floor := sum((by_name[o.experiment].phases.warmup_s, by_name[o.experiment].phases.chaos_s,
                                       by_name[o.experiment].phases.heal_s))) > 0)
    lat = sorted(f["trigger_to_effect_ms"] for o in outcomes for f in o.faults
                 if f.get("fired") and f.get("trigger_to_effect_ms") is not None and f.get("trigger_signal"))
    lat_time = sorted(f["trigger_to_effect_ms"] for o in outcomes for f in o.faults
                      if f.get("fired") and f.get("trigger_to_effect_ms") is not None and not f.get("trigger_signal"))

    def pct(xs: list[float], q: float) -> float | None:
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None
    summary = {"runs": runs, "unexpected": unexpected, "phase_hits": landed, "phase_targeted": phased,
               "phase_hit_rate": round(landed / phased, 4) if phased else None,
               "runs_per_hour": round(runs / wall * 3600, 1) if wall else None, "wall_s": round(wall, 1),
               "orphans": left, "stopped": stopped, "runs_dir": str(out),
               "wall_over_floor": {"median": pct(ratios, .5), "max": ratios[-1] if ratios else None, "n": len(ratios)},
               "state_trigger_to_effect_ms": {"p50": pct(lat, .5), "p95": pct(lat, .95),
                                              "max": lat[-1] if lat else None, "n": len(lat)},
               "time_trigger_to_effect_ms": {"p50": pct(lat_time, .5), "p95": pct(lat_time, .95), "n": len(lat_time)},
               "unexpected_runs": [{"experiment": o.experiment, "seed": o.seed, "valid": o.valid,
                                    "failed": o.failed_checkers, "error": o.error, "run_dir": o.run_dir}
                                   for o in outcomes if not o.expected]}
    print(f"\nruns {runs}  unexpected {unexpected}  phase hits {int(landed)}/{int(phased)}"
          f"  runs/hour {summary['runs_per_hour']}  orphans {orphans}  wall {wall / 60:.1f} min")
    if ratios:
        print(f"wall/floor (fault experiments, not the wrong consumers): median {pct(ratios, .5):.2f}, "
              f"max {ratios[-1]:.2f} over {len(ratios)} runs")
    if lat:
        print(f"state trigger -> effect over {len(lat)} faults: p50 {pct(lat, .5):.1f} ms, "
              f"p95 {pct(lat, .95):.1f} ms, max {lat[-1]:.1f} ms")
    if lat_time:
        print(f"time trigger -> effect over {len(lat_time)} faults: p50 {pct(lat_time, .5):.1f} ms, "
              f"p95 {pct(lat_time, .95):.1f} ms")
    if stopped:
        print(f"stopped early: {stopped}")
    (out / "soak-summary.json").write_text(json.dumps(summary, indent=1))
    print(f"summary: {out / 'soak-summary.json'}")
    return 0 if unexpected == 0 and orphans == 0 and not stopped else 1


if __name__ == "__main__":
    sys.exit(main())
