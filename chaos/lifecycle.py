"""One run, written once: warm-up → chaos → heal → quiesce → final read → judge.

Jepsen's ``core/run!``: every way of running an experiment — ``chaos run``
(batch and nightly), the pytest plugin's ``run_experiment``, the pytest
harness (``consumer_group`` / ``chaos.kill(...)``) and the Python API below —
goes through :class:`Run`, so a phase added or fixed here is added or fixed
for all of them::

    from chaos import Run, load_experiment
    from chaos.cluster.local import LocalCluster

    exp = load_experiment("coordinator-kill-completing-eager")
    with LocalCluster(exp.cluster) as cluster:
        with Run(cluster, exp, Path("runs/example"), seed=7) as run:
            verdict = run.execute()          # every phase, then the checkers

or phase by phase, with faults fired by code during the chaos phase::

    with Run(cluster, exp, Path("runs/example"), seed=7) as run:
        run.warm_up()
        run.begin_chaos()                    # the experiment's own faults follow their plan
        with run.nemesis.fire(FaultSpec.build(type="kill", target="coordinator"), when="CompletingRebalance"):
            time.sleep(3)                    # healed (restarted) on exit
        verdict = run.finish()               # end chaos, heal, quiesce, final read, merge, judge

The phases and their bounds are the experiment's ``phases``: warm-up ends when
every member is assigned (at most ``warmup_timeout_s``) plus ``warmup_s``;
chaos lasts ``chaos_s`` (or as long as the code driving it); the heal undoes
every fault and the cluster's own state, then leaves ``heal_s`` for recovery;
quiesce stops producers and waits at most ``quiesce_s`` for the group to
commit every record; a fresh reader then reads everything back; the merged
``history.jsonl`` is judged and ``checks.json`` written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.judge import judge_run
from chaos.checkers.result import Verdict
from chaos.errors import UsageError
from chaos.history.event import RunPhase
from chaos.model.experiment import Experiment
from chaos.nemesis.interpreter import Nemesis
from chaos.nemesis.schedule import PlannedFault, plan, timeline
from chaos.workload.run import WorkloadRun


def missing_capabilities(cluster: Any, exp: Experiment) -> str | None:
    """Why ``cluster`` cannot run ``exp``'s faults (one line), or None when it can."""
    for fault, cap in exp.required_capabilities().items():
        if cap not in cluster.capabilities:
            return (f"{exp.name}: fault {fault} needs {cap.value}, which this {cluster.backend_name} "
                    f"cluster lacks ({_why_not(cluster, cap)})")
    return None


def _why_not(cluster: Any, cap: Any) -> str:
    """The backend's own reason (which part is missing, or why it cannot work here)."""
    return cluster.unavailable_reason(cap) or "unavailable"


