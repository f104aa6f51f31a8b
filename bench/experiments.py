"""Benchmark: what the experiment catalogue costs and how precisely faults land.

For every catalogue experiment (or the ones named), on a warm cluster reused
across runs (the runner's pool):

* wall time of each run, against the *floor* its configured timeouts imply
  (warmup_s + chaos_s + heal_s: time that must pass whatever the tool does)
  — target ratio ≤ 2;
* runs per hour that rate allows in nightly mode (target ≥ 100);
* trigger→effect latency of every fault that fired, p50 / p95 (target p95 ≤
  50 ms) — for state triggers measured from the broker's own log line;
* the fraction of phase-targeted faults (state triggers) that landed in the
  intended group state, judged from the live signals (target ≥ 95 %).

    .venv/bin/python bench/experiments.py [--runs 1] [--landing-runs 3] [--out /tmp/bench-runs] [NAME ...]
    .venv/bin/python bench/experiments.py --kafka-version 4.4.0 --group-protocol consumer   # KRaft x KIP-848

``--kafka-version`` / ``--group-protocol`` move every experiment the way ``chaos run`` does
(:func:`chaos.experiment.apply_overrides`); one that cannot move (a ZooKeeper fault on KRaft,
kafka-python under KIP-848) is listed as skipped with the model's own reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from chaos.errors import UsageError
from chaos.experiment import apply_overrides, catalogue
from chaos.runner import run_experiments

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--runs", type=int, default=1, help="runs of each experiment")
    ap.add_argument("--landing-runs", type=int, default=3, help="extra runs of each phase-targeted experiment")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--kafka-version", default=None, help="move every experiment to this Kafka release")
    ap.add_argument("--group-protocol", choices=["classic", "consumer"], default=None,
                    help="set every member's group protocol")
    args = ap.parse_args()
    exps = [e for _, e in catalogue(ROOT / "experiments") if not isinstance(e, Exception)]
    if args.names:
        exps = [e for e in exps if e.name in args.names]
    moved = []
    for e in exps:
        try:
            moved.append(apply_overrides(e, kafka_version=args.kafka_version, group_protocol=args.group_protocol))
        except UsageError as err:
            print(f"  skipped {e.name}: {err}")
    exps = moved
    # one cluster shape after the other, so the pool reuses clusters
    exps.sort(key=lambda e: (e.cluster.model_dump_json(), e.name))
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-exp-"))
    outcomes = run_experiments(exps, out, runs=args.runs, seed=args.seed,
                               on_run=lambda o: print(f"  {o.experiment:42s} {o.valid:7s} {o.wall_s:6.1f}s", flush=True))
    phased = [e for e in exps if any(f.trigger.state for f in e.faults)]
    if args.landing_runs and phased:
        outcomes += run_experiments(phased, out / "landing", runs=args.landing_runs, seed=args.seed + 500,
                                    on_run=lambda o: print(f"  {o.experiment:42s} {o.valid:7s} {o.wall_s:6.1f}s",
                                                           flush=True))
    by_name = {e.name: e for e in exps}
    rows = []
    for o in outcomes[:len(exps) * args.runs]:
        e = by_name[o.experiment]
        floor = e.phases.warmup_s + e.phases.chaos_s + e.phases.heal_s
        rows.append((o.experiment, o.wall_s, floor, o.wall_s / floor, o.valid))
    print(f"\n{'experiment':42s} {'wall s':>7s} {'floor s':>7s} {'ratio':>6s}  verdict")
    for name, wall, floor, ratio, valid in rows:
        print(f"{name:42s} {wall:7.1f} {floor:7.1f} {ratio:6.2f}  {valid}")
    ratios = [r[3] for r in rows]
    walls = [r[1] for r in rows]
    print(f"verdicts: {', '.join(f'{v} {sum(r[4] == v for r in rows)}' for v in sorted({r[4] for r in rows}))}")
    print(f"ratio wall/floor: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}; "
          f"runs per hour at the mean wall time: {3600 / statistics.mean(walls):.0f}")
    lat = [f["trigger_to_effect_ms"] for o in outcomes for f in o.faults
           if f.get("fired") and f.get("trigger_to_effect_ms") is not None and f.get("trigger_signal")]
    lat_time = [f["trigger_to_effect_ms"] for o in outcomes for f in o.faults
                if f.get("fired") and f.get("trigger_to_effect_ms") is not None and not f.get("trigger_signal")]
    if lat:
        print(f"state-trigger -> effect latency over {len(lat)} faults: p50 {pct(lat, .5):.1f} ms, "
              f"p95 {pct(lat, .95):.1f} ms, max {max(lat):.1f} ms")
    if lat_time:
        print(f"time-trigger -> effect latency over {len(lat_time)} faults: p50 {pct(lat_time, .5):.1f} ms, "
              f"p95 {pct(lat_time, .95):.1f} ms (includes process faults that wait for exit, e.g. SIGTERM)")
    landings = [f["landed"] for o in outcomes for f in o.faults if f.get("intended_state") and f.get("fired")]
    skipped = [f for o in outcomes for f in o.faults if f.get("intended_state") and not f.get("fired")]
    if landings:
        print(f"phase-targeted faults landed in the intended state: {sum(landings)}/{len(landings)} "
              f"({100 * sum(landings) / len(landings):.0f}%); never triggered: {len(skipped)}")
    (out / "bench.json").write_text(json.dumps({"rows": rows, "latency_state_ms": lat, "latency_time_ms": lat_time,
                                                "landed": landings}, indent=1))
    print(f"run directories: {out}")


if __name__ == "__main__":
    main()
