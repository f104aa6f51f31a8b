"""Running the plan: each generated run judged, each new red run replayed and shrunk, findings filed.

One invocation writes one *archive* (``--out``; ``chaos report`` reads several and merges them):

- ``<workload>-explore/run-<i>-seed-<s>/`` — each run of the plan this shard ran, ``i`` its index in the
  plan (the same in every shard, so shard archives never share a run directory name);
- ``findings/<signature>/`` — one per distinct finding: ``finding.json``, ``explanation.md`` (one paragraph,
  what happened to the run first), ``minimal.yaml`` (when shrunk), ``run/`` (the original run, hard-linked),
  ``shrink/`` (the replay and the shrink's runs, ``chaos shrink``'s files). ``chaos report`` does not count
  the runs below ``findings/``: they are copies, replays and shrink candidates of runs counted already;
- ``explore.json`` — the summary, rewritten after every run (so Ctrl-C, SIGTERM or a crash keep it): runs,
  runs per hour, verdicts, every unknown with its explanation, the coverage map, the findings.

**A red run** (a checker answered false) is first matched against the findings so far: it is a new *hit* of
a finding when it failed one of that finding's checkers and its faults include every kind of the finding's
minimal experiment (a consumer that fails without any fault hits its finding in every red run). Otherwise it
is replayed once (its faults as they fired, :func:`chaos.replay.as_fired`) and, when the replay fails too,
shrunk (:class:`chaos.shrink.Shrinker`, one try per candidate and two confirming runs: the minimal
experiment's failure rate is measured over at least three runs). The budget is shared: replays and shrinks
together use at most ``shrink_share`` of it, the search the rest and whatever they leave.

A finding's *signature* — the checkers that failed in its minimal experiment (or its replay, or its run),
the fault kinds of that experiment, and its class (:class:`FindingClass`) — names its directory, so the same
finding in two shards has the same name and ``chaos report`` counts it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from chaos.errors import UsageError
from chaos.explore.plan import Cell, Plan, PlannedRun, coverage
from chaos.model.experiment import Experiment
from chaos.model.shard import WHOLE, Shard
from chaos.replay import experiment_yaml, load_recorded, refuse_out_in_run
from chaos.runner import BatchStopped, ClusterPool, RunOutcome, estimate_s, pooled_run

SUMMARY_FILE = "explore.json"
FINDINGS_DIR = "findings"
#: runs of a shrink candidate and of its minimal experiment at the end (module docstring)
SHRINK_TRIES, SHRINK_CONFIRM = 1, 2


class FindingClass(StrEnum):
    """What is known of a finding."""

    WITHOUT_FAULTS = "without_faults"    # the minimal experiment has no fault: the consumer fails on its own
    UNDER_FAULTS = "under_faults"        # the minimal experiment needs its faults
    NOT_REPRODUCED = "not_reproduced"    # the replay passed: the failure depends on timing the replay does not fix
    NOT_SHRUNK = "not_shrunk"            # the replay failed, the budget held no shrink


@dataclass
class Finding:
    """One distinct finding (``finding.json``)."""

    signature: str
    checkers: list[str]
    fault_kinds: list[str]
    finding_class: str
    workload: str
    first_run: str
    seed: int
    shard: str | None
    replay: dict[str, Any] | None
    minimal: str | None
    minimal_failed_runs: int
    minimal_runs: int
    #: seconds from the start of the exploration to the filing (after the replay and the shrink)
    found_after_s: float
    hits: int = 1
    #: seconds from the start of the exploration to the end of the red run (before its replay and shrink)
    red_after_s: float | None = None
    explanation: str = ""
    #: the runs that hit it after the first (archive-relative)
    also: list[str] = field(default_factory=list)

    def explains(self, oc: RunOutcome, kinds: set[str]) -> bool:
        """``oc`` (a red run with fault kinds ``kinds``) is another hit of this finding (module docstring)."""
        return bool(set(self.checkers) & set(oc.failed_checkers)) and set(self.fault_kinds) <= kinds


def signature(checkers: list[str], kinds: list[str], finding_class: str) -> str:
    """8 hex digits naming a finding: equal for equal (checkers, fault kinds, class), in every shard."""
    text = json.dumps([sorted(checkers), sorted(kinds), finding_class])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _link_copy(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst`` with hard links (a run directory is written once: sharing its files is safe)."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:  # another filesystem
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link)


@dataclass
class Explorer:
    """One ``chaos explore`` invocation over ``workload`` (the module docstring)."""

    workload: Experiment
    out: Path
    budget_s: float
    seed: int
    shard: Shard = WHOLE
    families: tuple[str, ...] | None = None
    shrink_share: float = 0.4
    #: explore the plan's first ``max_runs`` indices only (this shard: its share of them); None: until the budget
    max_runs: int | None = None
    #: stop once this many distinct findings are filed (None: search the whole budget)
    max_findings: int | None = None
    backend: str | None = None
    attach: Path | None = None
    say: Callable[[str], None] = lambda line: None
    #: the clusters to run on (the pytest plugin's session pool, left open); None: a pool of its own
    pool: ClusterPool | None = None
    #: called before and after each run of the plan (the nightly's progress and its one line per run)
    on_start: Callable[[Experiment, int, int], None] | None = None
    on_run: Callable[[RunOutcome], None] | None = None

    def __post_init__(self) -> None:
        if (self.out / SUMMARY_FILE).exists():
            raise UsageError(f"--out {self.out}: holds an exploration already ({SUMMARY_FILE}); give a new directory "
                             "(each shard writes its own archive)")
        refuse_out_in_run(self.out)
        if not 0 <= self.shrink_share < 1:
            raise UsageError(f"--shrink-share {self.shrink_share}: a fraction of the budget from 0 to below 1")
        self.outcomes: list[RunOutcome] = []
        self.findings: list[Finding] = []
        self.ran_cells: list[Cell] = []
        self.fired_cells: list[Cell] = []
        self.unknowns: list[dict[str, Any]] = []
        self.investigated_s = 0.0
        self.stopped_by = "budget"
        self.error: str | None = None
        self.plan: Plan | None = None
        self.capabilities: list[str] = []
        #: seconds spent in the explorer's runs, replays and shrinks (interleaved in a nightly, less than elapsed)
        self.spent_s = 0.0
        self.done = False
        self.started = self.deadline = time.monotonic()  # begin() sets both

    # ------------------------------------------------------------ the loop
    def run(self) -> list[Finding]:
        """Explore until the budget is spent; the findings. Everything found is kept on Ctrl-C and SIGTERM
        (:func:`chaos.process.terminate_on_sigterm` is the caller's)."""
        try:
            if self.pool is not None:
                self._search(self.pool)
            else:
                with ClusterPool(backend=self.backend, attach=self.attach) as pool:
                    self._search(pool)
        except (KeyboardInterrupt, SystemExit):
            self.stopped_by = "interrupted"  # also while the first cluster starts
            raise
        finally:
            self.close()
        return self.findings

    def _search(self, pool: ClusterPool) -> None:
        self.begin(pool)
        while self.step(pool):
            pass

    def begin(self, pool: ClusterPool, deadline: float | None = None) -> None:
        """Start the clock (the budget ends at ``deadline``, default ``budget_s`` from now) and build the plan
        on the capabilities of the workload's cluster, which ``pool`` keeps from here on (pinned: a nightly
        that interleaves exploration runs its catalogue on the pool's other cluster)."""
        from chaos.model.faults.base import FAMILIES

        self.started = time.monotonic()
        self.deadline = deadline if deadline is not None else self.started + self.budget_s
        cluster = pool.get(self.workload.cluster, pin=True, backend=self.workload.backend)
        self.capabilities = sorted(c.value for c in cluster.capabilities)
        self.plan = Plan(self.workload, self.seed, self.families or FAMILIES, frozenset(cluster.capabilities))
        self._runs = iter(self.plan.runs(self.shard))

    def step(self, pool: ClusterPool) -> bool:
        """Run the plan's next run (this shard's) and, when it is red and new, its replay and shrink; False once
        the exploration is over (budget, ``max_runs``, ``max_findings``), with ``stopped_by`` saying why.
        Raises :class:`BatchStopped` on a run that could not run, ``KeyboardInterrupt`` as it comes."""
        if self.done:
            return False
        t0 = time.monotonic()
        try:
            return self._step(pool)
        except (KeyboardInterrupt, SystemExit):
            self.stopped_by, self.done = "interrupted", True
            raise
        except BatchStopped as exc:
            self.stopped_by, self.error, self.done = "error", str(exc), True
            raise
        finally:
            self.spent_s += time.monotonic() - t0

    def _step(self, pool: ClusterPool) -> bool:
        planned = next(self._runs)  # the plan has no end
        if self.max_runs is not None and planned.index >= self.max_runs:
            self.stopped_by, self.done = "runs", True
            return False
        if time.monotonic() + estimate_s(planned.experiment) > self.deadline:
            self.done = True
            return False
        oc = self._one(pool, planned)
        if oc.valid == "error":
            raise BatchStopped(f"run {planned.index} of the plan (seed {planned.seed}) could not run: {oc.error}; "
                               f"stopped after {len(self.outcomes)} run(s){oc.details}", self.outcomes)
        self._write_summary()  # before a replay and shrink that may take minutes
        if oc.valid == "false":
            self._red(pool, planned, oc)
            self._write_summary()
        if self.max_findings is not None and len(self.findings) >= self.max_findings:
            self.stopped_by, self.done = "findings", True
            return False
        return True

    def close(self) -> None:
        """Write the final summary (also after an interruption or an error)."""
        self._write_summary()

    def _one(self, pool: ClusterPool, planned: PlannedRun) -> RunOutcome:
        exp = planned.experiment
        run_dir = self.out / exp.name / f"run-{planned.index:03d}-seed-{planned.seed}"
        if self.on_start:
            self.on_start(exp, planned.index, planned.seed)
        oc = pooled_run(pool, exp, planned.seed, run_dir, planned.index)
        self.outcomes.append(oc)
        if self.on_run:
            self.on_run(oc)
        self.ran_cells.extend(planned.cells)
        # faults.json lists the experiment's faults in order (no random triggers here): one record per cell
        self.fired_cells.extend(c for c, rec in zip(planned.cells, oc.faults, strict=False) if rec.get("fired"))
        if oc.valid == "unknown":
            self.unknowns.append({"run": self._rel(oc.run_dir), "explanation": oc.explanation})
        elapsed_h = max(time.monotonic() - self.started, 1.0) / 3600
        self.say(f"run {planned.index} (seed {planned.seed}): {'; '.join(c.label() for c in planned.cells)} -> "
                 f"{oc.valid}{' (' + ', '.join(oc.failed_checkers) + ')' if oc.failed_checkers else ''} "
                 f"in {oc.wall_s:.0f} s | {len(self.outcomes)} runs, {len(self.outcomes) / elapsed_h:.0f} runs/h, "
                 f"{len(set(self.ran_cells))} cells tried, {len(self.findings)} findings")
        return oc

    def _rel(self, path: str | Path) -> str:
        try:
            return str(Path(path).relative_to(self.out))
        except ValueError:
            return str(path)

    # ------------------------------------------------------------ a red run
    def _red(self, pool: ClusterPool, planned: PlannedRun, oc: RunOutcome) -> None:
        kinds = {f.type for f in planned.experiment.faults}
        known = next((f for f in self.findings if f.explains(oc, kinds)), None)
        if known is not None:
            known.hits += 1
            known.also.append(self._rel(oc.run_dir))
            self._write_finding(self.out / FINDINGS_DIR / known.signature, known)
            self.say(f"  red again: finding {known.signature} ({', '.join(known.checkers)}), hit {known.hits}")
            return
        t0 = time.monotonic()
        try:
            self._investigate(pool, planned, oc)
        finally:
            self.investigated_s += time.monotonic() - t0

    def _shrink_budget(self) -> float:
        """What replays and shrinks may still spend: their share less what they spent, within the budget left."""
        return max(0.0, min(self.shrink_share * self.budget_s - self.investigated_s, self.deadline - time.monotonic()))

    def _investigate(self, pool: ClusterPool, planned: PlannedRun, oc: RunOutcome) -> None:
        from chaos.shrink import Shrinker

        work = self.out / FINDINGS_DIR / f"pending-{planned.index:03d}"
        red_after_s = round(time.monotonic() - self.started, 1)
        rec = load_recorded(oc.run_dir)
        budget = self._shrink_budget()
        replay: dict[str, Any] | None = None
        minimal: Experiment | None = None
        interrupted: BaseException | None = None
        failed, runs = 0, 0
        self.say(f"  new red run: replaying and shrinking with {budget / 60:.1f} min")
        if budget >= estimate_s(rec.experiment):
            shrinker = Shrinker(rec, work / "shrink", budget_s=budget, tries=SHRINK_TRIES, confirm=SHRINK_CONFIRM,
                                pool=pool, say=lambda line: self.say(f"    {line}"))
            try:
                minimal = shrinker.shrink()
            except (KeyboardInterrupt, SystemExit) as exc:  # file what was found so far, then stop
                interrupted, minimal = exc, shrinker.best
            first = shrinker.attempts[0].runs if shrinker.attempts else []
            if first:
                replay = {"valid": first[0]["valid"], "failed": first[0]["failed"],
                          "run_dir": self._rel(first[0]["run_dir"])}
            failed, runs = shrinker.rate()
            if minimal is not None:
                cls = FindingClass.WITHOUT_FAULTS if not minimal.faults else FindingClass.UNDER_FAULTS
            else:
                cls = FindingClass.NOT_REPRODUCED if replay is not None else FindingClass.NOT_SHRUNK
            target = shrinker.target
        else:
            cls, target = FindingClass.NOT_SHRUNK, frozenset(oc.failed_checkers)
        checkers = sorted(self._failing_in_minimal(work / "shrink", target) if minimal is not None
                          else set(oc.failed_checkers))
        kinds = sorted({f.type for f in (minimal or planned.experiment).faults})
        sig = signature(checkers, kinds, cls.value)
        finding = Finding(sig, checkers, kinds, cls.value, self.workload.name, self._rel(oc.run_dir), oc.seed,
                          None if self.shard.n == 1 else str(self.shard), replay,
                          "minimal.yaml" if minimal is not None else None, failed, runs,
                          round(time.monotonic() - self.started, 1), red_after_s=red_after_s)
        finding.explanation = self._explain(finding, oc, minimal)
        dest = self.out / FINDINGS_DIR / sig
        same = next((f for f in self.findings if f.signature == sig), None)
        if same is not None:  # found again by another route: one more hit, the first one's files are kept
            same.hits += 1
            same.also.append(finding.first_run)
            self._write_finding(dest, same)
            shutil.rmtree(work, ignore_errors=True)
            if interrupted is not None:
                raise interrupted
            return
        work.mkdir(parents=True, exist_ok=True)
        _link_copy(Path(oc.run_dir), work / "run")
        if minimal is not None:
            shutil.copy2(work / "shrink" / "minimal.yaml", work / "minimal.yaml")
        else:
            (work / "experiment.yaml").write_text(experiment_yaml(planned.experiment, "the red run's experiment"))
        (work / "explanation.md").write_text(finding.explanation + "\n")
        self._write_finding(work, finding)
        work.rename(dest)
        self.findings.append(finding)
        self.say(f"  finding {sig}: {cls.value}, {', '.join(checkers)}"
                 f"{' under ' + ', '.join(kinds) if kinds else ''} -> {dest}")
        if interrupted is not None:
            raise interrupted

    @staticmethod
    def _failing_in_minimal(shrink_out: Path, target: frozenset[str]) -> set[str]:
        """The target checkers that failed in some run of the minimal experiment (``shrink-log.jsonl``: the
        failing attempts and confirmations of the last experiment kept)."""
        failing: set[str] = set()
        try:
            lines = [json.loads(line) for line in (shrink_out / "shrink-log.jsonl").read_text().splitlines()]
        except (OSError, ValueError):
            return set(target)
        last_kept = max((i for i, a in enumerate(lines) if a.get("failing")), default=None)
        for a in lines[last_kept:] if last_kept is not None else []:
            for r in a.get("runs", []):
                failing |= set(r.get("failed", [])) & target
        return failing or set(target)

    def _explain(self, f: Finding, oc: RunOutcome, minimal: Experiment | None) -> str:
        """One paragraph, what happened first: the class, then the invariants and where the evidence is."""
        what = ", ".join(f.checkers)
        if f.finding_class == FindingClass.WITHOUT_FAULTS:
            head = (f"The consumer breaks {what} with no fault at all: the minimal experiment has none and failed "
                    f"in {f.minimal_failed_runs} of {f.minimal_runs} runs.")
        elif f.finding_class == FindingClass.UNDER_FAULTS and minimal is not None:
            head = (f"Under {', '.join(f.fault_kinds)} ({len(minimal.faults)} fault(s), "
                    f"{len(minimal.workload.consumers)} members, {minimal.workload.partitions} partitions) the group "
                    f"breaks {what}: the minimal experiment failed in {f.minimal_failed_runs} of {f.minimal_runs} runs.")
        elif f.finding_class == FindingClass.NOT_REPRODUCED:
            head = (f"A run broke {what} under {', '.join(f.fault_kinds)}, and its replay (the faults as they fired) "
                    f"did not: the failure depends on timing the replay does not fix; the run is kept as evidence.")
        else:
            head = (f"A run broke {what} under {', '.join(f.fault_kinds) or 'no fault'}; the budget held no shrink "
                    "(the replay's verdict, when it ran, is in finding.json).")
        return f"{head} Original run {f.first_run} (seed {f.seed}): {oc.explanation or 'no explanation recorded'}"

    def _write_finding(self, where: Path, f: Finding) -> None:
        where.mkdir(parents=True, exist_ok=True)
        (where / "finding.json").write_text(json.dumps(asdict(f), indent=1))

    # ------------------------------------------------------------ the summary
    def summary(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        verdicts = Counter(o.valid for o in self.outcomes)
        return {
            "workload": self.workload.name, "seed": self.seed, "shard": None if self.shard.n == 1 else str(self.shard),
            "families": list(self.families) if self.families else None, "capabilities": self.capabilities,
            "kafka_version": self.workload.cluster.kafka_version, "budget_s": self.budget_s,
            "shrink_share": self.shrink_share, "max_runs": self.max_runs, "elapsed_s": round(elapsed, 1),
            "investigated_s": round(self.investigated_s, 1), "spent_s": round(self.spent_s, 1),
            "stopped_by": self.stopped_by, "error": self.error,
            "runs": len(self.outcomes), "runs_per_hour": round(len(self.outcomes) / max(elapsed, 1.0) * 3600, 1),
            "verdicts": {v: verdicts.get(v, 0) for v in ("true", "false", "unknown", "error")},
            "plan_indices": [o.index for o in self.outcomes],
            "unknowns": self.unknowns,
            "coverage": coverage(self.plan, self.ran_cells) if self.plan else None,
            "fired_cells": len(set(self.fired_cells)),
            "findings": [f.signature for f in self.findings],
            "finding_details": [{k: v for k, v in asdict(f).items() if k != "also"} for f in self.findings],
        }

    def _write_summary(self) -> None:
        if not self.outcomes and not self.out.exists():
            return  # nothing ran (the first cluster did not start): no archive left behind
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / (SUMMARY_FILE + ".tmp")
        tmp.write_text(json.dumps(self.summary(), indent=1, default=str))
        tmp.replace(self.out / SUMMARY_FILE)