class Run:
    """One recorded run of ``experiment`` on a started ``cluster``; use as a context manager.

    Leaving the context without :meth:`finish` (an exception, a test that failed) aborts: the nemesis
    stops and heals what it injected, the workers stop, the history is merged, nothing is judged.
    """

    def __init__(self, cluster: Any, experiment: Experiment, run_dir: Path, seed: int, *,
                 handler: str | None = None, source: dict[str, Any] | None = None,
                 planned: tuple[PlannedFault, ...] | None = None, checkers: list[Any] | None = None,
                 bounds: CheckerBounds | None = None):
        self.cluster = cluster
        self.experiment = experiment
        self.run_dir = Path(run_dir)
        self.seed = seed
        self.handler = handler
        self.planned = plan(experiment, seed) if planned is None else planned
        self._source = source
        #: override the experiment's ``checkers`` section (the pytest harness's own choice)
        self.checkers, self.bounds = checkers, bounds
        self.workload: WorkloadRun | None = None
        self.nemesis: Nemesis | None = None
        self.verdict: Verdict | None = None
        self._healed = False

    # ------------------------------------------------------------ context
    def __enter__(self) -> Run:
        return self.start()

    def __exit__(self, exc_type, *exc) -> None:
        if self.verdict is None:
            self.abort()

    def start(self) -> Run:
        """Refuse a cluster that lacks a capability the faults need; record the schedule; start the workload."""
        why = missing_capabilities(self.cluster, self.experiment)
        if why:
            raise UsageError(why)
        from chaos.workload.libraries import ensure_for, releases_of

        ensure_for(releases_of(self.experiment), progress=lambda _: None)  # no-op when cached (chaos run did it)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "schedule.json").write_text(json.dumps(timeline(self.planned), indent=1))
        resolved = self._source or json.loads(self.experiment.model_dump_json())
        self.workload = WorkloadRun(self.cluster, self.experiment.workload, self.run_dir, seed=self.seed,
                                    experiment=resolved, handler=self.handler)
        try:
            self.workload.start()
        except BaseException:
            self.workload.close()
            raise
        return self

    def _wl(self) -> WorkloadRun:
        if self.workload is None:
            raise UsageError("the run has not started: use `with Run(...) as run:` or call run.start()")
        return self.workload

    # ------------------------------------------------------------ phases
    def warm_up(self) -> None:
        """Every member assigned (bounded by ``phases.warmup_timeout_s``), then ``phases.warmup_s``."""
        wl, ph = self._wl(), self.experiment.phases
        wl.phase(RunPhase.WARMUP)
        wl.wait_assigned(ph.warmup_timeout_s)
        time.sleep(ph.warmup_s)

    def begin_chaos(self) -> Nemesis:
        """Enter the chaos phase: the nemesis follows the live stream and the experiment's planned faults."""
        wl = self._wl()
        wl.phase(RunPhase.CHAOS)
        self.nemesis = Nemesis(self.cluster, wl, self.experiment, self.seed, self.planned).start()
        return self.nemesis

    def end_chaos(self) -> None:
        """End the chaos phase: pending triggers dropped, active faults healed (idempotent)."""
        if self.nemesis is not None:
            self.nemesis.stop()
            self.nemesis = None

    def heal(self) -> None:
        """Undo everything the cluster still suffers, leave ``phases.heal_s`` for recovery, and wait until
        the observer has sampled the group after the heal (convergence is judged on those samples)."""
        wl = self._wl()
        self.end_chaos()
        wl.phase(RunPhase.HEAL)
        self._healed = True  # tried: an abort after a failed heal does not wait for it again
        self.cluster.heal()
        healed_ns = time.monotonic_ns()
        time.sleep(self.experiment.phases.heal_s)
        wl.wait_observed(healed_ns)

    def quiesce(self) -> bool:
        """Stop producers; wait at most ``phases.quiesce_s`` for the group to commit every record."""
        return self._wl().quiesce(self.experiment.phases.quiesce_s)

    def final_read(self) -> int:
        return self._wl().final_read()

    def close(self) -> Path | None:
        """Stop every worker and the observer, merge ``history.jsonl`` (idempotent)."""
        return self._wl().close()

    def judge(self) -> Verdict:
        """Run the experiment's checkers on the merged history and write ``checks.json``."""
        cfg = self.experiment.checkers
        self.close()
        bounds = self.bounds or CheckerBounds(convergence_s=cfg.convergence_s, clock_slack_s=cfg.clock_slack_s)
        self.verdict = judge_run(self.run_dir, self.checkers if self.checkers is not None else cfg.names(), bounds)
        return self.verdict

    # ------------------------------------------------------------ the whole run
    def finish(self) -> Verdict:
        """End chaos, heal, quiesce, final read, merge and judge (idempotent)."""
        if self.verdict is not None:
            return self.verdict
        try:
            self.heal()
            self.quiesce()
            self.final_read()
        finally:
            self.close()
        return self.judge()

    def record(self) -> Path | None:
        """Every phase of the experiment as written — warm-up, ``chaos_s`` of planned faults, heal,
        quiesce, final read — and the merged history (not judged)."""
        self.warm_up()
        self._chaos_phase(self.begin_chaos())
        try:
            self.heal()
            self.quiesce()
            self.final_read()
        finally:
            merged = self.close()
        return merged

    def _chaos_phase(self, nemesis: Nemesis) -> None:
        """Wait out the chaos phase: ``chaos_s``, or with ``settle_s`` until that long after every planned fault
        is over (at most ``chaos_s``)."""
        phases = self.experiment.phases
        deadline = time.monotonic() + phases.chaos_s
        if phases.settle_s is None:
            nemesis.cancel.wait(phases.chaos_s)
            return
        while not nemesis.settled():
            if nemesis.cancel.wait(min(0.2, max(0.0, deadline - time.monotonic()))) or time.monotonic() >= deadline:
                return
        nemesis.cancel.wait(max(0.0, min(phases.settle_s, deadline - time.monotonic())))

    def execute(self) -> Verdict:
        """:meth:`record`, then :meth:`judge`."""
        self.record()
        return self.judge()

    def abort(self) -> None:
        """Stop without judging: faults healed, workers stopped, history merged, the cluster healed."""
        try:
            self.end_chaos()
        finally:
            if self.workload is not None:
                try:
                    self.workload.close()
                finally:
                    if not self._healed:
                        self.cluster.heal()
