"""The fault schedule: a pure function of the experiment and the seed.

Jepsen's split: the schedule decides *what* happens and when; only the
interpreter touches threads and the clock. ``plan(experiment, seed)`` expands
every fault spec into planned occurrences (a random trigger with ``count: 3``
becomes three), resolving seeded random times, so the same seed and spec give
the same timeline — compared in tests without a cluster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from chaos.model.experiment import Experiment
from chaos.model.faults import FaultSpec


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """One fault occurrence. ``at_s`` is set for time triggers, None for state triggers."""

    fault_id: str
    index: int            # position of its spec in experiment.faults
    occurrence: int
    spec: FaultSpec
    at_s: float | None

    def target_rng(self, seed: int) -> random.Random:
        """The seeded choice of a random member/broker for this occurrence."""
        return random.Random(f"{seed}:{self.fault_id}:target")


def plan(experiment: Experiment, seed: int) -> tuple[PlannedFault, ...]:
    out: list[PlannedFault] = []
    chaos_s = experiment.phases.chaos_s
    for i, spec in enumerate(experiment.faults):
        trig = spec.trigger
        if trig.at_s is not None:
            out.append(PlannedFault(f"f{i}", i, 0, spec, trig.at_s))
        elif trig.random is not None:
            rnd = random.Random(f"{seed}:{i}:{spec.type}")
            r = trig.random
            end = r.end_s if r.end_s is not None else max(r.start_s, chaos_s - spec.duration_s)
            times: list[float] = []
            for _ in range(r.count):
                for _attempt in range(100):  # rejection sampling for min_gap_s, bounded
                    t = round(rnd.uniform(r.start_s, end), 3)
                    if all(abs(t - u) >= r.min_gap_s for u in times):
                        break
                times.append(t)
            for k, t in enumerate(sorted(times)):
                out.append(PlannedFault(f"f{i}.{k}", i, k, spec, t))
        else:
            out.append(PlannedFault(f"f{i}", i, 0, spec, None))
    return tuple(sorted(out, key=lambda f: (f.at_s if f.at_s is not None else -1.0, f.fault_id)))


def timeline(planned: tuple[PlannedFault, ...]) -> list[dict]:
    """A comparable, JSON-friendly view of a plan."""
    return [{"fault_id": f.fault_id, "type": f.spec.type, "target": f.spec.target.value,
             "node": f.spec.node, "at_s": f.at_s, "trigger": f.spec.trigger.describe(),
             "duration_s": f.spec.duration_s} for f in planned]
